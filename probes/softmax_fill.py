"""Probe: where a half-empty row block stops paying, and very short odd rows.

The question. `choose` sends rows whose aligned body fills under ROW_MIN_FILL (3/4) of their
power-of-two block to looped in LOOPED_SHORT_BLOCK (1024-column) tiles; the rule was set at
4097 columns (a fill of one half, before the body was peeled). probes/heldout.py (H100
GPU-7e212431, f87c302) met it at two shapes outside the grid, both at a fill of 0.73: the row
kernel forced took 1/1.40 (bf16) and 1/1.21 (fp32) of ours's looped time at 512x3000, and
1/1.16 and 1/1.27 at 6000x6000, where Liger was ahead of ours (0.84x, 0.79x). So where, between a
fill of one half and three quarters, does the row block stop winning?
DIAG=fill (default): rows of 2056-3072 columns (4096 block) and 4104-6144 (8192 block), fills from
0.50 to 0.75, aligned rows, a large and a small problem, fp32 and bf16: `ours`, the row kernel
on the table's warps (`row`) and on twice and half as many, looped in the table's 1024-column
tiles (`looped1k`) and in tiles of the whole block (`looped`), Liger and torch.
DIAG=short: rows of 33 columns (200000 of them, 13-26 MB) ran ours at 33.7 us bf16 and 33.4 fp32
in the same run, 0.30 and 0.50 of a copy of the same bytes and 0.83x torch, where 131072x64 ran at
0.99 and 0.97 of the copy. Rows of 32-40 columns (odd, 4- and 8-aligned), rows tiles of 8-128 rows
on 1-8 warps, the table's tile launched as it is (`table RxW`, past the launcher's one-warp tile for
scalar rows wider than a warp), against torch, Liger and the copy (SHORT_COLS=33,129,... other widths,
SHORT_ROWS=8x1,2x1,... other tiles, rows x warps, SHORT_N=65536 other row counts; SHORT_DTYPES=float32
and DIAG=fill's DTYPES alike).
Wider scalar rows (H100 GPU-d693ff5a, at 7b90060, us, fp32 / bf16; SHORT_COLS=65,101,129,201,255 and
301,383,511 with SHORT_ROWS=2x1,4x1,8x1,16x1,4x2,8x2,16x2 and 1x1,...,8x4): in blocks of 128 and 256
the best tile was 8 rows on one warp (65 columns 32.8 / 22.7 against the table's 16 on 4 warps at
59.4 / 59.2, torch 40.7 / 40.4; 129 67.2 / 41.3 against 75.8 / 70.9, torch 73.0 / 66.7; 255 134.7 /
70.8 against 136.1 / 85.6), 4 rows on one warp behind it at 129 (73.8 / 49.8); in a 512 block 2 rows
on one warp (511 271.0 / 139.6 against 276.6 / 143.0, Liger 266.0 fp32; 301 bf16 89.6 against
100.0), fp32 within 1-2% on most tiles there. Since then kernels.fused_softmax.ROWS_NARROW_TILE_ROWS;
through softmax() after it, ours took the best tile's time at every width (65 fp32 33.0, bf16 22.6;
129 66.8 / 41.5; 511 271.3 / 139.8, 0.98x Liger in fp32, a tie). Rows on 2-element accesses (66, 130,
258 and 510 columns, SHORT_ROWS=2x1,4x1,8x1,16x1,8x2,4x4,8x4,16x4) also ran on one warp faster than
on the table's tile or within 1.1% of it, 8 rows a tile in blocks of 128 and 256 (130 bf16 34.7
against 65.6, 66 fp32 31.9 against 38.5) and 2 in a 512 block (258 bf16 75.4 against 86.6; 258 fp32
134.9 against 133.4, 510 fp32 269.2 against 272.7), 8 rows there being slower in fp32 (258 168.1):
ROWS_NARROW_TILE_ROWS holds them too. probes/heldout.py then lost 65536x350 fp32 to torch.compile (57.0
against 54.4 us, the copy 54.3); SHORT_N=65536 SHORT_DTYPES=float32 SHORT_COLS=350,258,510,447 (H100
GPU-c8dfcfde, copy / variant): every tile 0.95-0.99 of the copy, one row on one warp the fastest at 350,
510 and 447 (58.4, 85.9 and 75.2 us against ours's 59.0, 87.2 and 77.1; copy 57.0, 84.2, 74.2) and the
table's 4x4 at 258 (42.3 against 42.8; 1x1 43.4): no tile closes the gap to the copy, so none changed.

Every variant is checked against float64 on a hostile input with its output poisoned
(softmax_small.long_row_probe), then timed with CUPTI between L2 flushes in shuffled rounds.
Writes $OUT/softmax_fill.csv; prints us and the copy's time over each variant's last.

    PYTHONUNBUFFERED=1 python3 probes/softmax_fill.py          (DIAG=short for the short rows)
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmax_small import fs, long_row_probe, ours_and_peers  # noqa: E402

DIAG = os.environ.get("DIAG", "fill")
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "200"))
DTYPES = tuple(getattr(torch, d) for d in os.environ.get("SHORT_DTYPES", "float32,bfloat16").split(","))
FILL_COLS = (2056, 2304, 2560, 2816, 3000, 3072, 4104, 4608, 5120, 5632, 6000, 6144)
SHORT_COLS = tuple(int(c) for c in os.environ.get("SHORT_COLS", "33,32,36,40,64").split(","))
SHORT_N = int(os.environ.get("SHORT_N", "200000"))          # DIAG=short: rows of each shape
SHORT_ROWS = tuple(tuple(int(v) for v in t.split("x")) for t in       # rows a tile x warps
                   os.environ.get("SHORT_ROWS", "8x1,16x1,16x2,32x2,32x4,64x4,128x4,128x8").split(","))


def fill_shapes():
    for dt in DTYPES:
        for cols in FILL_COLS:
            yield 8192, cols, dt          # 134-201 MB in fp32, 67-100 in bf16
        for cols in (3000, 6000):
            yield 512, cols, dt           # under 8 MB at 3000 columns


def fill_variants(x: torch.Tensor, out: torch.Tensor, sms: int) -> dict:
    rows, cols = x.shape
    fns = ours_and_peers(x)
    row = fs.config("row", cols, x.dtype)
    for warps in sorted({row.num_warps // 2, row.num_warps, row.num_warps * 2}):
        if row.block >= 32 * warps:
            cfg = fs.Config(block=row.block, num_warps=warps)
            fns[f"row {warps}"] = lambda cfg=cfg: fs.STRATEGIES["row"].run(x, out, cfg)
    short = fs.Config(block=fs.LOOPED_SHORT_BLOCK, num_warps=4)
    fns["looped1k"] = lambda: fs.STRATEGIES["looped"].run(x, out, short)
    whole = fs.Config(block=row.block,
                      num_warps=fs._clamp(row.block * x.element_size() // (32 * fs.LOOPED_THREAD_BYTES), 4, 16))
    fns["looped"] = lambda: fs.STRATEGIES["looped"].run(x, out, whole)
    return fns


def short_shapes():
    for dt in DTYPES:
        for cols in SHORT_COLS:
            yield SHORT_N, cols, dt


def short_variants(x: torch.Tensor, out: torch.Tensor, sms: int) -> dict:
    rows, cols = x.shape
    fns = ours_and_peers(x)
    block = fs.pow2(cols)
    for r, w in SHORT_ROWS:
        cfg = fs.Config(block=block, num_warps=w, rows=r)
        fns[f"rows {r}x{w}"] = lambda cfg=cfg: fs.STRATEGIES["rows"].run(x, out, cfg)
    # the table's tile launched as it is, past _rows_args (which gives narrow rows wider than a warp one warp)
    table = fs.config("rows", cols, x.dtype)
    grid = (fs.cdiv(rows, table.rows),)
    def launch_table():
        fs._rows_kernel[grid](out, x, x.stride(0), out.stride(0), rows, cols, table.rows, table.block,
                              fs._vec(x, out), False, num_warps=table.num_warps, num_stages=1)
        return out
    fns[f"table {table.rows}x{table.num_warps}"] = launch_table
    return fns


if __name__ == "__main__":
    if DIAG == "short":
        long_row_probe(list(short_shapes()), short_variants, "softmax_fill_short.csv", BUDGET_S)
    else:
        long_row_probe(list(fill_shapes()), fill_variants, "softmax_fill.csv", BUDGET_S)
