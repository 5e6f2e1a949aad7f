"""Fused softmax: `softmax(x, dim)` over any dimension, and the four Triton strategies behind it.

Traffic model. Softmax is memory-bound: an ideal kernel reads every input element once and
writes every output element once, so a (rows, cols) problem moves

    bytes = 2 * rows * cols * element_size

and achieved bandwidth is that count over the time (`traffic_bytes`, the one place it is
computed). `rows`, `row` and `split` with one tile per segment read the input from HBM once;
`looped` and split's longer segments read a tile a second time, from L2 while it is still
there (the tiles are read back in reverse order, most recent first). All arithmetic is in fp32;
the output has the input's dtype. Exponentials are exp2(y * log2 e) (`_exp`: one MUFU.EX2 an
element, no subnormal range test).

Access width and peeling. Loads and stores use 16-byte accesses wherever the row length, strides
and base addresses allow (the VEC hint). `row`, `looped` and `split` also where the row length
does not: they peel each row's head and tail, fewer than VEC elements each, around an aligned
body (`_row_body`); split's segment 0 takes the edges. Row and looped compile the edges' code
only where a row needs it (`_access`), and size their blocks to the body: 4097 columns take a
4096 block (`covered_cols`). Store policy: the register-resident strategies (rows, row) load
with the default policy and store streaming (.cs).

Strategies (each a separate kernel; `STRATEGIES[name].run(x2d)` runs one on a 2-D tensor whose
last dimension is contiguous):

    rows    several short rows per program: (ROWS, BLOCK) tiles, BLOCK = nextpow2(cols); contiguous
            rows of up to ROWS_STATIC_MAX_BLOCK columns with their length compiled in
            (`_rows_static_kernel`: the compiler derives alignment and bounds from constants)
    row     one row per program, the whole row in registers (BLOCK = nextpow2(aligned body))
    looped  one row per program in tiles: pass 1 keeps a running max and a rescaled sum of
            exponentials, pass 2 reads the row again, normalises and writes
    split   each row cut into segments, one program a segment: phase 1 publishes the segment's
            (max, sum of exp), phase 2 combines the row's partials and writes the segment
            normalised. On a GPU both phases are one persistent cooperative launch: rows go in
            rounds of (programs // segments) rows, every segment of a round resident at once
            (the driver refuses the launch otherwise); a one-tile segment stays in registers
            across the wait, and the next round's segment is loaded during it. Rows longer than
            the resident programs can hold in registers get segments of several tiles, read a
            second time from L2. In Triton's CPU interpreter, which runs programs one after
            another, the phases are two launches. A segment's (max, sum) is one 64-bit word,
            written with one relaxed exchange, and a program waits by reading its row's words
            until each carries this launch's tag (`_publish`, `_gather`, `_tag`): no counters,
            no fences, one round trip to L2 a round when the row is ready.

Dispatch rule (`choose`; SMs from the device, 132 in the interpreter), set from the strategies'
measured bandwidth on an H200:

    cols <= 512, or fp16/bf16 with cols <= 1024 and rows >= 64 * SMs        -> rows
    cols <= 16384 (fp32: 32768) and rows >= 2 * SMs                          -> row
      ... unless cols <= 4096 (fp16/bf16: 3073 to 4096) and the input          looped
          holds at least 256 MiB
      however little of its power-of-two block the aligned body fills         row
          (cols less cols modulo the 16-byte width), on a warp per 512 of
          those columns (a power of two, 4-32)
    fp16/bf16 rows over 8192 columns and rows >= 4 * SMs, else as above      -> looped
    longer rows and rows >= 4 * SMs, the aligned body at most 64 KiB         -> looped
    otherwise (a few long rows, or longer rows)                              -> split

Constants: 512 ROWS_MAX_COLS, 1024 ROWS_MAX_COLS_16BIT, 64 ROWS_MIN_ROWS_PER_SM, 16384 ROW_MAX_COLS,
32768 ROW_MAX_COLS_FP32, 2 ROW_MIN_ROWS_PER_SM, 4096 LOOPED_LARGE_MAX_COLS, 3073
LOOPED_LARGE_MIN_COLS_16BIT, 256 MiB LOOPED_MIN_BYTES, 8192 ROW_MAX_COLS_16BIT_MANY, 4
LOOPED_MIN_ROWS_PER_SM, 64 KiB LOOPED_MAX_ROW_BYTES; the aligned body is `wide_body`.

Launch table (`config`): register-resident tiles hold ELEMS_PER_THREAD (16) elements a thread.
A rows program takes at most 128 rows, 512 when rows have one column, and 1024 one-column rows
when that still gives every SM four tiles; a one-column tile computes x - x + 1 (1, or NaN where
x is not finite, as torch gives). A problem of fewer rows than that many per SM takes the largest
power of two of rows per program that still gives every SM a program (rows of two or more
columns), on fewer warps when the tile holds under 512 elements (a warp per 128); rows of 128
columns or more then take tiles of SMALL_TILE_ELEMS (512) elements, or one row, on a warp per 512
elements. Looped tiles of 8192 columns give each thread 64 bytes of input a tile (8 warps in
fp16/bf16, 16 in fp32). Split's tiles hold 16 KB of input (4096 fp32 columns, 8192 fp16/bf16) on
8 warps and its segments four tiles (64 KB); a problem whose segments are all resident at once
(one round) takes one-tile segments if they all fit, else two (SPLIT_ONE_ROUND_TILES); a problem
of several rounds whose rows hold at most SPLIT_ROUNDS_MAX_SEGS (128) two-tile segments takes
two-tile segments on 4 warps, up to 6 programs an SM (peeled rows in fp32 only). Rows and row
take one tile a program, with no loop, where the grid holds a program a tile (every setting of
the table: Config.per_sm 0); a persistent grid (per_sm > 0) strides over the tiles.

Measurements behind each choice: docs/kernels/softmax.md, in sections named as these are.
"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass, replace
from typing import Callable

import torch
import triton
import triton.language as tl

from kernels._checks import check_tensor, interpreting
from kernels._device import INTERPRETER_SMS, cdiv, pow2, properties
from kernels._device import sm_count as num_sms
from kernels._native_replay import ready as native_ready
from kernels._plans import ALIGN, Launch, aligned, hooked, new_output, on_device, remember

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# ---- defaults (the rules: module docstring; the measurements: docs/kernels/softmax.md) ----
ROWS_MAX_COLS = 512          # rows per program up to here ...
ROWS_MAX_COLS_16BIT = 1024   # ... and up to here for fp16/bf16 rows when there are many rows:
ROWS_MIN_ROWS_PER_SM = 64    # at least this many per SM
ROW_MAX_COLS = 16384         # one row per program up to here (fp32: ROW_MAX_COLS_FP32) ...
ROW_MAX_COLS_FP32 = 32768    # ... fp32 rows keep one program a row up to here
ROW_MAX_COLS_16BIT_MANY = 8192   # ... fp16/bf16 rows longer than this go looped when there are
                                 # LOOPED_MIN_ROWS_PER_SM rows an SM
ROW_MIN_ROWS_PER_SM = 2      # ... when there are at least this many rows per SM; else split
ROW_MIN_FILL = 0.75          # looped: rows whose covered columns (covered_cols) fill less than this share
                             # of their power-of-two block take LOOPED_SHORT_BLOCK tiles
LOOPED_SHORT_BLOCK = 1024    # looped tile for rows that would waste a quarter of a row block
LOOPED_MIN_ROWS_PER_SM = 4   # longer rows: looped when there are this many rows per SM ...
LOOPED_MAX_ROW_BYTES = 64 << 10   # ... and the aligned body holds at most this many bytes; else split
LOOPED_MIN_BYTES = 256 << 20  # rows of up to LOOPED_LARGE_MAX_COLS go looped from this input size ...
LOOPED_LARGE_MAX_COLS = 4096  # ... (the range measured; row keeps longer ones)
LOOPED_LARGE_MIN_COLS_16BIT = 3073  # ... from this many columns in fp16/bf16 (2048 and 3072 keep row)
LOOPED_THREAD_BYTES = 64     # looped: input bytes each thread loads per tile (sets the warps)
ROWS_MAX_TILE_ROWS = 128     # rows: rows a program takes at most ...
ROWS_MAX_TILE_ROWS_1COL = 512  # ... and for one-column rows,
ROWS_1COL_LARGE_TILE_ROWS = 1024   # ... twice that when it still gives every SM
ROWS_1COL_LARGE_TILES_PER_SM = 4   # at least this many tiles
ROWS_THREAD_ELEMS = 128      # rows: a tile of fewer than 4 warps x this many elements takes fewer warps
ROWS_NARROW_TILE_ROWS = {(1, 64): 16, (1, 128): 8, (1, 256): 8, (1, 512): 2,   # (access width in elements,
                         (2, 128): 8, (2, 256): 8, (2, 512): 2}               # block) -> rows of a tile
                             # on one warp, at most the table's: rows no access wider than 1 or 2
                             # elements divides, in a block wider than a warp (measured: docs/kernels/
                             # softmax.md, Launch table)
ROWS_STATIC_MAX_BLOCK = 512  # rows: contiguous rows in blocks of up to this many columns run a kernel
                             # compiled for their length (_rows_static_kernel; one compile a length;
                             # measured: docs/kernels/softmax.md, Strategies, rows); a new length
                             # compiles once, 0.2-0.4 s for sm_90 on a 2-core x86-64 host, so ...
ROWS_STATIC_MAX_LENGTHS = 32  # ... a process compiles at most this many (length, dtype) pairs in; later
                             # ones take _rows_kernel (rows that grow a column a call pay 32 compiles)
ELEMS_PER_THREAD = 16        # register-resident tiles: elements each thread holds
SMALL_TILE_ELEMS = 512       # rows of SMALL_MIN_BLOCK columns or more, in a problem too small to give
SMALL_MIN_BLOCK = 128        # every SM one of the table's tiles: tiles of this many elements (at least
                             # a row), a warp each (measured: docs/kernels/softmax.md, Launch table)
SPLIT_TILE_BYTES = 16384     # split: bytes of input per segment tile (4096 fp32, 8192 fp16/bf16) ...
SPLIT_MAX_PER_SM = 4         # split: resident programs per SM used at most
SPLIT_SEG_TILES = 4          # split: tiles per segment on a GPU (64 KB of input) when the problem
                             # takes more than one round; shorter segments when it fits one:
SPLIT_ONE_ROUND_TILES = (1, 2)  # ... the first of these whose segments are all resident at once
SPLIT_WARPS = 8              # split: warps of a full tile
SPLIT_ROUNDS_SEG_TILES = 2   # split in several rounds whose rows hold at most SPLIT_ROUNDS_MAX_SEGS segments
SPLIT_ROUNDS_MAX_SEGS = 128  # of this many tiles: segments of SPLIT_ROUNDS_SEG_TILES tiles on
SPLIT_ROUNDS_WARPS = 4       # SPLIT_ROUNDS_WARPS warps, up to SPLIT_ROUNDS_PER_SM programs an SM (fp16/bf16
SPLIT_ROUNDS_PER_SM = 6      # kernels hold 86 registers, 5 an SM); longer rows and peeled 16-bit ones keep the table's
VECTOR_BYTES = 16            # widest global access (ld.global.v4.b32)
PEEL_MIN_COLS = 1024         # row, looped: rows off the vector boundary peeled from this length on
                             # (4096x7 fp32 looped 4.7 us unpeeled, 7.4 peeled; 4097 columns gain)
PARTIALS_BLOCK = 128         # partials combined this many at a time by split's phase 2

_PARTIALS, _FINISH, _FUSED = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)   # split kernel modes
LOG2E = tl.constexpr(1.4426950408889634)


def traffic_bytes(rows: int, cols: int, dtype: torch.dtype) -> int:
    """Bytes an ideal softmax moves: one read and one write of every element."""
    return 2 * rows * cols * dtype.itemsize


def reference(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The float64 answer `softmax` is checked against."""
    return torch.softmax(x.to(torch.float64), dim=dim)


