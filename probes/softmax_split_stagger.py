"""Split softmax whose rounds overlap ("stagger"): each tile step reads round r + 1's tile from HBM
for its partials and writes round r's tile, against the shipped split and a copy of the same
bytes, at the few-long-row shapes.

The question: the shipped split (kernels.fused_softmax, `_split_kernel` with segments of several
tiles) runs each round as phases that are apart in time: every program reads its segment (HBM
reads only), publishes its partials, waits for the row, then reads the segment again from L2 and
writes it (HBM writes only). It streams at 0.60-0.68 of the copy bandwidth at these shapes, and
neither fewer exponentials (probes/softmax_split_estore.py) nor register-held rows
(probes/softmax_row16.py) lifted it. Does putting both directions of HBM traffic in flight at
once, as a copy has them, lift it?

Design (`_stagger_kernel`, rows on the access boundary only: the shipped kernel's branch without
PEEL). Rows, segments, rounds and the cooperative grid are the shipped split's: program p takes
segment p % n_segs of rows first, first + R, ... (first = p // n_segs, R = programs // n_segs).
Iteration k of a program (k = 0 .. its row count) has a phase-1 row nxt = first + k R and a
phase-2 row cur = nxt - R. It waits for cur's partials (published by every program of that row at
the end of iteration k - 1, so the wait is short) and combines them (fs._wait, fs._combine); then,
tile by tile, it loads nxt's tile (evict_last: read again next iteration) and merges it into the
segment's running (max, sum), and loads cur's tile (from L2, where iteration k - 1 left it,
evict_first) and stores exp(x - row_max) / row_sum. Then it publishes nxt's partials and leaves
cur (fs._publish, fs._depart). Iteration 0 only reads, the last only writes. A tile of cur is
re-read one iteration after it was read, so L2 holds about one round (R n_segs segments) of input
at a time, as in the shipped loop. A row of -inf gives NaN, as torch.softmax does.

On a GPU one persistent cooperative launch (_FUSED). In Triton's CPU interpreter, which runs
programs one after another and cannot wait, a _PARTIALS launch (phase 1 only) publishes every
partial first, then a _FINISH launch runs the whole interleaved loop without waiting: the same
tile loop and indexing, the partials already there.

Variants per shape (fp16, bf16, fp32): `ours` (fs.softmax as shipped), `split` (the split
strategy forced, its launch table), `stagger` (the launch table's tile and warps, 4-tile segments
unless the problem fits one round of 2-tile segments, as the shipped split sizes them), `stagger
t=2` (2-tile segments: half the L2 footprint), `stagger 8K` (half-size tiles, 8 KB of input, in
8-tile segments: the same 64 KB segments with fewer registers), `stagger 8K t=4` and `copy`
(out.copy_(x), timed, not checked). Every variant but copy is checked against float64 first on a
hostile input (softmax_small.case: -inf entries, a row of -inf, one huge entry) with `out` filled
with NaN before the call (tolerance 2e-3 fp16, 1e-2 bf16, 1e-5 fp32; NaN exactly where the
reference has it); a mismatch or a refusal is a row, not a time. Kernel time: CUPTI device time
between L2 flushes (softmax_small.record), every variant of a shape in one profiler session, in
shuffled rounds; no new shape is started after PROBE_BUDGET_S seconds. Writes
$OUT/softmax_split_stagger.csv and prints the notes, then per shape each variant's us and copy us /
its us, fastest first.

    PYTHONUNBUFFERED=1 python3 probes/softmax_split_stagger.py

PROBE_DRYRUN=1: no GPU; stagger_split in Triton's CPU interpreter on small shapes against
torch.softmax in float64, the output filled with NaN first; exits 1 on a miss.

    PROBE_DRYRUN=1 python3 probes/softmax_split_stagger.py

`resources`: no GPU; the kernel compiled for sm_90 at the variants' tiles and warps beside the
shipped `_split_kernel`: registers a thread, spills, programs an SM by registers.

    python3 probes/softmax_split_stagger.py resources

Registers (`resources`, sm_90, no spills): stagger 121 a thread in fp16, 117 in bf16, 72 in fp32 at
the launch table's 16 KB tiles (2, 2 and 3 programs an SM), 64 / 64 / 40 at 8 KB tiles (4, 4, and 6
an SM, 4 used); the shipped split 63 / 63 / 48.

Measured and not kept (H200 GPU-0dfa66bb, at afcbfb3; CUPTI kernel time, L2 flushed; copy time /
variant time, us in brackets): slower than the shipped split at every shape and tiling.

| shape | split | stagger 8K t=4 | stagger 8K | stagger | stagger t=2 |
|---|---|---|---|---|---|
| 16x4194304 fp16 | 0.60 (99.98) | 0.46 | 0.46 | 0.41 | 0.35 |
| 64x1048576 fp16 | 0.61 (97.68) | 0.50 | 0.46 | 0.42 | 0.38 |
| 256x262144 fp16 | 0.63 (96.08) | 0.51 | 0.47 | 0.43 | 0.40 |
| 512x151936 fp16 | 0.62 (113.04) | 0.50 | 0.46 | 0.42 | 0.38 |
| 1024x131072 fp16 | 0.65 (189.26) | 0.55 | 0.51 | 0.46 | 0.42 |
| 16x4194304 bf16 | 0.59 (101.25) | 0.46 | 0.46 | 0.42 | 0.35 |
| 64x1048576 bf16 | 0.62 (97.86) | 0.51 | 0.47 | 0.43 | 0.40 |
| 256x262144 bf16 | 0.61 (98.00) | 0.51 | 0.47 | 0.44 | 0.40 |
| 512x151936 bf16 | 0.58 (120.13) | 0.49 | 0.47 | 0.43 | 0.39 |
| 1024x131072 bf16 | 0.65 (188.29) | 0.54 | 0.52 | 0.47 | 0.43 |
| 16x4194304 fp32 | 0.63 (198.00) | 0.48 | 0.51 | 0.46 | 0.37 |
| 64x1048576 fp32 | 0.66 (186.73) | 0.60 | 0.55 | 0.56 | 0.53 |
| 256x262144 fp32 | 0.65 (188.30) | 0.63 | 0.55 | 0.57 | 0.56 |
| 512x151936 fp32 | 0.66 (216.78) | 0.64 | 0.54 | 0.56 | 0.57 |
| 1024x131072 fp32 | 0.69 (365.07) | 0.66 | 0.58 | 0.61 | 0.59 |

Putting a round's reads and the previous round's writes in flight together did not lift the split:
the rounds' phases being apart in time is not what holds it near 0.6 of the copy, and the second
tile in flight costs registers and programs an SM.
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
from softmax_split_estore import TOL, kernel_args, split_in_rounds  # noqa: E402  (probes/: the shared pieces)

from kernels import fused_softmax as fs  # noqa: E402

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "150"))
SHAPES = [(r, c, dt) for dt in (torch.float16, torch.bfloat16, torch.float32)
          for r, c in ((16, 4194304), (64, 1048576), (256, 262144), (512, 151936), (1024, 131072))]

_PARTIALS, _FINISH, _FUSED = fs._PARTIALS, fs._FINISH, fs._FUSED


@triton.jit(do_not_specialize=["x_row_stride", "out_row_stride", "n_rows", "n_cols", "n_segs", "seg_tiles"])
def _stagger_kernel(out_ptr, x_ptr, part_max_ptr, part_sum_ptr, arrive_ptr, depart_ptr,
                    x_row_stride, out_row_stride,
                    n_rows, n_cols, n_segs, seg_tiles,
                    BLOCK: tl.constexpr, VEC: tl.constexpr, PARTIALS_BLOCK: tl.constexpr,
                    MODE: tl.constexpr):
    """Each row cut into n_segs segments of seg_tiles tiles of BLOCK columns, one program a segment;
    a tile step reads round r + 1 and writes round r (module docstring).

    part_max, part_sum: (n_rows, n_segs) fp32; arrive, depart: (n_rows,) int32, zero on entry and
    left zero on exit (_FUSED). _PARTIALS: phase 1 only; _FINISH: both phases, no waiting (the
    partials are already published); _FUSED: both, waiting on each row's partials.
    """
    pid = tl.program_id(0)
    seg = pid % n_segs
    first = pid // n_segs
    per_round = tl.num_programs(0) // n_segs
    start = seg * seg_tiles * BLOCK
    cols = tl.arange(0, BLOCK)
    n_mine = tl.cdiv(n_rows - first, per_round)               # rows this program takes
    steps = n_mine + 1 if MODE != _PARTIALS else n_mine
    for k in range(0, steps):
        nxt = first + k * per_round                           # phase 1: partials of this row
        cur = nxt - per_round                                 # phase 2: writes of this row
        has_nxt = nxt < n_rows
        has_cur = k > 0
        if MODE == _PARTIALS:
            has_cur = k < 0                                   # never: phase 1 only
        x_nxt = x_ptr + tl.multiple_of(tl.cast(nxt, tl.int64) * x_row_stride, VEC)
        x_cur = x_ptr + tl.multiple_of(tl.cast(cur, tl.int64) * x_row_stride, VEC)
        o_cur = out_ptr + tl.multiple_of(tl.cast(cur, tl.int64) * out_row_stride, VEC)
        row_max = tl.full([], 0.0, tl.float32)
        inv = tl.full([], 0.0, tl.float32)
        if has_cur:
            if MODE == _FUSED:
                fs._wait(arrive_ptr, cur, n_segs)
            row_max, row_sum = fs._combine(part_max_ptr, part_sum_ptr, tl.cast(cur, tl.int64) * n_segs,
                                           n_segs, PARTIALS_BLOCK)
            inv = 1.0 / row_sum
        m = tl.full([], -float("inf"), tl.float32)            # nxt's running max
        s = tl.full([], 0.0, tl.float32)                      # and sum of exp(x - m)
        for t in range(0, seg_tiles):
            offs = start + t * BLOCK + cols
            inside = tl.max_constancy(offs < n_cols, VEC)
            xn = tl.load(x_nxt + offs, mask=inside & has_nxt, other=-float("inf"),
                         eviction_policy="evict_last").to(tl.float32)
            xc = tl.load(x_cur + offs, mask=inside & has_cur, other=-float("inf"),
                         eviction_policy="evict_first").to(tl.float32)
            m_new = tl.maximum(m, tl.max(xn, axis=0))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)   # no -inf - -inf while all -inf
            s = s * tl.exp(m - m_safe) + tl.sum(tl.exp(xn - m_safe), axis=0)
            m = m_new
            y = tl.exp(xc - row_max) * inv                    # row_max == -inf (all -inf row): NaN
            tl.store(o_cur + offs, y.to(out_ptr.dtype.element_ty), mask=inside & has_cur,
                     eviction_policy="evict_first")
        if has_nxt:
            if MODE == _FUSED:
                fs._publish(part_max_ptr, part_sum_ptr, arrive_ptr, tl.cast(nxt, tl.int64) * n_segs + seg,
                            nxt, m, s, _FUSED)
            else:
                fs._publish(part_max_ptr, part_sum_ptr, arrive_ptr, tl.cast(nxt, tl.int64) * n_segs + seg,
                            nxt, m, s, _PARTIALS)
        if MODE == _FUSED:
            if has_cur:
                fs._depart(arrive_ptr, depart_ptr, cur, n_segs)


def stagger_split(x: torch.Tensor, out: torch.Tensor, seg_tiles: int | None = None,
                  cfg: fs.Config | None = None, rows_per_round: int | None = None) -> torch.Tensor:
    """Softmax of each row of x (rows, cols) into out by the staggered split; returns out.

    Sized and launched as the e-store probe's split_in_rounds sizes it (no buffers of its own): on
    a GPU one cooperative launch; in the interpreter, which cannot wait, a _PARTIALS launch
    publishes every partial first, then a _FINISH launch runs the interleaved loop without waiting.
    seg_tiles: tiles a segment (None: the shipped split's choice for segments of several tiles);
    cfg: tile and warps (None: fs.config("split")); rows_per_round: at most this many rows a round
    (the dry run's rounds in the interpreter). Refuses rows the split kernel would peel.
    """
    return split_in_rounds("stagger_split", _stagger_kernel, lambda rows, n_segs, seg_tiles, device: (),
                           x, out, seg_tiles, cfg, rows_per_round)


# ---- PROBE_DRYRUN=1: the interpreter on small shapes ----

def dry_run() -> None:
    from softmax_split_estore import check_split_variant, dry_run_cases   # the estore probe's cases (probes/)
    small = lambda w: fs.Config(block=16, num_warps=w)   # noqa: E731  16-column tiles
    extra = [(rows, cols, dt, 3, small(2), per_round) for dt in (torch.float16, torch.bfloat16, torch.float32)
             for rows, cols, per_round in ((7, 168, 2),    # 11 tiles: 4 segments, rounds of 2 rows, 4 rounds
                                           (5, 168, 1))]   # one row a round: 5 rounds and a last write
    check_split_variant("stagger_split", stagger_split, dry_run_cases() + extra)


# ---- resources: compiled for sm_90, no GPU ----

RESOURCE_SHAPE = (16, 4194304)


def _tiles(dt: torch.dtype) -> list[tuple[str, fs.Config]]:
    """(label, tile and warps) of the variants: the launch table's, and half-size tiles."""
    cfg = fs.config("split", RESOURCE_SHAPE[1], dt, RESOURCE_SHAPE[0])
    return [("", cfg), (" 8K", fs.Config(block=cfg.block // 2, num_warps=cfg.num_warps))]


def resources() -> None:
    rows, cols = RESOURCE_SHAPE
    print("kernel dtype | BLOCK warps | registers | stack B | LDL / STL | programs an SM by registers")
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        vec = fs.VECTOR_BYTES // dt.itemsize
        x = torch.empty(1, dtype=dt)
        f32 = torch.empty(1, dtype=torch.float32)
        i32 = torch.empty(1, dtype=torch.int32)
        for label, cfg in _tiles(dt):
            options = dict(num_warps=cfg.num_warps, launch_cooperative_grid=True)
            stagger = kernel_args(x.expand(rows, cols), x.expand(rows, cols), (f32, f32), (), i32, i32, 1, 1,
                                  cfg.block, vec, _FUSED)
            shipped = (x, x, f32, f32, i32, i32, cols, cols, rows, cols, 1, 1, cfg.block, vec,
                       fs.PARTIALS_BLOCK, _FUSED.value, False, cfg.prefetch, False)
            for name, fn, args in ((f"stagger{label}", _stagger_kernel, stagger),
                                   (f"split{label}", fs._split_kernel, shipped)):
                r = sm90.usage(sm90.compile_for_sm90(fn, args, options))
                print(f"{name} {str(dt)[6:]} | {cfg.block} {cfg.num_warps} | {r['regs']} | {r['stack']} | "
                      f"{r['ldl']} / {r['stl']} | {sm90.programs_per_sm(r['regs'], cfg.num_warps)}", flush=True)


# ---- the GPU probe ----

def variants(x: torch.Tensor, out: torch.Tensor, sms: int) -> dict:
    rows, cols = x.shape
    cfg = fs.config("split", cols, x.dtype, rows, sms)
    half = fs.Config(block=cfg.block // 2, num_warps=cfg.num_warps)
    return {"ours": lambda: fs.softmax(x, -1),
            "split": lambda: fs.STRATEGIES["split"].run(x, out, cfg),
            "stagger": lambda: stagger_split(x, out),
            "stagger t=2": lambda: stagger_split(x, out, seg_tiles=2),
            "stagger 8K": lambda: stagger_split(x, out, seg_tiles=8, cfg=half),
            "stagger 8K t=4": lambda: stagger_split(x, out, seg_tiles=4, cfg=half)}


def main() -> None:
    from softmax_small import long_row_probe   # the shared probe loop (probes/, beside this script)
    long_row_probe(SHAPES, variants, "softmax_split_stagger.csv", BUDGET_S, TOL)


if __name__ == "__main__":
    if DRY:
        dry_run()
    elif sys.argv[1:] == ["resources"]:
        resources()
    else:
        main()
