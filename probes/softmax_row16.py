"""Probe: long 16-bit rows held in registers as 16-bit values, the exponentials computed twice.

The row strategy holds a row in registers as fp32 (kernels/fused_softmax.py `_row_one`): one
exponential an element, kept for the normalising multiply. A 32768-column fp32 row (128 KB) on 32
warps is 32 values a thread in 61 registers, one program an SM, and the committed e1fb521 run
timed it at 0.96 of the copy (4096x32768 fp32). A 16-bit row of the same length is 64 KB: the
same 61 registers hold half the bytes, and the row kernel read 4096x32768 fp16 at 0.74 of the copy
(looped, shipped there, 0.85). Rows of 65536 16-bit columns (2048x65537, 128 KB) do not fit as
fp32 (64 values a thread) and went looped at 0.66.

This kernel keeps the loaded 16-bit values as they are (two a register) and computes each
exponential twice, once for the row's sum and once for the output, as
exp2(fma(x, log2 e, -c_hi) - c_lo) with (c_hi, c_lo) the row's max (then max plus log2 of the sum)
times log2 e split into a rounded part and its rounding error, so that inputs of any magnitude
(bf16 up to 3e38) keep full precision and no fp32 copy of the row is common to both passes.
Offline for sm_90 (Triton 3.6's ptxas, `resources`): 32768 columns one row on 32 warps 54
registers, two rows 64 with a 120-byte stack; 65536 columns (peeled) on 32 warps 64 with a 96-byte
stack. So an SM holds 128 KB of a 16-bit input in flight, as it does for the fp32 rows at 0.96.

Measured and not kept (H200 GPU-2738b269, a188f76, CUPTI kernel time, L2 flushed; share of the
copy's time): the prediction, 4096x32768 16-bit near the fp32 row's 0.96, failed. 4096x32768 fp16
row16 1x16 180.6 us (0.69), 1x32 185.6 (0.67), 2x32 192.0 (0.65) against the shipped dispatch
(looped) 143.8 (0.87), the fp32-held row kernel 168.1 (0.74) and Liger 169.2; bf16 alike (0.68-
0.69 against 0.85). 2048x65537 fp16 row16 1x32 223.1 (0.57) against looped 187.3 (0.68), bf16
217.0 (0.59) against 187.5; 2048x65536 fp16 175.1 against 175.2, a tie. Only 8192x16384 fp16
1x16 (two programs an SM by registers) edged ahead, 138.1 against 140.0 (0.90 against 0.89).
Holding twice the bytes an SM did not buy bandwidth: with one program an SM the load, the two
reductions and the writes run one after another, and in 16 bits the per-element work of the
reductions and the second exponential (twice the elements a byte of fp32) is what the SM waits
on between loads. Looped, many programs an SM streaming tiles, overlaps them.

Variants per shape: `ours` (softmax as shipped), `row16 RxW` (R rows a program on W warps; R > 1
only where the columns are a multiple of the 16-byte width), `ours_row` (the shipped row kernel
forced where its block fits), `ours_looped` (forced), Liger, torch, and `copy` (out.copy_(x), the
same bytes). Every variant but copy is checked against a float64 softmax first, on hostile inputs
(rows with -inf entries, a row of -inf, an entry of 3e4), the output poisoned with NaN before the
call. Kernel time: CUPTI device time between L2 flushes, all variants of a shape in shuffled
rounds (softmax_small.time_all). Writes $OUT/softmax_row16.csv; prints us and the share of the
copy's time last.

    PYTHONUNBUFFERED=1 python3 probes/softmax_row16.py          (a GPU)
    python3 probes/softmax_row16.py resources                    (no GPU: registers for sm_90)
"""
from __future__ import annotations

import os
import sys
import time

import torch
import triton
import triton.language as tl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels import fused_softmax as fs  # noqa: E402
from kernels._device import pow2  # noqa: E402

LOG2E = tl.constexpr(1.4426950408889634)
SHAPES = [(4096, 32768, torch.float16), (4096, 32768, torch.bfloat16), (2048, 65537, torch.float16),
          (2048, 65537, torch.bfloat16), (2048, 65536, torch.float16), (8192, 16384, torch.float16),
          (16384, 4097, torch.bfloat16), (8192, 4096, torch.float16)]
SETTINGS = [(1, 32), (2, 32), (1, 16), (2, 16), (4, 32)]


@triton.jit
def _split_scaled(v):
    """v * log2(e) as (hi, lo): hi rounded to fp32, lo its rounding error (exact by the fma)."""
    hi = v * LOG2E
    return hi, tl.fma(v, LOG2E, -hi)