# --------------------------------------------------------------------------------------------
# Kernels. x and out are (n_rows, n_cols) with unit column stride; the row strides may differ.
# VEC is a power of two dividing n_cols and both row strides (and the base addresses, in
# elements), so the compiler may use VEC-wide accesses without checking it.
# --------------------------------------------------------------------------------------------

@triton.jit
def _exp(y):
    """exp(y) as exp2(y * log2 e): `ex2.approx.ftz.f32`, one MUFU.EX2. tl.exp lowers to
    `ex2.approx.f32`, which ptxas wraps in a subnormal range test (an FSETP and two predicated
    FMULs an element). Results under 2^-126 flush to zero: an absolute change under 1.2e-38."""
    return tl.exp2(y * LOG2E)


@triton.jit
def _rows_kernel(out_ptr, x_ptr,
                 x_row_stride, out_row_stride,
                 n_rows, n_cols,
                 ROWS: tl.constexpr, BLOCK: tl.constexpr, VEC: tl.constexpr, PERSISTENT: tl.constexpr):
    """Several short rows per program: tiles of (ROWS, BLOCK); with PERSISTENT programs stride over
    the tiles, else program p takes tile p (a grid of one program a tile)."""
    if PERSISTENT:
        for tile in range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0)):
            _rows_tile(out_ptr, x_ptr, tile, x_row_stride, out_row_stride, n_rows, n_cols,
                       ROWS, BLOCK, VEC, False, False)
    else:
        _rows_tile(out_ptr, x_ptr, tl.program_id(0), x_row_stride, out_row_stride, n_rows, n_cols,
                   ROWS, BLOCK, VEC, False, False)


@triton.jit
def _rows_static_kernel(out_ptr, x_ptr, n_rows, N_COLS: tl.constexpr,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr, VEC: tl.constexpr, PERSISTENT: tl.constexpr,
                        EVEN: tl.constexpr):
    """`_rows_kernel` for contiguous rows of x and out (row stride N_COLS) with their length compiled
    in (one kernel a row length): `_rows_tile`'s STATIC tile. EVEN: ROWS divides n_rows."""
    if PERSISTENT:
        for tile in range(tl.program_id(0), tl.cdiv(n_rows, ROWS), tl.num_programs(0)):
            _rows_tile(out_ptr, x_ptr, tile, N_COLS, N_COLS, n_rows, N_COLS, ROWS, BLOCK, VEC, True, EVEN)
    else:
        _rows_tile(out_ptr, x_ptr, tl.program_id(0), N_COLS, N_COLS, n_rows, N_COLS, ROWS, BLOCK, VEC, True, EVEN)


