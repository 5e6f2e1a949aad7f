"""Probe: is split's per-element arithmetic what holds 16-bit long rows below the copy?

The question. At the same shape a 16-bit split reaches a lower share of the copy than fp32 (the
run at 8d2c4c8, call 1, CUPTI: 1024x131072 fp16 0.86 against fp32 0.91, 512x151936 bf16 0.79
against 0.90, 256x262144 fp16 0.83 against 0.88, 64x1048576 fp16 0.76 against 0.82). A 16-bit
element is half the bytes of an fp32 one and the same arithmetic: per SM at the copy's rate that
is about 4 elements a clock, each costing an exponential in each phase (two MUFU.EX2 of the 16 an
SM issues a clock) and 11-12 SASS instructions (sm_90, the rounds setting's fp16 kernel: a
conversion, max, subtract, multiply by log2 e, exponential and add in phase 1; a conversion,
subtract, multiply, exponential, multiply by 1/sum and a pack in phase 2).

The variants, each on the rounds setting (2-tile segments, 4 warps, up to 6 an SM) and on the
table's (4-tile segments, 8 warps, 4 an SM), the shipped exchange and phase 1:
  ship     phase 2 as shipped: exp2((x - max) log2 e) * (1 / sum)
  fold     the 1 / sum folded into the exponent: exp2(fma(x - max, log2 e, -log2 sum)), one
           multiply fewer an element (the exponent is rounded once, as before; checked)
  noexp2   timing only, wrong by construction: phase 2 writes (x - max) / sum, no exponential
  noexp    timing only: no exponential in either phase (the sum adds x - max)
If noexp runs near the copy, the arithmetic is what is left; if it runs where ship does, the
exchange, the rounds and the bytes in flight are.

Measured at 0fa46d8 (H200 GPU-63611104, CUPTI medians, share of the copy; rounds setting ship /
fold / noexp2 / noexp): 1024x131072 fp16 0.85 / 0.85 / 0.90 / 0.91; 512x151936 bf16 0.77 / 0.79 /
0.83 / 0.86; 256x262144 fp16 0.78 / 0.78 / 0.81 / 0.82; 64x1048576 fp16 0.73 / 0.74 / 0.75 /
0.78; 16x4194304 fp16 (table setting, which ships there) 0.70 / 0.69 / 0.71 / 0.73; fp32 at the
same shapes: every variant within 0.01-0.02 of ship (1024x131072 0.92, 64x1048576 0.82-0.84,
16x4194304 0.71). Folding 1 / sum into the exponent (sm_90: 1272 SASS instructions against 1312,
64 FMUL an element-tile become FFMA) is no faster; dropping every exponential gains 5-11% in 16
bits and 1-3% in fp32, and leaves all of these shapes below 0.92 of the copy. The arithmetic is a
small part of the gap; not kept.

    PYTHONUNBUFFERED=1 python3 probes/softmax_split_alu.py           (a GPU; $OUT/softmax_split_alu.csv)
    PROBE_DRYRUN=1 python3 probes/softmax_split_alu.py               (no GPU: sm_90 registers and MUFU.EX2)
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
from softmax_split_slots import (SHIPPED_SETTINGS, TOL, _gather, launch_split, print_split_resources,  # noqa: E402
                                 program_segment)

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "100"))
SHAPES = [(1024, 131072, torch.float16), (512, 151936, torch.bfloat16), (256, 262144, torch.float16),
          (64, 1048576, torch.float16), (16, 4194304, torch.float16), (1024, 131072, torch.float32),
          (64, 1048576, torch.float32), (16, 4194304, torch.float32)]
SETTINGS = SHIPPED_SETTINGS
MATHS = {"ship": 0, "fold": 1, "noexp2": 2, "noexp": 3}
CHECKED = ("ship", "fold")


@triton.jit
def _stats(x_row, start, n_tiles, n_cols, BLOCK: tl.constexpr, VEC: tl.constexpr, MATH: tl.constexpr):
    """fs._tiles_stats; with MATH 3 the sum adds x - max instead of its exponential."""
    cols = tl.arange(0, BLOCK)
    m = tl.full([], -float("inf"), tl.float32)
    s = tl.full([], 0.0, tl.float32)
    for t in range(0, n_tiles):
        offs = start + t * BLOCK + cols
        mask = tl.max_constancy(offs < n_cols, VEC)
        x = tl.load(x_row + offs, mask=mask, other=-float("inf"), eviction_policy="evict_last").to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        if MATH == 3:
            s = s + tl.sum(tl.where(mask, x - m_safe, 0.0), axis=0)
        else:
            s = s * fs._exp(m - m_safe) + tl.sum(fs._exp(x - m_safe), axis=0)
        m = m_new
    return m, s


@triton.jit
def _normalize(o_row, x_row, start, n_tiles, n_cols, row_max, row_sum,
               BLOCK: tl.constexpr, VEC: tl.constexpr, MATH: tl.constexpr):
    """fs._tiles_normalize with phase 2's arithmetic by MATH (module docstring)."""
    cols = tl.arange(0, BLOCK)
    inv = 1.0 / row_sum
    shift = tl.log2(row_sum)
    for t in range(0, n_tiles):
        offs = start + (n_tiles - 1 - t) * BLOCK + cols
        mask = tl.max_constancy(offs < n_cols, VEC)
        x = tl.load(x_row + offs, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        if MATH == 0:
            y = fs._exp(x - row_max) * inv
        elif MATH == 1:
            y = tl.exp2(tl.fma(x - row_max, fs.LOG2E, -shift))
        else:
            y = (x - row_max) * inv
        tl.store(o_row + offs, y.to(o_row.dtype.element_ty), mask=mask, eviction_policy="evict_first")


@triton.jit(do_not_specialize=["x_row_stride", "out_row_stride", "n_rows", "n_cols", "n_segs", "seg_tiles"])
def _split_alu_kernel(out_ptr, x_ptr, slots_ptr, x_row_stride, out_row_stride, n_rows, n_cols, n_segs,
                      seg_tiles, BLOCK: tl.constexpr, VEC: tl.constexpr, PARTIALS_BLOCK: tl.constexpr,
                      MATH: tl.constexpr):
    """The shipped fused split on aligned rows (no peel, no one-tile path), phases by MATH."""
    seg, first, rows_per_round, start, tag = program_segment(slots_ptr, n_segs, seg_tiles, BLOCK)
    for row in range(first, n_rows, rows_per_round):
        x_row = x_ptr + tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
        o_row = out_ptr + tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC)
        part = tl.cast(row, tl.int64) * n_segs
        m, s = _stats(x_row, start, seg_tiles, n_cols, BLOCK, VEC, MATH)
        fs._publish(slots_ptr, part + seg, m, s, tag)
        row_max, row_sum = _gather(slots_ptr, part, n_segs, tag, PARTIALS_BLOCK)
        _normalize(o_row, x_row, start, seg_tiles, n_cols, row_max, row_sum, BLOCK, VEC, MATH)


def split_alu(x: torch.Tensor, out: torch.Tensor, setting: str, math: str):
    """One cooperative launch of the probe's split at a setting (`launch_split`)."""
    per_sm, seg_tiles, warps = SETTINGS[setting]
    return launch_split(_split_alu_kernel, x, out, per_sm, seg_tiles, warps, MATH=MATHS[math])


def _fns(x, out, maths):
    return {f"{setting}_{math}": (lambda s=setting, m=math: split_alu(x, out, s, m))
            for setting in SETTINGS for math in maths}


def checked_variants(x, out, sms):
    return {"ours": lambda: fs.softmax(x), **_fns(x, out, CHECKED)}


def timing_only(x, out, sms):
    return _fns(x, out, [m for m in MATHS if m not in CHECKED])


def main() -> None:
    if os.environ.get("PROBE_DRYRUN") == "1":
        print_split_resources(_split_alu_kernel, {math: (code,) for math, code in MATHS.items()})
        return
    from softmax_small import long_row_probe
    long_row_probe(SHAPES, checked_variants, "softmax_split_alu.csv", BUDGET_S, TOL, extra=timing_only)


if __name__ == "__main__":
    main()
