"""Probe: a long softmax row held in the registers of a thread-block cluster, its (max, sum)
exchanged through distributed shared memory.

The question. Split reads a long row twice (the second time mostly from L2) and syncs its
segments through global memory, and holds the few-long-row shapes at 0.73-0.92 of the copy;
the row kernel, which holds a row in one program's registers and reads it once, reaches
0.96-0.97 where a row fits. Triton 3.6 does not lower a reduction across the CTAs of a cluster
(probes/softmax_cluster_compile.py), but it compiles a kernel for one CTA that a launch can
group into clusters, and inline PTX can do the exchange: each CTA of a cluster of C holds a
slice of the row in registers (one load, one exponential an element), reduces it to (max, sum),
writes that pair into every CTA's shared memory (mapa + st.shared::cluster, beyond what Triton
allocates), meets the others at one cluster barrier (release / acquire), merges the C pairs and
writes its slice normalised: one read and one write of the row, no global-memory exchange.

The launch. The kernel is compiled with num_ctas=1 (tl.program_id(0) is %ctaid.x) and launched
through Triton's launcher with num_ctas = C in its metadata, which makes the grid rows x C CTAs
in clusters of C (consecutive CTAs; the cluster rank is %cluster_ctarank) and asks the driver
for a non-portable size at 16. Its dynamic shared memory is Triton's plus C pairs.

Variants: clusterC_sS_wW (C CTAs a row, S columns a CTA, W warps), each checked against float64
with its output poisoned first, beside `ours`, the shipped strategies that apply, and a copy.

Measured at 084939d (H200 GPU-2602221f, CUPTI medians, share of the copy; every cluster variant
matched float64 on the hostile input with its output poisoned): 1024x131072 fp16 C=8 on 8 warps
0.72, on 16 0.68, C=4 0.61, against ours (split) 0.86; fp32 C=8 on 16 warps 0.85, C=16 on 4 warps
0.84, on 8 0.77, against 0.92; 512x151936 bf16 C=5 0.51 against 0.77; 256x262144 fp16 C=16 0.63,
C=8 0.56, against 0.80; fp32 C=16 0.54 against 0.87; 4096x32768 fp16 C=4 on 4 warps 0.80, C=2
0.71, against looped 0.91. The exchange works; the kernel does not keep bytes in flight: each
CTA loads its slice, reduces, waits for its cluster, then stores, at 1-2 CTAs an SM (57-128
registers a thread), with nothing loading behind it. Persistent clusters that load their next
row's slice into registers before exchanging this one's (643e0ac, GPU-ae7c15c0; 107-220 registers,
1-3 CTAs an SM) were slower still, every one of them correct: 1024x131072 fp16 0.32 (C=8, 1 an
SM) and 0.57 (C=16 on 4 warps, 2 an SM's worth) against 0.71 for a cluster a row and 0.86 for
split; fp32 0.48-0.51 against 0.85 and 0.92; 256x262144 fp16 0.28-0.30, fp32 0.42; 4096x32768
fp16 0.50-0.62 against 0.80; 512x151936 0.18-0.28. Not kept; what is left to try is the next
row's slice in shared memory (by TMA), which costs no registers.

    PYTHONUNBUFFERED=1 python3 probes/softmax_cluster_row.py       (a GPU; $OUT/softmax_cluster_row.csv)
    PROBE_DRYRUN=1 python3 probes/softmax_cluster_row.py           (no GPU: sm_90 registers, the PTX's
                                                                    cluster instructions)
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402
from kernels._device import sm_count as num_sms  # noqa: E402
from softmax_split_slots import TOL  # noqa: E402

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "100"))
# (rows, cols, dtype, [(C, columns a CTA, warps, clusters an SM's worth: 0 one row a cluster), ...])
SHAPES = [   # persistent settings at the clusters an SM holds (sm_90 registers, PROBE_DRYRUN=1)
    (1024, 131072, torch.float16, [(8, 16384, 8, 0), (8, 16384, 8, 1), (8, 16384, 16, 1), (16, 8192, 4, 2)]),
    (1024, 131072, torch.float32, [(8, 16384, 16, 0), (16, 8192, 8, 2), (8, 16384, 16, 1)]),
    (256, 262144, torch.float16, [(16, 16384, 8, 0), (16, 16384, 8, 1), (16, 16384, 16, 1)]),
    (256, 262144, torch.float32, [(16, 16384, 16, 0), (16, 16384, 16, 1)]),
    (4096, 32768, torch.float16, [(4, 8192, 4, 0), (4, 8192, 4, 3), (2, 16384, 8, 1)]),
    (512, 151936, torch.bfloat16, [(5, 32768, 16, 0), (16, 16384, 8, 1)]),
    (512, 151936, torch.float32, [(16, 16384, 16, 1)]),
]
NEG_INF = "0fFF800000"
LOG2E_HEX = "0f3FB8AA3B"


def merge_asm(ctas: int, start_wait: bool = True) -> str:
    """PTX: $0, $1 = the row's (max, sum) from this CTA's ($2, $3), the pairs of all `ctas` CTAs of
    the cluster written at shared offset $4 of each (thread 0 writes; every thread reads), once the
    kernel's first cluster barrier (arrived at its start) says every CTA of the cluster runs
    (start_wait; else the caller has waited on it)."""
    lines = ["{",
             ".reg .u32 %cx_base, %cx_slot, %cx_far, %cx_j;",
             ".reg .f32 %cx_pm, %cx_ps, %cx_M, %cx_Ms, %cx_S, %cx_t;",
             ".reg .pred %cx_lead, %cx_empty;",
             "mov.u32 %cx_base, global_smem;",
             "add.u32 %cx_base, %cx_base, $4;",
             "mov.u32 %cx_j, %cluster_ctarank;",
             "mad.lo.u32 %cx_slot, %cx_j, 8, %cx_base;",
             "mov.u32 %cx_j, %tid.x;",
             "setp.eq.u32 %cx_lead, %cx_j, 0;"]
    if start_wait:
        lines.append("barrier.cluster.wait.aligned;")    # every CTA of the cluster has started
    for j in range(ctas):
        lines += [f"mov.u32 %cx_j, {j};",
                  "mapa.shared::cluster.u32 %cx_far, %cx_slot, %cx_j;",
                  "@%cx_lead st.shared::cluster.v2.f32 [%cx_far], {$2, $3};"]
    lines += ["barrier.cluster.arrive.release.aligned;",
              "barrier.cluster.wait.acquire.aligned;",
              f"mov.f32 %cx_M, {NEG_INF};"]
    for j in range(ctas):
        lines += [f"ld.shared.v2.f32 {{%cx_pm, %cx_ps}}, [%cx_base+{8 * j}];",
                  "max.f32 %cx_M, %cx_M, %cx_pm;"]
    lines += [f"setp.eq.f32 %cx_empty, %cx_M, {NEG_INF};",
              "selp.f32 %cx_Ms, 0f00000000, %cx_M, %cx_empty;",
              "mov.f32 %cx_S, 0f00000000;"]
    for j in range(ctas):
        lines += [f"ld.shared.v2.f32 {{%cx_pm, %cx_ps}}, [%cx_base+{8 * j}];",
                  "sub.f32 %cx_t, %cx_pm, %cx_Ms;",
                  f"mul.f32 %cx_t, %cx_t, {LOG2E_HEX};",
                  "ex2.approx.ftz.f32 %cx_t, %cx_t;",
                  "fma.rn.f32 %cx_S, %cx_ps, %cx_t, %cx_S;"]
    lines += ["mov.f32 $0, %cx_M;", "mov.f32 $1, %cx_S;", "}"]
    return "\n".join(lines)


@triton.jit
def _cluster_row_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_cols, smem_off,
                        SLICE: tl.constexpr, CTAS: tl.constexpr, MERGE: tl.constexpr):
    pid = tl.inline_asm_elementwise("barrier.cluster.arrive.relaxed.aligned;\nmov.u32 $0, $1;", "=r,r",
                                    [tl.program_id(0)], dtype=tl.int32, is_pure=False, pack=1)   # started
    row = pid // CTAS
    offs = (pid % CTAS) * SLICE + tl.arange(0, SLICE)
    mask = offs < n_cols
    x = tl.load(x_ptr + tl.cast(row, tl.int64) * x_row_stride + offs, mask=mask, other=-float("inf"),
                eviction_policy="evict_first").to(tl.float32)
    m = tl.max(x, axis=0)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    e = tl.exp2((x - m_safe) * fs.LOG2E)
    s = tl.sum(e, axis=0)
    row_max, row_sum = tl.inline_asm_elementwise(MERGE, "=f,=f,f,f,r", [m, s, smem_off],
                                                 dtype=(tl.float32, tl.float32), is_pure=False, pack=1)
    # a slice of -inf adds nothing (0 / sum), unless the whole row is -inf (0 / 0: NaN, as torch)
    scale = tl.where(m == -float("inf"), 0.0 / row_sum, tl.exp2((m_safe - row_max) * fs.LOG2E) / row_sum)
    tl.store(out_ptr + tl.cast(row, tl.int64) * out_row_stride + offs, (e * scale).to(out_ptr.dtype.element_ty),
             mask=mask, cache_modifier=".cs")


@triton.jit
def _cluster_rows_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_rows, n_cols, smem_off,
                         SLICE: tl.constexpr, CTAS: tl.constexpr, MERGE: tl.constexpr):
    """Persistent clusters: cluster k takes rows k, k + K, ... (K clusters in the grid) and loads its
    slice of the next row before it exchanges and stores this one's. The pairs alternate between
    two sets of slots by the row's parity, so a CTA a row ahead never overwrites pairs a CTA of its
    cluster has not read (it passes the next cluster barrier only after they all did)."""
    pid = tl.inline_asm_elementwise("barrier.cluster.arrive.relaxed.aligned;\nmov.u32 $0, $1;", "=r,r",
                                    [tl.program_id(0)], dtype=tl.int32, is_pure=False, pack=1)
    first = pid // CTAS
    n_clusters = tl.num_programs(0) // CTAS
    offs = (pid % CTAS) * SLICE + tl.arange(0, SLICE)
    mask = offs < n_cols
    x = tl.load(x_ptr + tl.cast(first, tl.int64) * x_row_stride + offs, mask=mask & (first < n_rows),
                other=-float("inf"), eviction_policy="evict_first")
    first = tl.inline_asm_elementwise("barrier.cluster.wait.aligned;\nmov.u32 $0, $1;", "=r,r", [first],
                                      dtype=tl.int32, is_pure=False, pack=1)   # the cluster runs
    parity = 0
    for row in range(first, n_rows, n_clusters):
        xf = x.to(tl.float32)
        m = tl.max(xf, axis=0)
        m_safe = tl.where(m == -float("inf"), 0.0, m)
        e = tl.exp2((xf - m_safe) * fs.LOG2E)
        s = tl.sum(e, axis=0)
        nxt = row + n_clusters
        x = tl.load(x_ptr + tl.cast(nxt, tl.int64) * x_row_stride + offs, mask=mask & (nxt < n_rows),
                    other=-float("inf"), eviction_policy="evict_first")
        row_max, row_sum = tl.inline_asm_elementwise(MERGE, "=f,=f,f,f,r", [m, s, smem_off + parity * (8 * CTAS)],
                                                     dtype=(tl.float32, tl.float32), is_pure=False, pack=1)
        parity = 1 - parity
        scale = tl.where(m == -float("inf"), 0.0 / row_sum, tl.exp2((m_safe - row_max) * fs.LOG2E) / row_sum)
        tl.store(out_ptr + tl.cast(row, tl.int64) * out_row_stride + offs, (e * scale).to(out_ptr.dtype.element_ty),
                 mask=mask, cache_modifier=".cs")


_COMPILED: dict = {}


def cluster_row(x: torch.Tensor, out: torch.Tensor, ctas: int, slice_cols: int, warps: int, per_sm: int = 0):
    """softmax of x's rows into out: a cluster of `ctas` CTAs a row, `slice_cols` columns each; per_sm
    0: a cluster a row (`_cluster_row_kernel`), else per_sm * SMs / ctas persistent clusters
    (`_cluster_rows_kernel`)."""
    rows, cols = x.shape
    if ctas * slice_cols < cols:
        raise ValueError(f"{ctas} x {slice_cols} columns do not cover {cols}")
    persistent = per_sm > 0
    sizes = (rows, cols) if persistent else (cols,)
    key = (x.dtype, ctas, slice_cols, warps, persistent, x.stride(0) % 16, cols % 16)
    if key not in _COMPILED:     # the kernel, its merge PTX and its launch metadata, made once
        kernel = _cluster_rows_kernel if persistent else _cluster_row_kernel
        merge = merge_asm(ctas, start_wait=not persistent)
        compiled = kernel.warmup(out, x, x.stride(0), out.stride(0), *sizes, 0, SLICE=slice_cols, CTAS=ctas,
                                 MERGE=merge, num_warps=warps, grid=(1,))
        compiled._init_handles()
        smem_off = -(-compiled.metadata.shared // 16) * 16
        _COMPILED[key] = (compiled, merge, smem_off, (compiled.metadata.num_warps, ctas, smem_off + 16 * ctas))
    compiled, merge, smem_off, meta = _COMPILED[key]
    clusters = min(rows, max(1, per_sm * num_sms(x.device) // ctas)) if persistent else rows
    stream = torch.cuda.current_stream().cuda_stream
    compiled.run(clusters, 1, 1, stream, compiled.function, meta, None, None, None,
                 out, x, x.stride(0), out.stride(0), *sizes, smem_off, slice_cols, ctas, merge)
    return out


def variants(x, out, sms):
    fns = {"ours": lambda: fs.softmax(x), "split": lambda: fs.STRATEGIES["split"].run(x, out),
           "looped": lambda: fs.STRATEGIES["looped"].run(x, out)}
    settings = {(r, c, dt): s for r, c, dt, s in SHAPES}[(*x.shape, x.dtype)]
    for ctas, slice_cols, warps, per_sm in settings:
        name = f"cluster{ctas}_s{slice_cols}_w{warps}" + (f"_pm{per_sm}" if per_sm else "")
        fns[name] = lambda a=(ctas, slice_cols, warps, per_sm): cluster_row(x, out, *a)
    return fns


def dry_run() -> None:
    """Compile every setting for sm_90 offline: registers, spills, programs an SM, the PTX's cluster ops."""
    import re
    from sm90 import compile_for_sm90, programs_per_sm, usage
    for rows, cols, dtype, settings in SHAPES:
        x = torch.empty(2, cols, dtype=dtype)
        for ctas, slice_cols, warps, per_sm in settings:
            kernel, sizes = (_cluster_rows_kernel, (rows, cols)) if per_sm else (_cluster_row_kernel, (cols,))
            kernel = compile_for_sm90(kernel, (x, x, cols, cols, *sizes, 64, slice_cols, ctas,
                                               merge_asm(ctas, start_wait=not per_sm)), dict(num_warps=warps))
            u = usage(kernel)
            ops = sorted(set(re.findall(r"\b(barrier\.cluster[.\w]*)", kernel.asm["ptx"])))
            print(f"{rows}x{cols} {str(dtype)[6:]} C={ctas} slice {slice_cols} w{warps} pm{per_sm}: regs "
                  f"{u['regs']} ldl {u['ldl']} shared {u['shared']}, {programs_per_sm(u['regs'], warps)} an SM; {ops}")


def main() -> None:
    if os.environ.get("PROBE_DRYRUN") == "1":
        dry_run()
        return
    from softmax_small import long_row_probe
    long_row_probe([(r, c, dt) for r, c, dt, _ in SHAPES], variants, "softmax_cluster_row.csv", BUDGET_S, TOL)


if __name__ == "__main__":
    main()