@triton.jit
def _rows_tile(out_ptr, x_ptr, tile, x_row_stride, out_row_stride, n_rows, n_cols,
               ROWS: tl.constexpr, BLOCK: tl.constexpr, VEC: tl.constexpr, STATIC: tl.constexpr,
               EVEN: tl.constexpr):
    """Softmax of the rows of one (ROWS, BLOCK) tile, held in registers.

    STATIC (n_cols and the strides constants, rows * stride below 2^31): 32-bit offsets whose
    alignment and bounds the compiler works out from the constants, no row mask where EVEN, a
    plain store and a division by the row's sum, as Inductor's persistent reduction has them;
    else 64-bit offsets with VEC's alignment hints, a streaming (.cs) store and one reciprocal a
    row (measured: docs/kernels/softmax.md, Strategies, rows)."""
    cols = tl.arange(0, BLOCK)
    rows = tile * ROWS + tl.arange(0, ROWS)                                        # (ROWS,)
    if STATIC:
        col_mask = cols < n_cols
        x_off = rows * x_row_stride
        o_off = rows * out_row_stride
    else:
        col_mask = tl.max_constancy(cols < n_cols, VEC)
        x_off = tl.multiple_of(tl.cast(rows, tl.int64) * x_row_stride, VEC)
        o_off = tl.multiple_of(tl.cast(rows, tl.int64) * out_row_stride, VEC)
    if EVEN:
        mask = tl.full((ROWS, BLOCK), True, tl.int1) & col_mask[None, :]            # (ROWS, BLOCK)
    else:
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + x_off[:, None] + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    if BLOCK == 1:
        # One column: exp(x - max) / sum is exp(0) / 1 = 1 where x is finite, and NaN where it is
        # -inf, +inf or NaN (x - x), as torch.softmax gives; no exponential, reduction or division.
        y = x - x + 1.0
    else:
        # A row of -inf gives max -inf and NaN throughout, as torch.softmax does.
        e = _exp(x - tl.max(x, axis=1)[:, None])
        if STATIC:
            y = e / tl.sum(e, axis=1)[:, None]
        else:
            y = e * (1.0 / tl.sum(e, axis=1))[:, None]
    o_ptrs = out_ptr + o_off[:, None] + cols[None, :]
    if STATIC:
        tl.store(o_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(o_ptrs, y.to(out_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")


@triton.jit
def _row_body(row, x_row_stride, out_row_stride, n_cols, VEC: tl.constexpr):
    """Where a row's aligned body lies: (x offset, out offset, head, body length) of the elements
    from the first one on a VEC boundary, whole VEC groups of them. The head (fewer than VEC
    elements before it) and the tail (fewer than VEC after it) are the row's edges (`_edges`);
    x and out rows share their offset from the boundary (`_peeled_vec`)."""
    x_start = tl.cast(row, tl.int64) * x_row_stride
    head = tl.minimum((VEC - x_start % VEC) % VEC, n_cols)
    o_off = tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride + head, VEC)
    return tl.multiple_of(x_start + head, VEC), o_off, head, (n_cols - head) // VEC * VEC


@triton.jit
def _edges(head, n_body, n_cols, VEC: tl.constexpr):
    """Offsets (from the body's start) and mask of a row's edges in 2 * VEC lanes: head lanes at
    -head..-1, tail lanes from n_body."""
    lane = tl.arange(0, 2 * VEC)
    offs = tl.where(lane < VEC, lane - head, n_body + lane - VEC)
    return offs, tl.where(lane < VEC, lane < head, offs < n_cols - head)


@triton.jit
def _merge_stats(m1, s1, m2, s2):
    """(max, sum of exp(x - max)) of two parts from each part's own; (-inf, 0) if both are empty."""
    m = tl.maximum(m1, m2)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    return m, s1 * _exp(m1 - m_safe) + s2 * _exp(m2 - m_safe)


@triton.jit
def _row_kernel(out_ptr, x_ptr,
                x_row_stride, out_row_stride,
                n_rows, n_cols,
                BLOCK: tl.constexpr, VEC: tl.constexpr, PEEL: tl.constexpr, PERSISTENT: tl.constexpr):
    """One row per program, held in registers; with PERSISTENT programs stride over the rows,
    else program p takes row p (a grid of one program a row). With PEEL a row off the VEC boundary
    is its aligned body in the block and its edges in a small tile (`_row_body`); without, every
    row is on the boundary (`_access`). A row of -inf gives NaN, as torch does."""
    if PERSISTENT:
        for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
            _row_one(out_ptr, x_ptr, row, x_row_stride, out_row_stride, n_cols, BLOCK, VEC, PEEL)
    else:
        _row_one(out_ptr, x_ptr, tl.program_id(0), x_row_stride, out_row_stride, n_cols, BLOCK, VEC, PEEL)


@triton.jit
def _row_one(out_ptr, x_ptr, row, x_row_stride, out_row_stride, n_cols,
             BLOCK: tl.constexpr, VEC: tl.constexpr, PEEL: tl.constexpr):
    """Softmax of one row, held in registers (see _row_kernel)."""
    cols = tl.arange(0, BLOCK)
    if PEEL:
        x_off, o_off, head, n_body = _row_body(row, x_row_stride, out_row_stride, n_cols, VEC)
        mask = tl.max_constancy(cols < n_body, VEC)
        e_offs, e_mask = _edges(head, n_body, n_cols, VEC)
        x = tl.load(x_ptr + x_off + cols, mask=mask, other=-float("inf")).to(tl.float32)   # (BLOCK,)
        xe = tl.load(x_ptr + x_off + e_offs, mask=e_mask, other=-float("inf")).to(tl.float32)
        m = tl.maximum(tl.max(x, axis=0), tl.max(xe, axis=0))
        e = _exp(x - m)
        ee = _exp(xe - m)
        inv = 1.0 / (tl.sum(e, axis=0) + tl.sum(ee, axis=0))
        tl.store(out_ptr + o_off + cols, (e * inv).to(out_ptr.dtype.element_ty), mask=mask,
                 cache_modifier=".cs")
        tl.store(out_ptr + o_off + e_offs, (ee * inv).to(out_ptr.dtype.element_ty), mask=e_mask)
    else:
        mask = tl.max_constancy(cols < n_cols, VEC)
        x_off = tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
        o_off = tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC)
        x = tl.load(x_ptr + x_off + cols, mask=mask, other=-float("inf")).to(tl.float32)   # (BLOCK,)
        e = _exp(x - tl.max(x, axis=0))
        y = e * (1.0 / tl.sum(e, axis=0))
        tl.store(out_ptr + o_off + cols, y.to(out_ptr.dtype.element_ty), mask=mask, cache_modifier=".cs")


@triton.jit
def _tiles_stats(x_row, start, n_tiles, n_cols, BLOCK: tl.constexpr, VEC: tl.constexpr):
    """(max, sum of exp(x - max)) of n_tiles tiles of BLOCK columns from `start`, in one pass.

    Tiles that are all -inf (or masked) give (-inf, 0). Loads ask L2 to keep the tiles, which
    the normalising pass reads again.
    """
    cols = tl.arange(0, BLOCK)
    m = tl.full([], -float("inf"), tl.float32)    # running max
    s = tl.full([], 0.0, tl.float32)              # running sum of exp(x - m)
    for t in range(0, n_tiles):
        offs = start + t * BLOCK + cols
        mask = tl.max_constancy(offs < n_cols, VEC)
        x = tl.load(x_row + offs, mask=mask, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)   # no -inf - -inf while all -inf
        s = s * _exp(m - m_safe) + tl.sum(_exp(x - m_safe), axis=0)
        m = m_new
    return m, s


@triton.jit
def _tiles_normalize(o_row, x_row, start, n_tiles, n_cols, row_max, inv_sum,
                     BLOCK: tl.constexpr, VEC: tl.constexpr):
    """Write exp(x - row_max) * inv_sum over the same tiles, last tile first (likeliest in L2)."""
    cols = tl.arange(0, BLOCK)
    for t in range(0, n_tiles):
        offs = start + (n_tiles - 1 - t) * BLOCK + cols
        mask = tl.max_constancy(offs < n_cols, VEC)
        x = tl.load(x_row + offs, mask=mask, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
        y = _exp(x - row_max) * inv_sum          # row_max == -inf (all -inf row) gives NaN
        tl.store(o_row + offs, y.to(o_row.dtype.element_ty), mask=mask, eviction_policy="evict_first")


@triton.jit
def _looped_kernel(out_ptr, x_ptr,
                   x_row_stride, out_row_stride,
                   n_rows, n_cols,
                   BLOCK: tl.constexpr, VEC: tl.constexpr, PEEL: tl.constexpr):
    """One row per program in tiles of BLOCK: online max and sum, then a normalising pass.

    With PEEL rows need not start on a VEC boundary (an odd row length): the tiles cover each
    row's aligned body, and its edges, fewer than VEC elements on each side, take one small tile
    (`_row_body`).
    """
    if PEEL:
        for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
            x_off, o_off, head, n_body = _row_body(row, x_row_stride, out_row_stride, n_cols, VEC)
            x_row = x_ptr + x_off
            o_row = out_ptr + o_off
            e_offs, e_mask = _edges(head, n_body, n_cols, VEC)
            xe = tl.load(x_row + e_offs, mask=e_mask, other=-float("inf")).to(tl.float32)
            m_e, s_e = _block_stats(xe)
            n_tiles = tl.cdiv(n_body, BLOCK)
            m_b, s_b = _tiles_stats(x_row, 0, n_tiles, n_body, BLOCK, VEC)
            m, s = _merge_stats(m_e, s_e, m_b, s_b)
            inv = 1.0 / s                                                # all -inf: NaN below
            _tiles_normalize(o_row, x_row, 0, n_tiles, n_body, m, inv, BLOCK, VEC)
            tl.store(o_row + e_offs, (_exp(xe - m) * inv).to(out_ptr.dtype.element_ty), mask=e_mask)
    else:
        n_tiles = tl.cdiv(n_cols, BLOCK)
        for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
            x_row = x_ptr + tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
            o_row = out_ptr + tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC)
            m, s = _tiles_stats(x_row, 0, n_tiles, n_cols, BLOCK, VEC)
            _tiles_normalize(o_row, x_row, 0, n_tiles, n_cols, m, 1.0 / s, BLOCK, VEC)


@triton.jit
def _block_stats(x):
    """(max, sum of exp(x - max)) of a block held in registers; (-inf, 0) if it is all -inf."""
    m = tl.max(x, axis=0)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    return m, tl.sum(_exp(x - m_safe), axis=0)


@triton.jit
def _tag(slots_ptr, slot, MODE: tl.constexpr):
    """This launch's tag: the one its partials carry. Every launch writes every word of its buffer,
    so all carry the previous launch's tag, read here from a word only this program writes; the
    fused and partials launches take the other one, the finishing launch the partials' own."""
    last = (tl.load(slots_ptr + slot, volatile=True) >> 31) & 1
    if MODE != _FINISH:
        last = 1 - last
    return last


@triton.jit
def _publish(slots_ptr, slot, m, s, tag):
    """A segment's partials as one 64-bit word, written with one relaxed exchange whose result is
    not read: the max's fp32 bits high, the sum's low with `tag` in the sum's sign bit (a sum of
    exponentials is never negative; a NaN sum loses only its sign)."""
    hi = m.to(tl.int32, bitcast=True).to(tl.int64) << 32
    lo = (s.to(tl.int32, bitcast=True) & 0x7FFFFFFF).to(tl.int64) | (tag << 31)
    tl.atomic_xchg(slots_ptr + slot, hi | lo, sem="relaxed")


@triton.jit
def _gather(slots_ptr, part, n_segs, tag, PARTIALS_BLOCK: tl.constexpr):
    """Row max M and sum S = sum s_j exp(m_j - M) from the row's n_segs words, each block read
    again until every word carries `tag` (the row's segments are all resident: in the fused
    launch they publish before they wait). The data is its own flag, so no fence orders it."""
    offs = tl.arange(0, PARTIALS_BLOCK)
    ready = (tl.full([], -float("inf"), tl.float32).to(tl.int32, bitcast=True).to(tl.int64) << 32) \
        | (tag << 31)                                             # masked lanes: (-inf, 0), ready
    row_max = tl.full([], -float("inf"), tl.float32)
    row_sum = tl.full([], 0.0, tl.float32)
    for j in range(0, n_segs, PARTIALS_BLOCK):
        mask = j + offs < n_segs
        w = tl.load(slots_ptr + part + j + offs, mask=mask, other=ready, volatile=True)
        while tl.sum((((w >> 31) & 1) != tag).to(tl.int32), axis=0) > 0:
            w = tl.load(slots_ptr + part + j + offs, mask=mask, other=ready, volatile=True)
        pm = (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)
        ps = (w & 0x7FFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
        bm = tl.max(pm, axis=0)
        bm_safe = tl.where(bm == -float("inf"), 0.0, bm)          # all -inf segments add 0
        row_max, row_sum = _merge_stats(row_max, row_sum, bm, tl.sum(ps * _exp(pm - bm_safe), axis=0))
    return row_max, row_sum


# Sizes and strides are not specialised on (the VEC hints carry their divisibility), so one
# compiled kernel, and one occupancy, serves every shape of a dtype and configuration.
@triton.jit
def _segment(x_ptr, row, x_row_stride, out_row_stride, n_rows, n_cols, seg, start,
             BLOCK: tl.constexpr, VEC: tl.constexpr, ONE_TILE: tl.constexpr):
    """Segment `seg` of `row`: its tile loaded if ONE_TILE (else all -inf, the tiles being read in
    the phases), and for segment 0 the row's edges (all -inf past the last row), with the offsets
    and masks that address them (see `_row_body`)."""
    x_off, o_off, head, n_body = _row_body(row, x_row_stride, out_row_stride, n_cols, VEC)
    cols = start + tl.arange(0, BLOCK)
    live = row < n_rows
    mask = tl.max_constancy(cols < n_body, VEC)
    e_offs, e_mask = _edges(head, n_body, n_cols, VEC)
    e_mask = e_mask & (seg == 0)
    if ONE_TILE:
        x = tl.load(x_ptr + x_off + cols, mask=mask & live, other=-float("inf"), eviction_policy="evict_first")
    else:
        x = tl.full([BLOCK], -float("inf"), tl.float32)         # unused: the phases read the tiles
    xe = tl.load(x_ptr + x_off + e_offs, mask=e_mask & live, other=-float("inf"))
    return x, xe, x_off, o_off, n_body, mask, e_offs, e_mask


# Sizes and strides are not specialised on (the VEC hints carry their divisibility), so one
# compiled kernel, and one occupancy, serves every shape of a dtype and configuration.
@triton.jit(do_not_specialize=["x_row_stride", "out_row_stride", "n_rows", "n_cols", "n_segs", "seg_tiles"])
def _split_kernel(out_ptr, x_ptr, slots_ptr,
                  x_row_stride, out_row_stride,
                  n_rows, n_cols, n_segs, seg_tiles,
                  BLOCK: tl.constexpr, VEC: tl.constexpr, PARTIALS_BLOCK: tl.constexpr,
                  MODE: tl.constexpr, ONE_TILE: tl.constexpr, PREFETCH: tl.constexpr, PEEL: tl.constexpr):
    """Each row cut into n_segs segments of seg_tiles tiles of BLOCK columns, one program a segment.

    slots: (n_rows, n_segs) int64, a segment's partials a word (`_publish`), zero before a buffer's
    first launch, every word written by every launch (`_tag`). Program p handles segment p % n_segs
    of rows p // n_segs, p // n_segs + R, ... with R = num_programs // n_segs (a single row unless
    MODE is _FUSED). With ONE_TILE the segment stays in registers between the phases (and the next
    round's segment is loaded while waiting if PREFETCH); otherwise phase 2 reads the segment
    again, from L2 where it still is. With PEEL segments cover each row's aligned body
    (`_row_body`) and segment 0 also takes the row's edges; without, every row is on the VEC
    boundary (`_access`) and its own code runs, without the edges' (measured: docs/kernels/
    softmax.md, Access width and peeling).
    """
    pid = tl.program_id(0)
    seg = pid % n_segs
    first = pid // n_segs
    rows_per_round = tl.num_programs(0) // n_segs
    start = seg * seg_tiles * BLOCK
    tag = _tag(slots_ptr, tl.cast(first, tl.int64) * n_segs + seg, MODE)
    if PEEL:
        x, xe, x_off, o_off, n_body, mask, e_offs, e_mask = _segment(
            x_ptr, first, x_row_stride, out_row_stride, n_rows, n_cols, seg, start, BLOCK, VEC, ONE_TILE)
        for row in range(first, n_rows, rows_per_round):
            x_row = x_ptr + x_off
            o_row = out_ptr + o_off
            part = tl.cast(row, tl.int64) * n_segs
            nxt = row + rows_per_round
            xe32 = xe.to(tl.float32)
            if MODE != _FINISH:                                   # phase 1: this segment's partials
                if ONE_TILE:
                    m, s = _block_stats(x.to(tl.float32))
                else:
                    m, s = _tiles_stats(x_row, start, seg_tiles, n_body, BLOCK, VEC)
                m_e, s_e = _block_stats(xe32)
                m, s = _merge_stats(m, s, m_e, s_e)
                _publish(slots_ptr, part + seg, m, s, tag)
                if MODE == _FUSED:
                    if ONE_TILE and PREFETCH:   # the next round's segment streams in during the wait
                        x_n, xe_n, x_off_n, o_off_n, n_body_n, mask_n, e_offs_n, e_mask_n = _segment(
                            x_ptr, nxt, x_row_stride, out_row_stride, n_rows, n_cols, seg, start, BLOCK, VEC, ONE_TILE)
            if MODE != _PARTIALS:                                 # phase 2: combine, normalise, write
                row_max, row_sum = _gather(slots_ptr, part, n_segs, tag, PARTIALS_BLOCK)
                inv = 1.0 / row_sum
                if ONE_TILE:
                    y = _exp(x.to(tl.float32) - row_max) * inv
                    tl.store(o_row + start + tl.arange(0, BLOCK), y.to(out_ptr.dtype.element_ty), mask=mask,
                             eviction_policy="evict_first")
                else:
                    _tiles_normalize(o_row, x_row, start, seg_tiles, n_body, row_max, inv, BLOCK, VEC)
                tl.store(o_row + e_offs, (_exp(xe32 - row_max) * inv).to(out_ptr.dtype.element_ty), mask=e_mask)
            if MODE == _FUSED and ONE_TILE and PREFETCH:
                x, xe, x_off, o_off, n_body, mask, e_offs, e_mask = \
                    x_n, xe_n, x_off_n, o_off_n, n_body_n, mask_n, e_offs_n, e_mask_n
            else:
                x, xe, x_off, o_off, n_body, mask, e_offs, e_mask = _segment(
                    x_ptr, nxt, x_row_stride, out_row_stride, n_rows, n_cols, seg, start, BLOCK, VEC, ONE_TILE)
    else:
        cols = start + tl.arange(0, BLOCK)
        mask = tl.max_constancy(cols < n_cols, VEC)
        if ONE_TILE:
            x = tl.load(x_ptr + tl.multiple_of(tl.cast(first, tl.int64) * x_row_stride, VEC) + cols,
                        mask=mask & (first < n_rows), other=-float("inf"), eviction_policy="evict_first")
        for row in range(first, n_rows, rows_per_round):
            x_row = x_ptr + tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
            o_row = out_ptr + tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC)
            part = tl.cast(row, tl.int64) * n_segs
            nxt = row + rows_per_round
            if MODE != _FINISH:                                   # phase 1: this segment's partials
                if ONE_TILE:
                    m, s = _block_stats(x.to(tl.float32))
                else:
                    m, s = _tiles_stats(x_row, start, seg_tiles, n_cols, BLOCK, VEC)
                _publish(slots_ptr, part + seg, m, s, tag)
                if MODE == _FUSED:
                    if ONE_TILE and PREFETCH:   # the next round's segment streams in during the wait
                        x_next = tl.load(x_ptr + tl.multiple_of(tl.cast(nxt, tl.int64) * x_row_stride, VEC)
                                         + cols, mask=mask & (nxt < n_rows), other=-float("inf"),
                                         eviction_policy="evict_first")
            if MODE != _PARTIALS:                                 # phase 2: combine, normalise, write
                row_max, row_sum = _gather(slots_ptr, part, n_segs, tag, PARTIALS_BLOCK)
                if ONE_TILE:
                    y = _exp(x.to(tl.float32) - row_max) * (1.0 / row_sum)
                    tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask,
                             eviction_policy="evict_first")
                else:
                    _tiles_normalize(o_row, x_row, start, seg_tiles, n_cols, row_max, 1.0 / row_sum,
                                     BLOCK, VEC)
            if MODE == _FUSED and ONE_TILE:
                if PREFETCH:
                    x = x_next
                else:
                    x = tl.load(x_ptr + tl.multiple_of(tl.cast(nxt, tl.int64) * x_row_stride, VEC) + cols,
                                mask=mask & (nxt < n_rows), other=-float("inf"),
                                eviction_policy="evict_first")