@triton.jit
def _row16_kernel(out_ptr, x_ptr, x_row_stride, out_row_stride, n_rows, n_cols,
                  ROWS: tl.constexpr, BLOCK: tl.constexpr, VEC: tl.constexpr, PEEL: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)                           # (ROWS,)
    live = rows < n_rows
    cols = tl.arange(0, BLOCK)
    x_start = tl.cast(rows, tl.int64) * x_row_stride
    if PEEL:
        head = tl.minimum((VEC - x_start % VEC) % VEC, n_cols)
    else:
        head = tl.zeros([ROWS], tl.int64)
    x_off = tl.multiple_of(x_start + head, VEC)
    o_off = tl.multiple_of(tl.cast(rows, tl.int64) * out_row_stride + head, VEC)
    n_body = (n_cols - head) // VEC * VEC
    mask = live[:, None] & tl.max_constancy(cols[None, :] < n_body[:, None], [1, VEC])
    xh = tl.load(x_ptr + x_off[:, None] + cols[None, :], mask=mask, other=-float("inf"))   # 16-bit
    m = tl.max(xh, axis=1).to(tl.float32)
    if PEEL:
        lane = tl.arange(0, 2 * VEC)[None, :]
        e_offs = tl.where(lane < VEC, lane - head[:, None], n_body[:, None] + lane - VEC)
        e_mask = live[:, None] & tl.where(lane < VEC, lane < head[:, None], e_offs < (n_cols - head)[:, None])
        xe = tl.load(x_ptr + x_off[:, None] + e_offs, mask=e_mask, other=-float("inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(xe, axis=1))
    m_hi, m_lo = _split_scaled(tl.where(m == -float("inf"), 0.0, m))
    s = tl.sum(tl.exp2(tl.fma(xh.to(tl.float32), LOG2E, -m_hi[:, None]) - m_lo[:, None]), axis=1)
    if PEEL:
        s += tl.sum(tl.exp2(tl.fma(xe, LOG2E, -m_hi[:, None]) - m_lo[:, None]), axis=1)
    ls = tl.log2(s)                                  # all -inf row: -inf, and NaN below
    c_hi = m_hi + ls                                 # two-sum: c_hi + c_lo = m_hi + ls exactly
    b = c_hi - m_hi
    c_lo = m_lo + ((m_hi - (c_hi - b)) + (ls - b))
    y = tl.exp2(tl.fma(xh.to(tl.float32), LOG2E, -c_hi[:, None]) - c_lo[:, None])
    tl.store(out_ptr + o_off[:, None] + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask,
             cache_modifier=".cs")
    if PEEL:
        ye = tl.exp2(tl.fma(xe, LOG2E, -c_hi[:, None]) - c_lo[:, None])
        tl.store(out_ptr + o_off[:, None] + e_offs, ye.to(out_ptr.dtype.element_ty), mask=e_mask)


def row16(x: torch.Tensor, out: torch.Tensor, rows_per_prog: int, warps: int):
    n_rows, n_cols = x.shape
    vec = 16 // x.element_size()
    peel = n_cols % vec != 0 or x.stride(0) % vec != 0
    block = pow2(n_cols - n_cols % vec)
    _row16_kernel[(triton.cdiv(n_rows, rows_per_prog),)](
        out, x, x.stride(0), out.stride(0), n_rows, n_cols, ROWS=rows_per_prog, BLOCK=block, VEC=vec,
        PEEL=peel, num_warps=warps)
    return out


def settings(rows: int, cols: int):
    """(R, W) settings that fit: R > 1 only without peeling; at most 64 16-bit values a thread."""
    vec = 8
    block = pow2(cols - cols % vec)
    for r, w in SETTINGS:
        if (r == 1 or cols % vec == 0) and r * block <= 64 * 32 * w and r <= rows:
            yield r, w


def variants(x: torch.Tensor, out: torch.Tensor) -> dict:
    from softmax_small import ours_and_peers
    rows, cols = x.shape
    fns = ours_and_peers(x)
    for r, w in settings(rows, cols):
        fns[f"row16 {r}x{w}"] = lambda r=r, w=w: row16(x, out, r, w)
    body = fs.wide_body(cols, x.dtype)
    if pow2(body) <= 32768:
        cfg = fs.config("row", cols, x.dtype, rows)
        fns["ours_row"] = lambda: fs.STRATEGIES["row"].run(x, out, cfg)
    cfg = fs.config("looped", cols, x.dtype, rows)
    fns["ours_looped"] = lambda: fs.STRATEGIES["looped"].run(x, out, cfg)
    return fns


def resources() -> None:
    """Registers and stack of the row16 settings for sm_90, compiled offline (no GPU)."""
    import re
    import sm90
    x = torch.empty(1, dtype=torch.float16)
    for cols, peel in ((32768, False), (65536, True), (16384, False), (4096, True)):
        n_cols = cols + 1 if peel else cols
        for r, w in settings(4096, n_cols):
            args = (x, x, n_cols, n_cols, 4096, n_cols, r, cols, 8, peel)
            usage = sm90.cuobjdump(sm90.compile_for_sm90(_row16_kernel, args, dict(num_warps=w)), "-res-usage")
            regs, stack = re.search(r"REG:(\d+).*?STACK:(\d+)", usage).groups()
            print(f"cols {cols}{' peeled' if peel else ''} rows {r} warps {w}: {regs} registers, "
                  f"stack {stack} B, {65536 // (int(regs) * 32 * w)} programs an SM by registers", flush=True)


def main() -> None:
    from softmax_small import (case, checked_and_copy, print_notes, record, times_by_shape, within_budget,
                               write_csv)
    from rooflab.timing import CudaTimer
    budget = float(os.environ.get("PROBE_BUDGET_S", "120"))
    timer, rows_out, t0 = CudaTimer(), [], time.perf_counter()
    for rows, cols, dtype, label in within_budget(SHAPES, rows_out, t0, budget):
        x, out, ref, tol = case(rows, cols, dtype, hostile=True)
        tol = 1e-2 if dtype == torch.bfloat16 else tol     # bf16's half step at 1 is 0.0039
        good = checked_and_copy(rows_out, label, variants(x, out), x, out, ref, tol)
        record(rows_out, label, good, timer, t0)
        del x, out, ref
        torch.cuda.empty_cache()
    write_csv("softmax_row16.csv", rows_out)
    print_notes(rows_out, t0)
    for label, times in times_by_shape(rows_out).items():
        copy = times.get("copy")
        print(label)
        for name, us in sorted(times.items(), key=lambda kv: kv[1]):
            share = f"{copy / us:.3f}" if copy else "-"
            print(f"  {name:14s} {us:9.2f} us  {share} of the copy")


if __name__ == "__main__":
    resources() if sys.argv[1:] == ["resources"] else main()
