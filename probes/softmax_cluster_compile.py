"""Probe (no GPU): can Triton 3.6 reduce a softmax row across the CTAs of a thread-block cluster?

The question. A row too long for one SM's registers could live in a cluster of CTAs (sm_90: up
to 16), each holding a slice in registers, with the row's max and sum exchanged through
distributed shared memory and a cluster barrier instead of global memory: read once, written
once, no round trip to L2 a round. That needs the compiler to lower a reduction whose operand is
spread over a cluster (or the language to expose DSMEM loads and stores and cluster barriers).

The cases, each compiled for sm_90 in a process of its own (a failed lowering can abort):
  triton_ctasN   a one-row-a-program softmax in Triton with num_ctas=N (Triton's planner lays the
                 row over N CTAs of a cluster)
  gluon_ctasN    the same in Gluon with an explicit CGA layout splitting the row over N CTAs
Each prints `ok` with the cluster instructions found in the PTX (mapa, barrier.cluster,
ld/st.shared::cluster), or the error that stopped it.

Measured with the wheel's triton 3.6.0 (CPU build, sm_90 target): only the one-CTA cases
compile. With 2 or 4 CTAs, Triton's CTA planner lays the CTAs along the row dimension (size 1)
and the reduction's result fails verification ("Result has an invalid layout: #ttg.slice<...
CGALayout = [[1, 0], [0, 0]]>"), and Gluon's reduction lowering, given the columns split over
the CTAs, asserts that the reduction stays within one CTA (`helper.isReduceWithinCTA()`,
ReduceOpToLLVM.cpp). Gluon's Hopper API has no distributed shared
memory access or cluster barrier besides fence_async_shared(cluster=True). So at this Triton a
cluster reduction is not available, and the long rows exchange their partials through global
memory (kernels/fused_softmax.py, split).

    python3 probes/softmax_cluster_compile.py            (all cases; no GPU needed)
"""
from __future__ import annotations

import re
import subprocess
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

BLOCK = 32768            # fp16 columns of the row
WARPS = 16
CLUSTER_PTX = r"\b(mapa[.\w]*|barrier\.cluster[.\w]*|[ls]d\.shared::cluster[.\w]*|%cluster\w*)"
CASES = [f"{lang}_ctas{n}" for lang in ("triton", "gluon") for n in (1, 2, 4)]


@triton.jit
def _triton_row(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)[None, :]            # (1, BLOCK): the planner may split the columns
    row = tl.program_id(0)
    x = tl.load(X + row * N + offs, mask=offs < N, other=-float("inf")).to(tl.float32)
    e = tl.exp2(x - tl.max(x, 1)[:, None])
    tl.store(Y + row * N + offs, (e / tl.sum(e, 1)[:, None]).to(Y.dtype.element_ty), mask=offs < N)


@gluon.jit
def _gluon_row(X, Y, N, BLOCK: gl.constexpr, CTAS: gl.constexpr):
    if CTAS == 1:
        layout: gl.constexpr = gl.BlockedLayout([8], [32], [16], [0])
    elif CTAS == 2:
        layout: gl.constexpr = gl.BlockedLayout([8], [32], [16], [0], cga_layout=[[1]])
    else:
        layout: gl.constexpr = gl.BlockedLayout([8], [32], [16], [0], cga_layout=[[1], [2]])
    offs = gl.arange(0, BLOCK, layout=layout)
    row = gl.program_id(0)
    x = gl.load(X + row * N + offs, mask=offs < N, other=float("-inf")).to(gl.float32)
    e = gl.exp2(x - gl.max(x, 0))
    gl.store(Y + row * N + offs, (e / gl.sum(e, 0)).to(gl.float16), mask=offs < N)


def compile_case(case: str):
    lang, ctas = case.split("_ctas")
    ctas = int(ctas)
    signature = {"X": "*fp16", "Y": "*fp16", "N": "i32", "BLOCK": "constexpr"}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(3)}
    if lang == "triton":
        from triton.compiler import ASTSource
        src = ASTSource(_triton_row, signature, {(3,): BLOCK}, attrs)
    else:
        from triton.experimental.gluon._runtime import GluonASTSource
        src = GluonASTSource(_gluon_row, {**signature, "CTAS": "constexpr"}, {(3,): BLOCK, (4,): ctas}, attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=WARPS, num_ctas=ctas))


def run_one(case: str) -> None:
    kernel = compile_case(case)
    found = sorted(set(re.findall(CLUSTER_PTX, kernel.asm["ptx"])))
    print(f"ok; cluster instructions in the PTX: {', '.join(found) or 'none'}")


def first_error(text: str) -> str:
    for pattern in (r"error: (?!Failures)[^\n]*", r"Assertion `[^']*' failed", r"\w+Error: [^\n]*"):
        hit = re.search(pattern, text)
        if hit:
            return hit.group(0)[:240]
    return text.strip().splitlines()[-1][:240] if text.strip() else "no output"


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        run_one(sys.argv[2])
        return
    for case in CASES:
        done = subprocess.run([sys.executable, __file__, "--case", case], capture_output=True, text=True,
                              timeout=600)
        result = done.stdout.strip() if done.returncode == 0 else f"failed: {first_error(done.stderr + done.stdout)}"
        print(f"{case:>14}: {result}")


if __name__ == "__main__":
    main()