# --------------------------------------------------------------------------------------------
# Launch parameters, device facts, launchers
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """Launch parameters of one strategy at one row length and dtype."""
    block: int             # columns per tile (power of two)
    num_warps: int
    rows: int = 1          # rows per tile (strategy `rows`)
    per_sm: int = 0        # persistent grid of per_sm programs per SM (0: one program per tile;
                           # split: as many as are resident, up to SPLIT_MAX_PER_SM)
    prefetch: bool = True  # split: load the next round's segment before waiting
    seg_tiles: int = 0     # split: tiles per segment (0: chosen at launch, `_launch_split`)


def covered_cols(cols: int, vec: int) -> int:
    """Columns of a row that the row and looped blocks cover at access width `vec`: a row that
    peels (PEEL_MIN_COLS columns on) has its aligned body there, at most cols - cols % vec
    elements, and its edges in a tile of their own; 4097 columns at 16-byte accesses take a 4096
    block, not 8192. A shorter row is covered whole."""
    return cols - cols % vec if cols >= PEEL_MIN_COLS else cols


def wide_body(cols: int, dtype: torch.dtype) -> int:
    """covered_cols at 16-byte accesses, the width the launch table and the dispatch rule assume."""
    return covered_cols(cols, VECTOR_BYTES // dtype.itemsize)


def fills_row_block(cols: int, dtype: torch.dtype) -> bool:
    """Whether the columns a block covers at 16-byte accesses fill at least ROW_MIN_FILL of its
    power of two (else looped's `config` takes LOOPED_SHORT_BLOCK tiles)."""
    covered = wide_body(cols, dtype)
    return covered >= ROW_MIN_FILL * pow2(covered)


def _row_warps(covered: int) -> int:
    """Warps of a row program: one per 32 * ELEMS_PER_THREAD of the columns its block covers,
    rounded down to a power of two, 4 to 32 (a 4096 block holding 2056-4095 columns takes 4)."""
    return _clamp(pow2(covered // (32 * ELEMS_PER_THREAD) + 1) // 2, 4, 32)


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


@functools.lru_cache(maxsize=4096)
def config(strategy: str, cols: int, dtype: torch.dtype, rows: int | None = None,
           sms: int = INTERPRETER_SMS) -> Config:
    """The launch table: parameters for `strategy` on rows of `cols` elements.

    Register-resident tiles give each thread ELEMS_PER_THREAD elements, the setting of the best
    peer measurement at every anchor shape (row/program with 4 warps at 1024-2048 columns, 8 at
    4096, 32 at 32768); looped and split tiles are sized in bytes (module docstring). The table
    depends on `cols` and `dtype`, and for `rows` also on the number of rows per SM (a small
    problem takes fewer rows a tile, `rows` None meaning a large one).
    """
    block = pow2(cols)
    elem = dtype.itemsize
    if strategy == "rows":
        cap = ROWS_MAX_TILE_ROWS
        if block == 1:
            large = rows is None or rows >= ROWS_1COL_LARGE_TILES_PER_SM * ROWS_1COL_LARGE_TILE_ROWS * sms
            cap = ROWS_1COL_LARGE_TILE_ROWS if large else ROWS_MAX_TILE_ROWS_1COL
        rows_per_tile = _clamp(ELEMS_PER_THREAD * 32 * 4 // block, 1, cap)
        warp_elems = ROWS_THREAD_ELEMS
        if rows is not None and block > 1:     # a small problem: at least one tile per SM
            fit = 1 << (max(rows // sms, 1).bit_length() - 1)
            if block >= SMALL_MIN_BLOCK and fit < rows_per_tile:   # the table's tiles would leave SMs idle
                rows_per_tile, warp_elems = min(rows_per_tile, max(1, SMALL_TILE_ELEMS // block)), SMALL_TILE_ELEMS
            else:
                rows_per_tile = min(rows_per_tile, fit)
        return Config(block=block, num_warps=_clamp(rows_per_tile * block // warp_elems, 1, 4), rows=rows_per_tile)
    covered = wide_body(cols, dtype)                           # columns at 16-byte accesses
    body = pow2(covered)                                       # row and looped blocks
    if strategy == "row":
        return Config(block=body, num_warps=_row_warps(covered))
    if strategy == "looped":
        if cols <= ROW_MAX_COLS and not fills_row_block(cols, dtype):
            return Config(block=LOOPED_SHORT_BLOCK, num_warps=4)
        tile = min(body, 8192)
        return Config(block=tile, num_warps=_clamp(tile * elem // (32 * LOOPED_THREAD_BYTES), 4, 16))
    if strategy == "split":
        tile = min(block, SPLIT_TILE_BYTES // elem)
        # rounds of short-segment rows (2-tile segments do not fit in one round); a peeled 16-bit
        # row's kernel holds 117 registers, fewer than SPLIT_ROUNDS_PER_SM programs an SM: table
        if rows is not None and not (covered != cols and elem < 4):
            segs = cdiv(cdiv(covered, tile), SPLIT_ROUNDS_SEG_TILES)
            if rows * segs > SPLIT_MAX_PER_SM * sms and segs <= SPLIT_ROUNDS_MAX_SEGS:
                return Config(block=tile, num_warps=SPLIT_ROUNDS_WARPS, per_sm=SPLIT_ROUNDS_PER_SM,
                              seg_tiles=SPLIT_ROUNDS_SEG_TILES)
        return Config(block=tile, num_warps=_clamp(tile // (32 * ELEMS_PER_THREAD), 4, SPLIT_WARPS))
    raise ValueError(f"unknown strategy {strategy!r}; expected one of {tuple(STRATEGIES)}")


_OCCUPANCY: dict = {}


def _resident_per_sm(key: tuple, device: torch.device, warmup: Callable[[], object]) -> int:
    """Programs of a compiled kernel that fit on one SM at once.

    Asks the CUDA driver (cuOccupancyMaxActiveBlocksPerMultiprocessor); where that is not
    reachable, counts registers, threads and shared memory the way the driver does.
    """
    if key not in _OCCUPANCY:
        compiled = warmup()
        compiled._init_handles()
        threads = 32 * compiled.metadata.num_warps
        smem = compiled.metadata.shared
        try:
            blocks = ctypes.c_int(0)
            status = _libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(blocks), ctypes.c_void_p(compiled.function), threads, ctypes.c_size_t(smem))
            if status != 0:
                raise OSError(f"CUDA driver error {status}")
            fit = blocks.value
        except (OSError, AttributeError):
            info = properties(device.index)
            regs = -(-max(compiled.n_regs, 1) // 8) * 8 * threads    # allocated 8 registers at a time
            fit = min(info["regs"] // regs, info["threads"] // threads, 32)
            if smem:
                fit = min(fit, info["smem"] // (smem + 1024))          # 1 KB reserved per block
        _OCCUPANCY[key] = max(fit, 0)
    return _OCCUPANCY[key]


@functools.lru_cache(maxsize=1)
def _libcuda():
    return ctypes.CDLL("libcuda.so.1")


def _vec(x: torch.Tensor, out: torch.Tensor) -> int:
    """Widest power-of-two access width (elements, <= 16 bytes) valid for every row of x and out."""
    elem = x.element_size()
    rows, cols = x.shape
    vec = VECTOR_BYTES // elem
    ints = [cols]
    if rows > 1:
        ints += [x.stride(0), out.stride(0)]
    while vec > 1 and (any(i % vec for i in ints)
                       or x.data_ptr() % (vec * elem) or out.data_ptr() % (vec * elem)):
        vec //= 2
    return vec


def _grid(work: int, cfg: Config, device: torch.device) -> int:
    if cfg.per_sm:
        return max(1, min(work, cfg.per_sm * num_sms(device)))
    return max(1, work)


def _rows_args(x: torch.Tensor, out: torch.Tensor, cfg: Config):
    rows, cols = x.shape
    vec = _vec(x, out)
    narrow = ROWS_NARROW_TILE_ROWS.get((vec, cfg.block))     # narrow accesses, a block wider than a warp
    if narrow and cfg.num_warps > 1:
        cfg = replace(cfg, num_warps=1, rows=min(narrow, cfg.rows))
    grid = (_grid(cdiv(rows, cfg.rows), cfg, x.device),)
    options = dict(num_warps=cfg.num_warps, num_stages=1)
    if _static_rows(x, out, cfg):
        return _rows_static_kernel, grid, (out, x, rows, cols, cfg.rows, cfg.block, vec, bool(cfg.per_sm),
                                           rows % cfg.rows == 0), options
    return _rows_kernel, grid, (out, x, x.stride(0), out.stride(0), rows, cols, cfg.rows, cfg.block,
                                vec, bool(cfg.per_sm)), options


_STATIC_LENGTHS: set = set()   # (row length, dtype) pairs compiled into _rows_static_kernel so far


def _static_rows(x: torch.Tensor, out: torch.Tensor, cfg: Config) -> bool:
    """True where rows compiles the row length in (`_rows_static_kernel`): contiguous rows of x and
    out in a block of 2 to ROWS_STATIC_MAX_BLOCK columns, every offset under 2^31 elements, a
    length (and dtype) already compiled in or one of the first ROWS_STATIC_MAX_LENGTHS. A length it
    says True to is recorded in _STATIC_LENGTHS."""
    rows, cols = x.shape
    if not (1 < cfg.block <= ROWS_STATIC_MAX_BLOCK and (rows == 1 or x.stride(0) == out.stride(0) == cols)
            and (rows + cfg.rows) * cols < 2 ** 31):
        return False
    key = (cols, x.dtype)
    if key not in _STATIC_LENGTHS:
        if len(_STATIC_LENGTHS) >= ROWS_STATIC_MAX_LENGTHS:
            return False
        _STATIC_LENGTHS.add(key)
    return True


def _row_args(x: torch.Tensor, out: torch.Tensor, cfg: Config):
    rows, cols = x.shape
    vec, peel = _access(x, out)
    covered = covered_cols(cols, vec)         # without PEEL vec divides cols: the whole row
    block = pow2(covered)
    if block > cfg.block:     # narrower accesses than the table assumed: a longer body, a bigger block
        cfg = Config(block=block, num_warps=_row_warps(covered), per_sm=cfg.per_sm)
    return _row_kernel, (_grid(rows, cfg, x.device),), (out, x, x.stride(0), out.stride(0), rows, cols,
                                                         cfg.block, vec, peel, bool(cfg.per_sm)), \
        dict(num_warps=cfg.num_warps, num_stages=1)


def _peeled_vec(x: torch.Tensor, out: torch.Tensor) -> int:
    """Widest access width (elements, <= 16 bytes) for looped's aligned row bodies: both base
    addresses on its boundary and every row of x and out at the same offset from it."""
    elem = x.element_size()
    vec = VECTOR_BYTES // elem
    while vec > 1 and (x.data_ptr() % (vec * elem) or out.data_ptr() % (vec * elem)
                       or (x.shape[0] > 1 and (x.stride(0) - out.stride(0)) % vec)):
        vec //= 2
    return vec


def _access(x: torch.Tensor, out: torch.Tensor) -> tuple[int, bool]:
    """(VEC, PEEL) of row, looped and split: whole rows at `_vec`'s width when that is as wide as peeling
    allows, else aligned bodies and peeled edges at `_peeled_vec`'s. Without PEEL the kernels run
    code of their own that has no edges' code in it, which an aligned row would otherwise pay for.
    Rows under PEEL_MIN_COLS never peel. Measured: docs/kernels/softmax.md, Access width and
    peeling."""
    plain, peeled = _vec(x, out), _peeled_vec(x, out)
    if plain >= peeled or x.shape[1] < PEEL_MIN_COLS:
        return plain, False
    return peeled, True


def _looped_args(x: torch.Tensor, out: torch.Tensor, cfg: Config):
    rows, cols = x.shape
    return _looped_kernel, (_grid(rows, cfg, x.device),), (out, x, x.stride(0), out.stride(0), rows, cols,
                                                            cfg.block, *_access(x, out)), \
        dict(num_warps=cfg.num_warps)


def _one_launch(arguments):
    """Launcher of a one-kernel strategy: returns (compiled kernel, grid, arguments) of the launch.

    The arguments are (out, x, then the rest in signature order, constexprs included), what a
    plan needs to launch the compiled kernel again (see kernels._plans).
    """
    def launch(x: torch.Tensor, out: torch.Tensor, cfg: Config):
        kernel, grid, args, options = arguments(x, out, cfg)
        return kernel[grid](*args, **options), grid, args
    return launch


def _capturing() -> bool:
    """True while the current CUDA stream is being captured into a CUDA graph."""
    return torch.cuda.is_current_stream_capturing()


_SLOTS: dict = {}
SLOTS_CACHE_SIZE = 64        # split: partials buffers kept per process; the oldest dropped beyond this


def _slots(device: torch.device, rows: int, n_segs: int) -> torch.Tensor:
    """A (rows, n_segs) int64 partials buffer for split, one per device, stream and layout.

    Zeroed once, when made: every launch writes every word of its buffer with the other tag than
    the launch before (`_tag`), so launches one after another on a stream with the same layout
    can share it, and no call pays a memset (a zeroing kernel in every call cost the 5-7 us
    8x262144 launches 0.7 us in the c899ebb run). Inside a CUDA graph capture a call gets a buffer
    of its own, allocated in the graph's pool and zeroed by a memset the graph replays.
    """
    if not interpreting() and _capturing():          # the interpreter captures nothing
        return torch.zeros((rows, n_segs), dtype=torch.int64, device=device)
    stream = torch.cuda.current_stream(device).stream_id if device.type == "cuda" else None
    key = (device, stream, rows, n_segs)
    buf = _SLOTS.get(key)
    if buf is None:
        buf = torch.zeros((rows, n_segs), dtype=torch.int64, device=device)
        remember(_SLOTS, key, buf, SLOTS_CACHE_SIZE)
    return buf


def _launch_split(x: torch.Tensor, out: torch.Tensor, cfg: Config) -> tuple | None:
    """Launcher of `split`: (compiled kernel, grid, arguments) of the fused launch, else None.

    On a GPU the fused (cooperative) launch is tried with one-tile segments, then with segments of
    several tiles; its arguments are (out, x, then the rest in signature order, constexprs
    included), as `_one_launch` returns them. They hold the launch's workspace (`slots`, the (rows,
    n_segs) int64 partials, `_slots`), so a plan that keeps them (`_Plan`) may launch them again
    only on the stream of its first launch: each launch writes every word with the other tag than
    the launch before (`_tag`), so launches one after another on a stream can share the buffer, and
    launches on two streams at once cannot. The cooperative launch is a compile option
    (`launch_cooperative_grid`, in the compiled kernel's metadata), which Triton's launcher applies
    to every launch of the compiled kernel, the plan's included. Where the driver refuses every
    cooperative grid, and in the interpreter (which runs programs one after another), the phases
    are two launches and the result is None: no plan launches them directly.
    """
    rows, cols = x.shape
    vec, peel = _access(x, out)
    # Segments cover a peeled row's aligned body (segment 0 takes its edges): 65537 columns are
    # eight 8192-column tiles, two 4-tile segments, not nine tiles and a third, empty segment.
    tiles = cdiv(covered_cols(cols, vec), cfg.block)
    common = dict(BLOCK=cfg.block, VEC=vec, PARTIALS_BLOCK=PARTIALS_BLOCK, PREFETCH=cfg.prefetch, PEEL=peel,
                  num_warps=cfg.num_warps)

    def arguments(mode, one_tile, seg_tiles, slots):
        """The kernel's arguments in signature order, constexprs included."""
        return (out, x, slots, x.stride(0), out.stride(0),
                rows, cols, cdiv(tiles, seg_tiles), seg_tiles,
                cfg.block, vec, PARTIALS_BLOCK, mode.value, one_tile, cfg.prefetch, peel)

    if not interpreting():
        dummy = torch.empty(1, dtype=torch.int64, device=x.device)
        wide = max(rows, cols, abs(x.stride(0)), out.stride(0)) >= 2**31   # i64 size arguments
        for seg_tiles in (cfg.seg_tiles,) if cfg.seg_tiles else (*SPLIT_ONE_ROUND_TILES, SPLIT_SEG_TILES):
            one_tile = seg_tiles == 1
            key = ("split", x.device, x.dtype, cfg.block, cfg.num_warps, cfg.prefetch, vec, peel, one_tile,
                   wide, x.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0)
            resident = _resident_per_sm(key, x.device, lambda: _split_kernel.warmup(
                out, x, dummy, x.stride(0), out.stride(0), rows, cols, 1, 1,
                MODE=_FUSED.value, ONE_TILE=one_tile, launch_cooperative_grid=True, grid=(1,), **common))
            capacity = min(resident, cfg.per_sm or SPLIT_MAX_PER_SM) * num_sms(x.device)
            n_segs = cdiv(tiles, seg_tiles)
            if n_segs > capacity or (not cfg.seg_tiles and seg_tiles in SPLIT_ONE_ROUND_TILES
                                     and rows * n_segs > capacity):
                continue
            slots = _slots(x.device, rows, n_segs)
            # Rounds of rows_per_round rows, every segment of a round resident at once.
            grid = (min(capacity // n_segs, rows) * n_segs,)
            args = arguments(_FUSED, one_tile, seg_tiles, slots)
            try:
                compiled = _split_kernel[grid](*args, launch_cooperative_grid=True,
                                               num_warps=cfg.num_warps)
                return compiled, grid, args
            except RuntimeError as exc:   # the driver refused the cooperative grid
                if "cooperative" not in str(exc):
                    raise
    # Two launches (the interpreter runs programs one after another): partials, then the rest, into
    # the same shared workspace as the fused launch (the partials launch writes every word with the
    # other tag, the finishing one reads its own), so no call pays a memset here either.
    seg_tiles = cfg.seg_tiles or SPLIT_SEG_TILES
    n_segs = cdiv(tiles, seg_tiles)
    slots = _slots(x.device, rows, n_segs)
    for mode in (_PARTIALS, _FINISH):
        _split_kernel[(rows * n_segs,)](*arguments(mode, seg_tiles == 1, seg_tiles, slots),
                                        num_warps=cfg.num_warps)
    return None


# --------------------------------------------------------------------------------------------
# Strategies and the public API
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Strategy:
    """One kernel and its launch table. `run(x2d)` softmaxes each row of a (rows, cols) tensor."""
    name: str
    max_cols: int | None          # longest row the kernel handles (None: any)
    launch: Callable[[torch.Tensor, torch.Tensor, Config], tuple | None]   # (compiled, grid, args)
    stream_bound: bool = False    # the launch's arguments hold buffers of the stream it ran on

    def supports(self, cols: int) -> bool:
        return cols >= 1 and (self.max_cols is None or cols <= self.max_cols)

    def run(self, x2d: torch.Tensor, out: torch.Tensor | None = None,
            cfg: Config | None = None) -> torch.Tensor:
        check_tensor("x2d", x2d, DTYPES, ndim=2)
        rows, cols = x2d.shape
        if cols > 1 and x2d.stride(1) != 1:
            raise ValueError(f"x2d must have a contiguous last dimension, got strides {x2d.stride()}")
        if not self.supports(cols) and rows:
            raise ValueError(f"strategy {self.name!r} handles rows of at most {self.max_cols} "
                             f"columns, got {cols}")
        if out is None:
            out = torch.empty((rows, cols), dtype=x2d.dtype, device=x2d.device)
        elif (out.shape != x2d.shape or out.dtype != x2d.dtype or out.device != x2d.device
              or (cols > 1 and out.stride(1) != 1)):
            raise ValueError(f"out must be a {tuple(x2d.shape)} {x2d.dtype} tensor on {x2d.device} "
                             "with a contiguous last dimension")
        if rows and cols:
            cfg = cfg or config(self.name, cols, x2d.dtype, rows, num_sms(x2d.device))
            self.launch(x2d, out, cfg)
        return out


STRATEGIES: dict[str, Strategy] = {
    "rows": Strategy("rows", 4096, _one_launch(_rows_args)),
    "row": Strategy("row", 65536, _one_launch(_row_args)),
    "looped": Strategy("looped", None, _one_launch(_looped_args)),
    "split": Strategy("split", None, _launch_split, stream_bound=True),
}


def choose(rows: int, cols: int, dtype: torch.dtype, sms: int) -> str:
    """The dispatch rule (see the module docstring)."""
    if cols <= ROWS_MAX_COLS or (dtype != torch.float32 and cols <= ROWS_MAX_COLS_16BIT
                                 and rows >= ROWS_MIN_ROWS_PER_SM * sms):
        return "rows"
    row_max = ROW_MAX_COLS_FP32 if dtype == torch.float32 else ROW_MAX_COLS
    if cols <= row_max and rows >= ROW_MIN_ROWS_PER_SM * sms:
        large = (cols <= LOOPED_LARGE_MAX_COLS and rows * cols * dtype.itemsize >= LOOPED_MIN_BYTES
                 and (dtype == torch.float32 or cols >= LOOPED_LARGE_MIN_COLS_16BIT))
        long16 = (dtype != torch.float32 and cols > ROW_MAX_COLS_16BIT_MANY
                  and rows >= LOOPED_MIN_ROWS_PER_SM * sms)
        return "looped" if large or long16 else "row"
    if (cols > row_max and rows >= LOOPED_MIN_ROWS_PER_SM * sms
            and wide_body(cols, dtype) * dtype.itemsize <= LOOPED_MAX_ROW_BYTES):
        return "looped"
    return "split"


_PLANS: dict = {}   # (shape, strides, dtype, device, dim, type of dim, data_ptr % 16) -> _Plan


class _Plan:
    """A checked call: the strategy's launcher and parameters, and on a GPU the compiled launch.

    `direct` (a GPU tensor softmaxed along a dimension it is contiguous in, viewed as (rows, cols)
    without a copy) plans get `fast` after their first launch that returned (compiled, grid,
    args): (Launch, the launch's arguments after out and x), replayed with a fresh output of x's
    shape on the current stream (`fast_stream`).

    A `stream_bound` plan (split: its arguments hold the first launch's partials workspace, kept
    for the plan's lifetime) records that stream's handle in `stream` and replays only there,
    where stream order keeps its launches apart; on another stream or device, and while a CUDA
    graph is being captured, calls take the normal path (that stream's kept workspace, `_slots`, or
    a fresh one inside a capture). Such a plan gets no
    `fast` from a launch inside a capture (its workspace would belong to the graph's pool, zeroed
    by each replay) nor from a launch on a device other than x's.
    """
    __slots__ = ("launch", "cfg", "moved_dim", "rows", "cols", "stream_bound", "fast", "stream", "like", "lean",
                 "to_native")

    def __init__(self, launch, cfg, moved_dim, rows, cols, stream_bound=False, like=False):
        self.launch, self.cfg, self.moved_dim, self.rows, self.cols = launch, cfg, moved_dim, rows, cols
        self.stream_bound = stream_bound
        self.fast = None
        self.lean = None        # (C launcher, blob) of `fast` with out and x as addresses (kernels._lean_launch)
        self.stream = None      # stream_bound: handle of the stream `fast` may launch on
        self.like = like        # x is contiguous: a replay's output is kernels._plans.new_output's
        self.to_native = False  # `lean` is a real blob not yet given to the native replay (kernels._native_replay)

    def keep(self, launched: tuple, device: torch.device) -> None:
        """Keep a first launch's (compiled, grid, args) as `fast` (on a GPU, direct plans only)."""
        compiled, grid, args = launched
        launch = Launch(compiled, grid)
        if self.stream_bound:
            stream = launch.stream()
            if stream is None or launch.device != device.index or _capturing():
                return
            self.stream = stream
        self.fast = (launch, args[2:])
        self.lean = launch.lean(args, (0, 1))
        self.to_native = self.lean is not None and isinstance(self.lean[1], bytes) and device.type == "cuda"

    def go_native(self, x: torch.Tensor, dim: int) -> None:
        """Give this plan to the native replay once its module is built (the first call starts the
        build in the background; until then repeat calls replay from Python and try again). Where
        the module cannot be built, the plan stops trying and replays from Python."""
        global _native_replay
        mod = native_ready()
        if mod is None:
            return
        if mod:
            mod.register(x, dim, self.lean[1], self.fast[0].device, self.stream or 0, self.stream_bound, self)
            _native_replay = mod.replay
        self.to_native = False

    def fast_stream(self) -> int | None:
        """The current stream's handle when `fast` may launch on it now, else None."""
        stream = self.fast[0].stream()
        if self.stream_bound and (stream is None or stream != self.stream or _capturing()):
            return None
        return stream


_native_replay = None      # the native module's replay() once it holds a plan of this process


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.softmax(x, dim) for fp32/fp16/bf16 CUDA tensors of any shape and strides.

    Math is in fp32 and the result has x's dtype and shape. Rows that are entirely -inf give NaN,
    as torch.softmax does. When `dim` is not the innermost dimension, the input is made
    contiguous along it and the result is returned as a view laid out with `dim` innermost.

    Plan cache: the first call with a given shape, strides, dtype, device, dim and data pointer
    offset (mod 16 bytes) validates x, chooses the strategy and launch parameters and keeps them
    (kernels._plans: at most PLAN_CACHE_SIZE plans, the oldest dropped first). A repeat call does
    one dict lookup, allocates the output and, on a GPU, launches the compiled kernel directly
    (on a tensor viewed as (rows, cols) without a copy: rows, row, looped, and split's fused
    cooperative launch, which reuses the plan's workspace and so launches directly
    only on the stream of the plan's first launch and outside CUDA graph captures); other repeat
    calls skip the checks and launch through Triton as the first did (split: on the current
    stream's kept workspace, and two launches where the fused one is refused). The direct launch
    goes straight into Triton's C launcher, with the device and stream from torch's C getters and
    out and x passed as addresses (kernels._plans).

    Native replay: once the first call of a plan with a lean blob has launched, the plan is also
    handed to kernels._native_replay (built in the background on a process's first such call, and
    cached per machine), and later calls with its key go through it before any Python of this
    function runs: x's layout read from the tensor in C++, the plan looked up, the output allocated
    and the blob launched. Calls it does not take (another key, grad, a launch hook, another device
    or stream, a capture of a stream-bound plan) come here as before.

    Autograd: when x requires grad and grad mode is on, the call goes through `_Softmax`, whose
    forward is this same Triton kernel and whose backward, dx = y * (dy - sum(dy * y, dim)), is
    torch ops in fp32 (cast back to x's dtype; no double backward). Other calls skip it.

    Host time of a repeat call on each path: docs/kernels/softmax.md, softmax(): plan cache,
    direct launch and native replay.
    """
    if _native_replay is not None:            # a plan's repeat call in C++ (kernels._native_replay)
        out = _native_replay(x, dim)
        if out is not None:
            return out
    try:
        if x.requires_grad and torch.is_grad_enabled():
            return _Softmax.apply(x, dim)
        x_ptr = x.data_ptr()
        key = (x.shape, x.stride(), x.dtype, x.device, dim, type(dim), x_ptr % ALIGN)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError, RuntimeError):   # not a tensor, unhashable dim, no storage
        key, plan = None, None
    if plan is not None and plan.fast is not None:
        stream = plan.fast_stream()
        if stream is not None:
            launch, rest = plan.fast
            out = new_output(x, plan.like)
            out_ptr = out.data_ptr()
            if out_ptr % ALIGN == 0:
                lean = plan.lean
                if lean is not None and not hooked():
                    lean[0](lean[1], stream, out_ptr, x_ptr)
                    if plan.to_native:
                        plan.go_native(x, dim)
                else:
                    launch(stream, out_ptr, x_ptr, *rest)    # addresses: no pointer lookup at launch
                return out
    if plan is None:
        plan = _plan(x, dim)
        if key is not None and plan.launch is not None:
            remember(_PLANS, key, plan)
    if plan.launch is None:                   # 0-d and empty tensors
        return plan.cfg(x)
    rows, cols, moved_dim = plan.rows, plan.cols, plan.moved_dim
    xt = x.movedim(moved_dim, -1) if moved_dim is not None else x          # (..., cols)
    direct = moved_dim is None
    try:
        x2d = xt.view(rows, cols)                                         # (rows, cols), no copy
    except RuntimeError:
        x2d, direct = xt.reshape(rows, cols), False
    if cols > 1 and x2d.stride(1) != 1:
        x2d, direct = x2d.contiguous(), False
    out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    with on_device(x):           # Triton launches on the current device; a kept launch records it
        launched = plan.launch(x2d, out, plan.cfg)
        if (launched is not None and direct and plan.fast is None and key is not None
                and not interpreting() and aligned(out)):
            plan.keep(launched, x.device)
            if plan.to_native:
                plan.go_native(x, dim)
    out = out.view(xt.shape)
    return out.movedim(-1, moved_dim) if moved_dim is not None else out


class _Softmax(torch.autograd.Function):
    """softmax with a backward: the forward is the Triton kernel, the backward torch ops in fp32."""

    @staticmethod
    def forward(ctx, x, dim):
        y = softmax(x, dim)                    # grad mode is off inside forward: the plain path
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        if y.dim() == 0:                       # softmax of a scalar is 1: no gradient
            return torch.zeros_like(dy), None
        y32, dy32 = y.float(), dy.float()
        dx = y32 * (dy32 - (dy32 * y32).sum(dim=ctx.dim, keepdim=True))
        return dx.to(y.dtype), None


def _plan(x, dim) -> _Plan:
    """Validate a call and choose its strategy (launcher, parameters, moved dim or None, rows, cols).

    For 0-d and empty tensors `launch` is None and `cfg` computes the result directly.
    """
    check_tensor("x", x, DTYPES)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ValueError(f"dim must be an int, got {type(dim).__name__}")
    ndim = max(x.dim(), 1)
    if not -ndim <= dim < ndim:
        raise ValueError(f"dim {dim} is out of range for a tensor of {x.dim()} dimensions")
    if x.dim() == 0:
        return _Plan(None, lambda t: softmax(t.reshape(1), 0).reshape(()), None, 0, 0)
    dim %= ndim
    if x.numel() == 0:
        return _Plan(None, torch.empty_like, None, 0, 0)
    cols = x.shape[dim]
    rows = x.numel() // cols
    name = choose(rows, cols, x.dtype, num_sms(x.device))
    cfg = config(name, cols, x.dtype, rows, num_sms(x.device))
    strategy = STRATEGIES[name]
    return _Plan(strategy.launch, cfg, (dim if dim != x.dim() - 1 else None), rows, cols,
                 strategy.stream_bound, like=x.is_contiguous())
