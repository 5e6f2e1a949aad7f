"""Probe without a GPU: registers, spills and shared memory of the decode launches, compiled for sm_90.

Run from the repository root:  python3 probes/decode_resources.py [SHAPE ...]
SHAPE is B,Hkv,L with optional flags: paged (64-token pages), lengths (seqlens passed), plain (chunks
never dealt out by length), e.g. `16,8,4096,paged,lengths`; without shapes, the paged and contiguous
launches with lengths whose two paths (dealt by length, Lmax's chunks) docs/kernels/decode.md compares.

Each shape is planned as decode_attention plans it on an H100/H200 (132 SMs and the per-SM limits of
kernels._device.INTERPRETER_PER_SM, fp16, Hq=32, D=128), then its kernel is compiled by Triton for
sm_90 with the arguments specialised as the JIT specialises them (pointers and multiples of 16
marked 16-byte divisible, ints equal to 1 as constants, except the do_not_specialize ones). The
wheel's ptxas and cuobjdump (triton/backends/nvidia/bin) give the registers a thread, the stack
frame (spilled registers live there), and the SASS's spill loads (LDL) and stores (STL), in all and
inside each innermost loop (a backward branch closes a loop; the tile loops, the merge's and the
bisection's), in the order of the code, and the instructions of each innermost loop of more than
40. Nothing runs: no GPU or driver is needed. PROBE_HQ and PROBE_HEAD_DIM set Hq and D (32, 128).

The length-dealt launch's cost where the lengths are equal (probes/decode_balance.py: 2% at the
head_dim-64 paged shape, B=16 Hq=16 Hkv=2 L=8192, and contiguous with lengths) read here at 30ebc85
(PROBE_HQ=16 PROBE_HEAD_DIM=64, fp16, instructions of the tile loops): contiguous with lengths, the dealt
copy 393 and the Lmax-chunk copy that equal lengths run 414, where the kernel without SPREAD has 393;
the 21 more are register moves (IMAD.MOV.U32 33 against 17, MOV 9 against 1). Paged, 401 and 396
against 394 (225 registers against 211, no spills at the 255 cap). Placing the equal-lengths path
first (f94d800) gave it 392 instructions contiguous and 396 paged, but at the 128-register paged
launches of D=128 it moved the other way (B=4 Hkv=32 L=1024 351 against 339, B=16 Hkv=8 L=4096 352
against 349). Timed on an H100 (GPU-ee34477c, decode_balance.py at that shape, bf16): 26.6 us
contiguous against HEAD's 26.9, 27.4 with lengths against 27.3, paged 28.0 against 28.1, all inside
a trial's noise; it is not kept. One copy of the loop for both paths (the
chunk chosen before it) took 415 contiguous and 447 paged.
"""
from __future__ import annotations

import os
import re
import sys
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import sm90  # noqa: E402  (probes/, the script's directory)
from kernels import flash_decoding as fd  # noqa: E402
from kernels._device import INTERPRETER_PER_SM, INTERPRETER_SMS  # noqa: E402

HQ = int(os.environ.get("PROBE_HQ", "32"))          # query heads
D = int(os.environ.get("PROBE_HEAD_DIM", "128"))    # head_dim
PAGE = 64                                           # tokens a page (paged shapes)
DEFAULT = ["16,8,4096,paged,lengths", "16,8,4096,paged,lengths,plain", "4,32,1024,paged,lengths",
           "4,32,1024,paged,lengths,plain", "4,8,32768,lengths", "4,8,32768,lengths,plain", "4,8,32768"]


def plan(spec: str):
    """(decode plan, kernel arguments) of a SHAPE spec, planned as on an H100/H200."""
    batch, heads_kv, cache_len, *flags = spec.split(",")
    batch, heads_kv, cache_len = int(batch), int(heads_kv), int(cache_len)
    q = torch.empty(batch, HQ, D, dtype=torch.float16)
    k = torch.empty(batch, heads_kv, cache_len, D, dtype=torch.float16)
    lens = torch.full((batch,), cache_len, dtype=torch.int32) if "lengths" in flags else None
    table = None
    if "paged" in flags:
        k, _, table = fd.paged_cache(k, k, PAGE, seed=1)
    with mock.patch.object(fd, "check_tensor", lambda *a, **kw: None), \
            mock.patch.object(fd, "sm_count", lambda device: INTERPRETER_SMS), \
            mock.patch.object(fd, "per_sm", lambda device, key: INTERPRETER_PER_SM[key]), \
            mock.patch.object(fd, "interpreting", lambda: False):
        p = fd._plan(q, k, k, lens, None, None, table, None, None, None, None, None,
                     False if "plain" in flags else None)
    scratch = torch.empty(1, dtype=torch.float32)
    tensors = (q, k, k, q if lens is None else lens, q if table is None else table, q, scratch, scratch,
               torch.empty(1, dtype=torch.int32))
    args = (*tensors, *p.strides, *(table.stride() if table is not None else (0, 0)),
            1 if lens is None else lens.stride(0), *p.rest)
    return p, args


def compile_for_sm90(p, args):
    """The compiled kernel of a plan's launch (Triton for sm_90, the JIT's specialisation)."""
    return sm90.compile_for_sm90(fd._decode_kernel, args, dict(p.options))


def resources(kernel) -> dict:
    """Registers, stack and shared bytes, and spill loads/stores in the SASS (all, and per loop)."""
    usage, sass = sm90.cuobjdump(kernel, "-res-usage"), sm90.cuobjdump(kernel, "-sass")
    regs, stack = re.search(r"REG:(\d+).*?STACK:(\d+)", usage).groups()
    code = [(int(a, 16), ins) for a, ins in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    spans = []                                                    # a backward branch closes a loop
    for addr, ins in code:
        branch = re.search(r"BRA\s.*0x([0-9a-f]+)", ins)
        if branch and int(branch.group(1), 16) < addr:
            spans.append((int(branch.group(1), 16), addr))
    innermost = [(top, end) for top, end in spans                 # the tile, merge and bisection loops
                 if not any(top <= t and e <= end and (t, e) != (top, end) for t, e in spans)]
    loops = [sum(" LDL" in f" {i}" for a, i in code if top <= a <= end) for top, end in innermost]
    sizes = [n for n in (sum(1 for a, _ in code if top <= a <= end) for top, end in innermost) if n > 40]
    return dict(regs=int(regs), stack=int(stack), shared=kernel.metadata.shared,
                ldl=sum(" LDL" in f" {i}" for _, i in code), stl=sum(" STL" in f" {i}" for _, i in code),
                loop_ldl=loops, loop_sizes=sizes)


def main(specs: list[str]) -> None:
    print("shape | grid | options | registers | stack B | shared B | LDL / STL | LDL in each innermost loop"
          " | instructions of each innermost loop over 40")
    for spec in specs:
        p, args = plan(spec)
        r = resources(compile_for_sm90(p, args))
        print(f"{spec} | {p.grid} | {p.options} | {r['regs']} | {r['stack']} | {r['shared']} | "
              f"{r['ldl']} / {r['stl']} | {r['loop_ldl']} | {r['loop_sizes']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
