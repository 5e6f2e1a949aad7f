"""Probe: split's phase 1 with a running (max, sum) per lane instead of a block reduction per tile.

The question. The shipped `fs._tiles_stats` reduces every 16 KB tile to one (max, sum) across the
program's warps twice (tl.max, then tl.sum of the exponentials): two shared-memory exchanges and
barriers a tile, so every warp of a program waits for the slowest one's loads before any of them
issues the next tile's. Here each tile is loaded as (rows, lanes, VEC) with the VEC elements of a
16-byte access in one thread, and only the VEC axis is reduced a tile, inside the thread: each lane
keeps its own running (max, sum) for its rows, (rows, 32) of them (4 + 4 registers a thread at
8 warps, 16 KB tiles), and the program reduces them across the block once, after its segment's
last tile. Phase 1 then has no barrier until the publish; the cost is one exponential more an
access (each lane's rescale), 1/VEC more MUFU.EX2 an element. An earlier variant that kept the
running state per column of the tile ((BLOCK,) of it, 79 registers, 3 programs an SM) was slower
(docs/kernels/softmax.md); this one keeps it per 16-byte access.

Variants per shape, each on the shipped split's two settings (SHIPPED_SETTINGS: "rounds", 2-tile
segments on 4 warps up to 6 an SM, and "table", 4-tile segments on 8 warps up to 4 an SM), the
shipped exchange (tagged words) and the shipped phase 2 (`fs._tiles_normalize`):
  <setting>_block   phase 1 as shipped (fs._tiles_stats)
  <setting>_lanes   phase 1 with a running (max, sum) a lane (`_lane_stats`)
beside `ours` (fs.softmax) and a copy of the same bytes, every variant checked against float64 on a
hostile input first (softmax_small.long_row_probe: -inf entries, a row of -inf, a huge entry; the
output poisoned), then CUPTI kernel time with the L2 flushed, shuffled rounds.

Measured and not kept (H100 80GB HBM3 GPU-05df1cd9, this file as committed after 834a2db, the
mask's constancy hint added; CUPTI kernel time, L2 flushed, us; every variant matched float64
first). The lanes phase 1 is slower at every shape and on both settings: 1.18-1.21x the block
phase 1's time on the table setting, 1.20-1.49x on the rounds one:

| shape | copy | ours | table block | table lanes | rounds block | rounds lanes |
|---|---|---|---|---|---|---|
| 16x4194304 fp16 | 81.6 | 106.6 | 106.7 | 127.4 | 117.2 | 151.8 |
| 64x1048576 fp16 | 81.3 | 100.3 | 100.8 | 119.9 | 100.5 | 144.2 |
| 256x262144 fp16 | 81.2 | 95.6 | 98.9 | 118.1 | 94.9 | 141.7 |
| 512x151936 bf16 | 95.3 | 110.4 | 115.3 | 138.2 | 110.9 | 162.7 |
| 1024x131072 fp16 | 171.4 | 186.0 | 193.8 | 231.8 | 188.0 | 271.4 |
| 16x4194304 fp32 | 172.0 | 223.2 | 224.3 | 264.7 | 261.8 | 329.5 |
| 64x1048576 fp32 | 171.6 | 196.8 | 201.1 | 244.2 | 199.1 | 239.0 |
| 16x4194304 bf16 | 81.3 | 109.5 | 106.3 | 127.4 | 117.8 | 152.7 |

The per-tile barriers are not what holds split's phase 1: without them, and with fewer registers
in 16 bits (table 48 -> 40, rounds 86 -> 64), each lane's rescale and running pair (1/VEC more
exponentials, (rows, 32) of state the loop carries) cost more than the barriers did. Without the
mask's constancy hint (the first run) the 3-D tile's loads were element-wise and ran 0.24-0.50 of
the copy.

    PYTHONUNBUFFERED=1 python3 probes/softmax_split_lanes.py      (a GPU; $OUT/softmax_split_lanes.csv)
    PROBE_DRYRUN=1 python3 probes/softmax_split_lanes.py          (no GPU: `_lane_stats` in Triton's
        CPU interpreter against float64 on irregular segments)
    PROBE_RESOURCES=1 python3 probes/softmax_split_lanes.py       (no GPU: sm_90 registers of both kernels)
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if os.environ.get("PROBE_DRYRUN") == "1":   # CPU check: Triton's interpreter (before the kernels import)
    from rooflab import interpreter
    interpreter.enable()

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernels import fused_softmax as fs  # noqa: E402
from softmax_split_slots import (SHIPPED_SETTINGS, TOL, _gather, launch_split, print_split_resources,  # noqa: E402
                                 program_segment)

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "120"))
SHAPES = [(16, 4194304, torch.float16), (64, 1048576, torch.float16), (256, 262144, torch.float16),
          (512, 151936, torch.bfloat16), (1024, 131072, torch.float16), (16, 4194304, torch.float32),
          (64, 1048576, torch.float32), (16, 4194304, torch.bfloat16)]
LANES = 32           # threads a warp: the lane axis of a tile


@triton.jit
def _lane_stats(x_row, start, n_tiles, n_cols, BLOCK: tl.constexpr, VEC: tl.constexpr):
    """(max, sum of exp(x - max)) of n_tiles tiles of BLOCK columns from `start`, as fs._tiles_stats,
    with a running pair per (tile row, lane) and one block reduction at the end."""
    ROWS: tl.constexpr = BLOCK // (32 * VEC)
    offs = (tl.arange(0, ROWS)[:, None, None] * (32 * VEC) + tl.arange(0, 32)[None, :, None] * VEC
            + tl.arange(0, VEC)[None, None, :])                                     # (ROWS, 32, VEC)
    m = tl.full([ROWS, 32], -float("inf"), tl.float32)
    s = tl.zeros([ROWS, 32], tl.float32)
    for t in range(0, n_tiles):
        cols = start + t * BLOCK + offs
        mask = tl.max_constancy(cols < n_cols, [1, 1, VEC])                       # whole 16-byte accesses
        x = tl.load(x_row + cols, mask=mask, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=2))                                    # in the thread
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * fs._exp(m - m_safe) + tl.sum(fs._exp(x - m_safe[:, :, None]), axis=2)
        m = m_new
    row_max = tl.max(tl.max(m, axis=1), axis=0)                                     # once a segment
    safe = tl.where(row_max == -float("inf"), 0.0, row_max)
    return row_max, tl.sum(tl.sum(s * fs._exp(m - safe), axis=1), axis=0)


@triton.jit(do_not_specialize=["x_row_stride", "out_row_stride", "n_rows", "n_cols", "n_segs", "seg_tiles"])
def _split_lanes_kernel(out_ptr, x_ptr, slots_ptr, x_row_stride, out_row_stride, n_rows, n_cols, n_segs,
                        seg_tiles, BLOCK: tl.constexpr, VEC: tl.constexpr, PARTIALS_BLOCK: tl.constexpr,
                        LANE_STATS: tl.constexpr, EXCHANGE: tl.constexpr):
    """The shipped fused split on aligned rows (no peel, no one-tile path), phase 1 by LANE_STATS;
    without EXCHANGE each segment is normalised by its own (max, sum) (wrong unless n_segs is 1;
    probes/softmax_split_coop.py times that)."""
    seg, first, rows_per_round, start, tag = program_segment(slots_ptr, n_segs, seg_tiles, BLOCK)
    for row in range(first, n_rows, rows_per_round):
        x_row = x_ptr + tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
        o_row = out_ptr + tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC)
        part = tl.cast(row, tl.int64) * n_segs
        if LANE_STATS:
            m, s = _lane_stats(x_row, start, seg_tiles, n_cols, BLOCK, VEC)
        else:
            m, s = fs._tiles_stats(x_row, start, seg_tiles, n_cols, BLOCK, VEC)
        if EXCHANGE:
            fs._publish(slots_ptr, part + seg, m, s, tag)
            m, s = _gather(slots_ptr, part, n_segs, tag, PARTIALS_BLOCK)
        fs._tiles_normalize(o_row, x_row, start, seg_tiles, n_cols, m, 1.0 / s, BLOCK, VEC)


def split_lanes(x: torch.Tensor, out: torch.Tensor, setting: str, lanes: bool):
    per_sm, seg_tiles, warps = SHIPPED_SETTINGS[setting]
    return launch_split(_split_lanes_kernel, x, out, per_sm, seg_tiles, warps, LANE_STATS=lanes, EXCHANGE=True)


def checked_variants(x, out, sms):
    fns = {"ours": lambda: fs.softmax(x)}
    for setting in SHIPPED_SETTINGS:
        for name, lanes in (("block", False), ("lanes", True)):
            fns[f"{setting}_{name}"] = lambda s=setting, v=lanes: split_lanes(x, out, s, v)
    return fns


@triton.jit
def _stats_kernel(x_ptr, m_ptr, s_ptr, n_cols, seg_tiles, BLOCK: tl.constexpr, VEC: tl.constexpr):
    """Interpreter check: program (row, seg) writes _lane_stats of its segment."""
    row = tl.program_id(0)
    seg = tl.program_id(1)
    m, s = _lane_stats(x_ptr + row * n_cols, seg * seg_tiles * BLOCK, seg_tiles, n_cols, BLOCK, VEC)
    tl.store(m_ptr + row * tl.num_programs(1) + seg, m)
    tl.store(s_ptr + row * tl.num_programs(1) + seg, s)


def dry_run() -> int:
    """_lane_stats in the interpreter on small tiles against float64, then sm_90 registers."""
    g = torch.Generator().manual_seed(0)
    misses = 0
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        vec = 16 // dtype.itemsize
        block = 2 * LANES * vec                          # two tile rows: the reductions still cross rows
        for cols, seg_tiles, hostile in ((block * 3, 1, "none"), (block * 5 + vec * 3, 2, "neg_inf"),
                                         (vec * 7, 1, "all_neg_inf"), (block * 4, 3, "huge"),
                                         (block * 2 + vec, 1, "tile_neg_inf")):
            rows = 3
            x = (torch.randn(rows, cols, generator=g) * 4).to(dtype)
            if hostile == "neg_inf":
                x[0, ::3] = -float("inf")
            elif hostile == "all_neg_inf":
                x[1] = -float("inf")
            elif hostile == "huge":
                x[2, 5] = 3e4 if dtype == torch.float16 else 1e30
            elif hostile == "tile_neg_inf":
                x[0, :block] = -float("inf")
            n_segs = triton.cdiv(triton.cdiv(cols, block), seg_tiles)
            m = torch.full((rows, n_segs), float("nan"))
            s = torch.full((rows, n_segs), float("nan"))
            _stats_kernel[(rows, n_segs)](x, m, s, cols, seg_tiles, BLOCK=block, VEC=vec)
            x64 = x.double()
            for r in range(rows):
                for j in range(n_segs):
                    seg = x64[r, j * seg_tiles * block:(j + 1) * seg_tiles * block]
                    want_m = seg.max()
                    want_s = torch.exp(seg - (want_m if torch.isfinite(want_m) else 0.0)).sum()
                    ok = (float(m[r, j]) == float(want_m)
                          and abs(float(s[r, j]) - float(want_s)) <= 1e-5 * max(float(want_s), 1.0))
                    if not ok:
                        misses += 1
                        print(f"MISS {dtype} cols={cols} seg_tiles={seg_tiles} {hostile} row {r} seg {j}: "
                              f"({float(m[r, j])}, {float(s[r, j])}) want ({float(want_m)}, {float(want_s)})")
            print(f"{str(dtype)[6:]:>8} cols={cols:>5} seg_tiles={seg_tiles} {hostile:>12}: checked {rows * n_segs}")
    print(f"interpreter: {misses} misses")
    return misses


def main() -> None:
    if os.environ.get("PROBE_DRYRUN") == "1":
        sys.exit(1 if dry_run() else 0)
    if os.environ.get("PROBE_RESOURCES") == "1":
        print_split_resources(_split_lanes_kernel, {"block": (False, True), "lanes": (True, True)})
        return
    from softmax_small import long_row_probe
    long_row_probe(SHAPES, checked_variants, "softmax_split_lanes.csv", BUDGET_S, TOL)


if __name__ == "__main__":
    main()
