"""Split softmax that stores each tile's exponentials in phase 1 ("e-store"), against the shipped
split, torch.softmax and a copy of the same bytes, at the few-long-row shapes.

The question: the shipped split (kernels.fused_softmax, `_split_kernel` with segments of several
tiles) computes exp(x - max) twice an element, once for the segment's (max, sum of exp) and once
to write, with two conversions an element in phase 2, and streams at 0.60-0.70 of the copy
bandwidth at these shapes (0.66-0.72 with the wait removed). Does moving the exponential out of
phase 2 lift it, at the cost of one more store an element that L2 should absorb?

Design (`_estore_split_kernel`, the shipped kernel's aligned branch with its modes and rounds).
Phase 1, per tile t of a segment: load x, m_t = max(x) in fp32, e = exp(x - m_t), store e into
`out` (out's dtype) where the tile's result goes, m_t into a (rows, n_segs * seg_tiles) fp32
scratch, and merge (m_t, sum(e)) into the segment's running (max, sum); publish the segment's
partials and wait for the row as `_split_kernel` does (fs._publish, fs._wait). Phase 2: combine
the row's partials (fs._combine), then per tile, last first: read e back from `out` (from L2, where
the shipped kernel reads x a second time), y = e * (exp(m_t - row_max) / row_sum), store y. Phase 2
has no per-element exponential and reads no x. A tile that is all -inf has m_t = -inf, e = 0 and
a scale of 0; a row that is all -inf gives NaN throughout, as torch.softmax does. Only rows that
the split kernel does not peel run here (fs._access gives PEEL False: row length and row strides
multiples of the access width, in practice 16 bytes at these shapes); others are refused with a
ValueError. `estore_split` sizes segments, grid and rounds as fs._launch_split does for segments
of several tiles (fs.config("split"), the driver's resident programs up to SPLIT_MAX_PER_SM an
SM, SPLIT_SEG_TILES tiles a segment unless the problem fits one round of two-tile segments): on a
GPU one persistent cooperative launch (_FUSED), in Triton's CPU interpreter, or where the driver
refuses the cooperative grid, two launches (_PARTIALS, then _FINISH).

Variants per shape (fp16, bf16, fp32): `ours` (fs.softmax as shipped), `split` (the split
strategy forced, its launch table), `estore` (its default segments), `estore t=2` and `estore
t=8` (2- and 8-tile segments), in fp16 and bf16 `estore r64` (default segments, registers capped
at 64 a thread: uncapped the kernel takes 74 / 80 there, 3 programs an SM, against the shipped
kernel's 63 and 4; see `resources`), `torch`, and `copy` (out.copy_(x), timed, not checked). Every
variant but copy is checked against float64 first on a hostile input (softmax_small.case:
-inf entries, a row of -inf, one huge entry) with `out` filled with NaN before the call
(tolerance 2e-3 fp16, 1e-2 bf16, 1e-5 fp32; NaN exactly where the reference has it); a mismatch
or a refusal is a row, not a time. Kernel time: CUPTI device time between L2 flushes
(softmax_small.record), every variant of a shape in one profiler session, in shuffled rounds;
no new shape is started after PROBE_BUDGET_S seconds. Writes $OUT/softmax_split_estore.csv and
prints the notes (mismatches, refusals, budget skips), then per shape each variant's us and copy
us / its us, fastest first.

    PYTHONUNBUFFERED=1 python3 probes/softmax_split_estore.py

PROBE_DRYRUN=1: no GPU; estore_split in Triton's CPU interpreter on small shapes (odd segment
counts, a partial last tile and segment, -inf entries, an all -inf tile, a row of -inf, a 3e4
entry, fp16 / bf16 / fp32, 1-, 2- and 3-tile segments of 16-column tiles, rounds of fewer rows than
the problem has, the launch table's tiles, a refused peeled shape) against torch.softmax in
float64, the output filled with NaN first; prints each case's max error and exits 1 on a miss.

    PROBE_DRYRUN=1 python3 probes/softmax_split_estore.py

`resources`: no GPU; the fused kernel compiled for sm_90 by Triton and the wheel's ptxas at the
launch table's tile and warps (fp16, bf16, fp32), beside the shipped `_split_kernel` (fused,
segments of several tiles) for comparison, uncapped and at 64 registers: registers a thread,
stack, shared memory, spill loads / stores and MUFU.EX2 in the SASS (cuobjdump -res-usage and
-sass), ld.global.nc in the PTX, programs an SM by registers.

    python3 probes/softmax_split_estore.py resources

Measured and not kept (H200 GPU-79b30d5e, the host of the a188f76 run, right after it; CUPTI
kernel time, L2 flushed; copy time / variant time): slower than the shipped split at every shape.
16-bit, split / estore / estore r64: 16x4194304 fp16 0.60 / 0.47 / 0.53 (100.2 / 129.6 / 113.4 us),
64x1048576 0.62 / 0.50 / 0.56, 256x262144 0.64 / 0.52 / 0.58, 512x151936 0.63 / 0.54 / 0.59,
1024x131072 0.66 / 0.59 / 0.62, bf16 within 0.02 of these but 512x151936 (0.58 / 0.53 / 0.59,
120.8 / 133.2 / 120.2 us, a tie capped); fp32 split / estore: 0.62-0.69 / 0.51-0.64. Segments of 2
or 8 tiles were slower still (0.33-0.61). Phase 2's exponentials were not what held split near
0.6: removing them (MUFU.EX2 in the SASS 66 -> 36 in fp16) and paying one store an element more
lost 5-25%, so the limit is in the traffic (a round's reads, re-reads and writes through L2), not
in the arithmetic of its warps.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DRY = os.environ.get("PROBE_DRYRUN") == "1"   # CPU check of the kernel: interpreter, small shapes
if DRY:
    from rooflab import interpreter
    interpreter.enable()

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import sm90  # noqa: E402  (probes/, the script's directory)

from kernels import fused_softmax as fs  # noqa: E402
from kernels._checks import interpreting  # noqa: E402
from kernels._device import cdiv  # noqa: E402

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "150"))
SHAPES = [(r, c, dt) for dt in (torch.float16, torch.bfloat16, torch.float32)
          for r, c in ((16, 4194304), (64, 1048576), (256, 262144), (512, 151936), (1024, 131072),
                       (4096, 32768))]
EXTRA_SEG_TILES = (2, 8)     # `estore t=N` variants beside the default segments
CAP_REGS = 64                # `estore r64` (fp16, bf16): registers capped, 4 programs an SM (`resources`)
TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5}

_PARTIALS, _FINISH, _FUSED = fs._PARTIALS, fs._FINISH, fs._FUSED


@triton.jit(do_not_specialize=["x_row_stride", "out_row_stride", "n_rows", "n_cols", "n_segs", "seg_tiles"])
def _estore_split_kernel(out_ptr, x_ptr, part_max_ptr, part_sum_ptr, tile_max_ptr, arrive_ptr, depart_ptr,
                         x_row_stride, out_row_stride,
                         n_rows, n_cols, n_segs, seg_tiles,
                         BLOCK: tl.constexpr, VEC: tl.constexpr, PARTIALS_BLOCK: tl.constexpr,
                         MODE: tl.constexpr):
    """Each row cut into n_segs segments of seg_tiles tiles of BLOCK columns, one program a segment
    (rows on the VEC boundary only: fs._split_kernel's branch without PEEL).

    part_max, part_sum: (n_rows, n_segs) fp32; tile_max: (n_rows, n_segs * seg_tiles) fp32;
    arrive, depart: (n_rows,) int32, zero on entry and left zero on exit (_FUSED). Program p
    handles segment p % n_segs of rows p // n_segs, p // n_segs + R, ... with R = num_programs //
    n_segs. Phase 1 stores exp(x - m_t) of each tile in out and m_t in tile_max; phase 2 scales
    what it stored by exp(m_t - row_max) / row_sum.
    """
    pid = tl.program_id(0)
    seg = pid % n_segs
    first = pid // n_segs
    rows_per_round = tl.num_programs(0) // n_segs
    start = seg * seg_tiles * BLOCK
    cols = tl.arange(0, BLOCK)
    for row in range(first, n_rows, rows_per_round):
        x_row = x_ptr + tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
        o_row = out_ptr + tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC)
        part = tl.cast(row, tl.int64) * n_segs
        t_max = tile_max_ptr + (part + seg) * seg_tiles               # this segment's tile maxima
        if MODE != _FINISH:                                           # phase 1: e, m_t, partials
            m = tl.full([], -float("inf"), tl.float32)
            s = tl.full([], 0.0, tl.float32)
            for t in range(0, seg_tiles):
                offs = start + t * BLOCK + cols
                mask = tl.max_constancy(offs < n_cols, VEC)
                x = tl.load(x_row + offs, mask=mask, other=-float("inf"),
                            eviction_policy="evict_first").to(tl.float32)
                m_t = tl.max(x, axis=0)
                e = tl.exp(x - tl.where(m_t == -float("inf"), 0.0, m_t))   # all -inf: e = 0
                tl.store(o_row + offs, e.to(out_ptr.dtype.element_ty), mask=mask,
                         eviction_policy="evict_last")                # read back in phase 2
                tl.store(t_max + t, m_t)
                m, s = fs._merge_stats(m, s, m_t, tl.sum(e, axis=0))
            fs._publish(part_max_ptr, part_sum_ptr, arrive_ptr, part + seg, row, m, s, MODE)
            if MODE == _FUSED:
                fs._wait(arrive_ptr, row, n_segs)
        if MODE != _PARTIALS:                                         # phase 2: scale what phase 1 stored
            row_max, row_sum = fs._combine(part_max_ptr, part_sum_ptr, part, n_segs, PARTIALS_BLOCK)
            inv = 1.0 / row_sum
            for t in range(0, seg_tiles):
                k = seg_tiles - 1 - t                                 # last tile first (likeliest in L2)
                offs = start + k * BLOCK + cols
                mask = tl.max_constancy(offs < n_cols, VEC)
                e = tl.load(o_row + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
                scale = tl.exp(tl.load(t_max + k) - row_max) * inv   # all -inf row: NaN, as torch
                tl.store(o_row + offs, (e * scale).to(out_ptr.dtype.element_ty), mask=mask,
                         eviction_policy="evict_first")
            if MODE == _FUSED:
                fs._depart(arrive_ptr, depart_ptr, row, n_segs)


def kernel_args(x, out, parts, extra, arrive, depart, n_segs, seg_tiles, block, vec, mode):
    """A split variant's arguments in signature order, constexprs included: fs._split_kernel's
    leading ones, with the variant's own buffers (`extra`) after the partials."""
    rows, cols = x.shape
    return (out, x, parts[0], parts[1], *extra, arrive, depart, x.stride(0), out.stride(0),
            rows, cols, n_segs, seg_tiles, block, vec, fs.PARTIALS_BLOCK, mode.value)


def split_in_rounds(name: str, kernel, extra, x: torch.Tensor, out: torch.Tensor, seg_tiles: int | None = None,
                    cfg: fs.Config | None = None, rows_per_round: int | None = None,
                    options: dict | None = None) -> torch.Tensor:
    """Softmax of each row of x (rows, cols) into out by a split variant of these probes; returns out.

    kernel: the variant (kernel_args' signature, modes _PARTIALS / _FINISH / _FUSED); extra(rows,
    n_segs, seg_tiles, device): its own buffers, after the partials. Sized as fs._launch_split sizes
    segments of several tiles: the launch table's tile and warps (cfg None: fs.config("split")),
    the driver's resident programs up to SPLIT_MAX_PER_SM an SM, SPLIT_SEG_TILES tiles a segment
    unless the problem fits one round of two-tile segments (seg_tiles: fixed), rounds of at most
    rows_per_round rows. On a GPU one persistent cooperative launch (_FUSED); in Triton's CPU
    interpreter, or where the driver refuses every cooperative grid, two launches (_PARTIALS, then
    _FINISH). options: compile options (maxnreg). Refuses rows the split kernel would peel, naming
    itself `name`.
    """
    rows, cols = x.shape
    if x.dtype not in fs.DTYPES or out.shape != x.shape or out.dtype != x.dtype or out.device != x.device \
            or (cols > 1 and (x.stride(1) != 1 or out.stride(1) != 1)):
        raise ValueError("x and out must be (rows, cols) fp32/fp16/bf16 tensors of one shape, dtype and "
                         "device with a contiguous last dimension")
    vec, peel = fs._access(x, out)
    if peel:
        raise ValueError(f"{name} handles rows on the {vec * x.element_size()}-byte boundary only "
                         f"(row length and strides multiples of {vec} elements); {tuple(x.shape)} with "
                         f"strides {x.stride(0)}, {out.stride(0)} would peel")
    if rows == 0 or cols == 0:
        return out
    cfg = cfg or fs.config("split", cols, x.dtype, rows, fs.num_sms(x.device))
    tiles = cdiv(cols, cfg.block)
    fixed = seg_tiles or cfg.seg_tiles
    options = options or {}
    if not interpreting():
        arrive, depart = fs._counters(x.device, rows)
        dummy = torch.empty(1, dtype=torch.float32, device=x.device)
        wide = max(rows, cols, abs(x.stride(0)), out.stride(0)) >= 2**31   # i64 size arguments
        key = (name, x.device, x.dtype, cfg.block, cfg.num_warps, tuple(sorted(options.items())), vec, wide,
               x.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0)
        resident = fs._resident_per_sm(key, x.device, lambda: kernel.warmup(
            *kernel_args(x, out, (dummy, dummy), extra(1, 1, 1, x.device), arrive, depart, 1, 1, cfg.block, vec,
                         _FUSED),
            num_warps=cfg.num_warps, launch_cooperative_grid=True, grid=(1,), **options))
        capacity = min(resident, cfg.per_sm or fs.SPLIT_MAX_PER_SM) * fs.num_sms(x.device)
        multi = [t for t in fs.SPLIT_ONE_ROUND_TILES if t > 1]
        for st in (fixed,) if fixed else (*multi, fs.SPLIT_SEG_TILES):
            n_segs = cdiv(tiles, st)
            if n_segs > capacity or (not fixed and st in multi and rows * n_segs > capacity):
                continue
            parts = torch.empty((2, rows, n_segs), dtype=torch.float32, device=x.device)
            per_round = min(capacity // n_segs, rows, rows_per_round or rows)
            try:
                kernel[(per_round * n_segs,)](
                    *kernel_args(x, out, parts, extra(rows, n_segs, st, x.device), arrive, depart, n_segs, st,
                                 cfg.block, vec, _FUSED),
                    num_warps=cfg.num_warps, launch_cooperative_grid=True, **options)
                return out
            except RuntimeError as exc:   # the driver refused the cooperative grid
                if "cooperative" not in str(exc):
                    raise
    # Two launches (the interpreter runs programs one after another): phase 1, then phase 2.
    st = fixed or fs.SPLIT_SEG_TILES
    n_segs = cdiv(tiles, st)
    parts = torch.empty((2, rows, n_segs), dtype=torch.float32, device=x.device)
    buffers = extra(rows, n_segs, st, x.device)
    unused = torch.empty(1, dtype=torch.int32, device=x.device)
    grid = (min(rows, rows_per_round or rows) * n_segs,)
    for mode in (_PARTIALS, _FINISH):
        kernel[grid](*kernel_args(x, out, parts, buffers, unused, unused, n_segs, st, cfg.block, vec, mode),
                     num_warps=cfg.num_warps, **options)
    return out


def _tile_max(rows: int, n_segs: int, seg_tiles: int, device) -> tuple:
    """The e-store kernel's own buffer: each tile's max, (rows, n_segs * seg_tiles) fp32."""
    return (torch.empty((rows, n_segs * seg_tiles), dtype=torch.float32, device=device),)


def estore_split(x: torch.Tensor, out: torch.Tensor, seg_tiles: int | None = None,
                 cfg: fs.Config | None = None, rows_per_round: int | None = None,
                 maxnreg: int | None = None) -> torch.Tensor:
    """Softmax of each row of x (rows, cols) into out by the e-store split (split_in_rounds); returns out.

    seg_tiles: tiles a segment (None: fs._launch_split's choice for segments of several tiles);
    cfg: tile and warps (None: fs.config("split")); rows_per_round: at most this many rows a
    round (the dry run's rounds in the interpreter); maxnreg: a register cap (compile option) on
    the GPU. Refuses rows the split kernel would peel.
    """
    return split_in_rounds("estore_split", _estore_split_kernel, _tile_max, x, out, seg_tiles, cfg, rows_per_round,
                           dict(maxnreg=maxnreg) if maxnreg else None)


# ---- PROBE_DRYRUN=1: the interpreter on small shapes ----

def _dry_input(rows: int, cols: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """randn * 4 with row 0's every 7th entry -inf, columns 16-47 of row 2 -inf (whole 16-column
    tiles), row 3 falling 0.5 a column (tile maxima far apart), a huge entry in row 1 (3e4, fp32
    1e30) and the last row all -inf."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g) * 4
    x[0, ::7] = float("-inf")
    x[1, min(5, cols - 1)] = 3e4 if dtype != torch.float32 else 1e30
    if rows > 3:
        x[2, 16:48] = float("-inf")
        x[3] = x[3] * 0.1 - 0.5 * torch.arange(cols, dtype=torch.float32)
    x[-1] = float("-inf")
    return x.to(dtype)


def dry_run_cases() -> list:
    """(rows, cols, dtype, seg_tiles, cfg, rows_per_round) of the dry run, every dtype."""
    small = lambda w: fs.Config(block=16, num_warps=w)   # noqa: E731  16-column tiles
    cases = []
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        # 328 columns: 21 tiles of 16 (the last half full): 21 one-tile or 11 two-tile segments
        cases += [(6, 328, dt, 1, small(1), None), (6, 328, dt, 2, small(1), None),
                  (6, 328, dt, 2, small(1), 4),            # rounds of 4 rows: rows 0-3, then 4-5
                  (5, 168, dt, 3, small(2), 2),            # 11 tiles: 4 segments, the last of 2 tiles
                  (4, 40000, dt, None, None, None)]        # the launch table's tile, default segments
    return cases


def check_split_variant(name: str, split, cases: list) -> None:
    """Run split(x, out, seg_tiles=, cfg=, rows_per_round=) (a split variant of these probes) on each
    case in the interpreter against torch.softmax in float64, `out` NaN first, then on a shape the
    split kernel would peel (refused with a ValueError); print a line each, exit 1 on a miss."""
    failed = 0
    print(f"dry run (Triton CPU interpreter): {name} against torch.softmax in float64")
    print("shape dtype | BLOCK warps | seg_tiles n_segs | rows a round | max abs err | NaN where ref | tol | ok")
    for rows, cols, dt, st, cfg, per_round in cases:
        x = _dry_input(rows, cols, dt)
        out = torch.full_like(x, float("nan"))
        ref = torch.softmax(x.double(), -1)
        use = cfg or fs.config("split", cols, dt, rows, fs.num_sms(x.device))
        seg_tiles = st or use.seg_tiles or fs.SPLIT_SEG_TILES
        got = split(x, out, seg_tiles=st, cfg=cfg, rows_per_round=per_round)
        err = (got.double() - ref).abs().nan_to_num(nan=0.0).max().item()
        nan_ok = torch.equal(got.isnan(), ref.isnan())
        ok = err <= TOL[dt] and nan_ok
        failed += not ok
        print(f"{rows}x{cols} {str(dt)[6:]} | {use.block} {use.num_warps} | {seg_tiles} "
              f"{cdiv(cdiv(cols, use.block), seg_tiles)} | {per_round or rows} | {err:.3g} | {nan_ok} | "
              f"{TOL[dt]:g} | {'ok' if ok else 'FAIL'}", flush=True)
    x = _dry_input(3, 1025, torch.float16)                    # odd rows: the split kernel peels them
    try:
        split(x, torch.empty_like(x))
        print("3x1025 float16: not refused: FAIL")
        failed += 1
    except ValueError as exc:
        print(f"3x1025 float16: refused (ValueError: {exc})")
    print(f"# {len(cases) + 1 - failed} of {len(cases) + 1} checks passed")
    if failed:
        sys.exit(1)


def dry_run() -> None:
    check_split_variant("estore_split", estore_split, dry_run_cases())


# ---- resources: compiled for sm_90, no GPU ----

RESOURCE_SHAPE = (16, 4194304)   # the launch table's tile and warps at this row length


def resources() -> None:
    rows, cols = RESOURCE_SHAPE
    print("kernel dtype | BLOCK warps | registers | stack B | shared B | LDL / STL | MUFU.EX2 in SASS | "
          "ld.global.nc in PTX | programs an SM by registers")
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        cfg = fs.config("split", cols, dt, rows)
        vec = fs.VECTOR_BYTES // dt.itemsize
        x = torch.empty(1, dtype=dt)
        f32 = torch.empty(1, dtype=torch.float32)
        i32 = torch.empty(1, dtype=torch.int32)
        options = dict(num_warps=cfg.num_warps, launch_cooperative_grid=True)
        estore = kernel_args(x.expand(rows, cols), x.expand(rows, cols), (f32, f32), (f32,), i32, i32, 1, 1,
                             cfg.block, vec, _FUSED)
        shipped = (x, x, f32, f32, i32, i32, cols, cols, rows, cols, 1, 1, cfg.block, vec,
                   fs.PARTIALS_BLOCK, _FUSED.value, False, cfg.prefetch, False)
        for name, fn, args, opts in (("estore", _estore_split_kernel, estore, options),
                                     (f"estore r{CAP_REGS}", _estore_split_kernel, estore,
                                      dict(options, maxnreg=CAP_REGS)),
                                     ("split", fs._split_kernel, shipped, options)):
            r = sm90.usage(sm90.compile_for_sm90(fn, args, opts))
            per_sm = sm90.programs_per_sm(r["regs"], cfg.num_warps)
            print(f"{name} {str(dt)[6:]} | {cfg.block} {cfg.num_warps} | {r['regs']} | {r['stack']} | "
                  f"{r['shared']} | {r['ldl']} / {r['stl']} | {r['mufu_ex2']} | {r['nc']} | {per_sm}", flush=True)


# ---- the GPU probe ----

def variants(x: torch.Tensor, out: torch.Tensor, sms: int) -> dict:
    rows, cols = x.shape
    cfg = fs.config("split", cols, x.dtype, rows, sms)
    fns = {"ours": lambda: fs.softmax(x, -1),
           "split": lambda: fs.STRATEGIES["split"].run(x, out, cfg),
           "estore": lambda: estore_split(x, out),
           "torch": lambda: torch.softmax(x, -1)}
    for st in EXTRA_SEG_TILES:
        fns[f"estore t={st}"] = lambda st=st: estore_split(x, out, seg_tiles=st)
    if x.dtype != torch.float32:   # 74-80 registers a thread uncapped: 3 programs an SM, 4 at 64
        fns[f"estore r{CAP_REGS}"] = lambda: estore_split(x, out, maxnreg=CAP_REGS)
    return fns


def main() -> None:
    from softmax_small import long_row_probe   # the shared probe loop (probes/, beside this script)
    long_row_probe(SHAPES, variants, "softmax_split_estore.csv", BUDGET_S, TOL)


if __name__ == "__main__":
    if DRY:
        dry_run()
    elif sys.argv[1:] == ["resources"]:
        resources()
    else:
        main()
