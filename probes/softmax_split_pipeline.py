"""Split softmax as a pipeline of two populations ("pipe"): reader programs compute the partials of
round r + 1 while writer programs normalise and write round r, against the shipped split and a
copy of the same bytes, at the few-long-row shapes.

The question: the shipped split (kernels.fused_softmax, `_split_kernel`) runs each round as two
phases apart in time, every program reading its segment, publishing its partials, waiting for the
row, then reading the segment again from L2 and writing it. At 16x4194304 and 64x1048576 it
streams at 0.69-0.75 of the copy. Putting both phases in one program's tile loop
(`probes/softmax_split_stagger.py`) cost registers and programs an SM and ran slower. Here each
program does one phase only, with the shipped kernel's own tile loops: do HBM reads and writes kept
in flight together by separate programs, with no program waiting at a row barrier in steady state,
lift the split?

Design (`_pipeline_kernel`, rows on the access boundary only). A cooperative grid of 2 P programs:
P readers and P writers (the first P programs read, or, with INTERLEAVE, the even ones). Within a
population, program j takes segment j % n_segs of rows j // n_segs, + R, ... (R = P // n_segs
rows a round), each segment seg_tiles tiles of BLOCK columns. A reader streams its segment from
HBM (fs._tiles_stats, loads kept in L2) and publishes its (max, sum) word (fs._publish). A writer
waits for its row's words (fs._gather), reads the segment again (fs._tiles_normalize, from L2,
last tile first), writes it, and publishes a `done` word for (row, segment). Before it reads row
r, a reader waits for the done word of the same segment of row r - (LAG + 1) R, so at most LAG + 1
rounds of input sit in L2 (the round is sized to ROUND_MB of input or one row). Both buffers are
(rows, n_segs) int64, zero when made, every word of each written once by every launch with the tag
the word held before flipped (fs._tag's scheme, read by each program from a word only it writes),
so launches one after another share them with no memset. In Triton's CPU interpreter, which runs
programs one after another and cannot wait, the readers run as one launch (_PARTIALS) and the
writers as a second (_FINISH): the same loops, nothing to wait for. A row of -inf gives NaN, as
torch.softmax does.

Variants per shape: `ours` (fs.softmax as shipped), `split` (the split strategy forced, its launch
table), `pipe` (the launch table's tile and warps, 2 readers and 2 writers an SM, LAG 1, rounds of
at most ROUND_MB = 12 MB of input), `pipe lag2`, `pipe 8K 3+3` (half-size tiles on 4 warps, 3
readers and 3 writers an SM), `pipe r6` (6 MB rounds), `pipe il` (readers and writers interleaved by program id), and `copy` (out.copy_(x),
timed, not checked). Every variant but copy is checked against float64 first on a hostile input
(softmax_small.case: -inf entries, a row of -inf, one huge entry) with `out` filled with NaN
before the call; a mismatch or a refusal is a row, not a time. Kernel time: CUPTI device time
between L2 flushes (softmax_small.record), every variant of a shape in one profiler session, in
shuffled rounds; no new shape is started after PROBE_BUDGET_S seconds. Writes
$OUT/softmax_split_pipeline.csv and prints the notes, then per shape each variant's us and copy us /
its us, fastest first.

    PYTHONUNBUFFERED=1 python3 probes/softmax_split_pipeline.py

PROBE_DRYRUN=1: no GPU; pipeline_split in Triton's CPU interpreter on small shapes (16-column
tiles, 1- to 3-tile segments, a partial last segment, rounds of fewer rows than the problem has,
two launches in a row on the same buffers, fp16 / bf16 / fp32, -inf entries, -inf tiles, a row of
-inf, a huge entry) against torch.softmax in float64, the output filled with NaN first; exits 1
on a miss.

    PROBE_DRYRUN=1 python3 probes/softmax_split_pipeline.py

Registers (probes/sm90.py, sm_90, no spills): 48 a thread in fp16 and 40 in fp32 at the launch
table's 16 KB tiles on 8 warps (5 and 6 programs an SM by registers), so 2 + 2 an SM fit.

Measured and not kept (H100 80GB HBM3 GPU-9ac8f5b3, at dc116ca; CUPTI
kernel time, L2 flushed; copy time / variant time, us in brackets; every variant's output checked
against float64 first, all ok): slower than the shipped split at every shape, the best variant of
each shape 1.00-1.10x the split's time. A second H100 (GPU-d94f654f, the same commit) gave
0.996-1.11x: only 16x4194304 fp32 tied (pipe il 226.6 us against the split's 227.6).

| shape | copy (us) | ours | split | pipe | pipe lag2 | pipe 8K 3+3 | pipe r6 | pipe il |
|---|---|---|---|---|---|---|---|---|
| 16x4194304 fp16 | 81.5 | 0.76 (107.6) | 0.75 (108.2) | 0.71 | 0.71 | 0.65 | 0.72 | 0.72 |
| 64x1048576 fp16 | 81.5 | 0.80 (101.3) | 0.80 (102.0) | 0.76 | 0.75 | 0.74 | 0.78 | 0.77 |
| 256x262144 fp16 | 81.4 | 0.85 (95.5) | 0.85 (95.5) | 0.76 | 0.76 | 0.74 | 0.80 | 0.79 |
| 512x151936 fp16 | 95.7 | 0.86 (111.7) | 0.86 (111.8) | 0.74 | 0.73 | 0.72 | 0.78 | 0.75 |
| 1024x131072 fp16 | 172.6 | 0.91 (190.7) | 0.91 (189.6) | 0.78 | 0.76 | 0.81 | 0.85 | 0.80 |
| 16x4194304 bf16 | 81.5 | 0.74 (110.0) | 0.74 (110.0) | 0.71 | 0.70 | 0.65 | 0.71 | 0.71 |
| 16x4194304 fp32 | 171.6 | 0.75 (227.6) | 0.76 (227.2) | 0.73 | 0.67 | 0.69 | 0.73 | 0.75 |
| 64x1048576 fp32 | 172.5 | 0.86 (199.8) | 0.86 (201.5) | 0.82 | 0.74 | 0.80 | 0.62 | 0.83 |
| 256x262144 fp32 | 172.5 | 0.90 (191.1) | 0.90 (192.8) | 0.84 | 0.77 | 0.81 | 0.86 | 0.85 |

Running the HBM reads of one round and the L2 re-reads and writes of the round before in separate
programs, with no program at a row barrier in steady state, does not lift the split on this GPU.
A deeper lag (lag2) or smaller rounds (r6) do not close the gap, and half-size tiles on more
programs (8K 3+3) are slower still. Not yet timed on an H200, where the shipped split reads the
few-long-row shapes at 0.69-0.75 of the copy (H100 here: 0.74-0.80).
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

from kernels import fused_softmax as fs  # noqa: E402
from kernels._checks import interpreting  # noqa: E402
from kernels._device import cdiv  # noqa: E402
from softmax_split_estore import TOL, _dry_input  # noqa: E402  (probes/: the split probes' tolerances and input)

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "150"))
ROUND_MB = float(os.environ.get("ROUND_MB", "12"))
SHAPES = [(16, 4194304, torch.float16), (64, 1048576, torch.float16), (256, 262144, torch.float16),
          (512, 151936, torch.float16), (1024, 131072, torch.float16), (16, 4194304, torch.bfloat16),
          (16, 4194304, torch.float32), (64, 1048576, torch.float32), (256, 262144, torch.float32)]

_PARTIALS, _FINISH, _FUSED = fs._PARTIALS, fs._FINISH, fs._FUSED


@triton.jit
def _wait_tag(ptr, tag):
    """Spin until the word at ptr carries `tag` in bit 31."""
    w = tl.load(ptr, volatile=True)
    while ((w >> 31) & 1) != tag:
        w = tl.load(ptr, volatile=True)


@triton.jit(do_not_specialize=["x_row_stride", "out_row_stride", "n_rows", "n_cols", "n_segs", "seg_tiles",
                               "per_pop"])
def _pipeline_kernel(out_ptr, x_ptr, slots_ptr, done_ptr,
                     x_row_stride, out_row_stride,
                     n_rows, n_cols, n_segs, seg_tiles, per_pop,
                     BLOCK: tl.constexpr, VEC: tl.constexpr, PARTIALS_BLOCK: tl.constexpr,
                     MODE: tl.constexpr, LAG: tl.constexpr, INTERLEAVE: tl.constexpr):
    """Readers and writers of a split softmax (module docstring). per_pop: programs a population;
    _PARTIALS launches readers only, _FINISH writers only (no waiting), _FUSED both."""
    pid = tl.program_id(0)
    if MODE == _FUSED:
        if INTERLEAVE:
            reader = pid % 2 == 0
            j = pid // 2
        else:
            reader = pid < per_pop
            j = tl.where(reader, pid, pid - per_pop)
    else:
        reader = MODE == _PARTIALS
        j = pid
    seg = j % n_segs
    first = j // n_segs
    per_round = per_pop // n_segs
    start = seg * seg_tiles * BLOCK
    own = tl.cast(first, tl.int64) * n_segs + seg             # the first word this program writes
    if reader:
        tag = fs._tag(slots_ptr, own, _FUSED)                # the word's last tag, flipped
        for row in range(first, n_rows, per_round):
            if MODE == _FUSED:
                back = row - (LAG + 1) * per_round            # its writes leave L2 room for this row
                if back >= 0:
                    _wait_tag(done_ptr + tl.cast(back, tl.int64) * n_segs + seg, tag)
            x_row = x_ptr + tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
            m, s = fs._tiles_stats(x_row, start, seg_tiles, n_cols, BLOCK, VEC)
            fs._publish(slots_ptr, tl.cast(row, tl.int64) * n_segs + seg, m, s, tag)
    else:
        tag = fs._tag(done_ptr, own, _FUSED)                 # (also in _FINISH: done words are the writers' own)
        for row in range(first, n_rows, per_round):
            part = tl.cast(row, tl.int64) * n_segs
            row_max, row_sum = fs._gather(slots_ptr, part, n_segs, tag, PARTIALS_BLOCK)
            x_row = x_ptr + tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
            o_row = out_ptr + tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC)
            fs._tiles_normalize(o_row, x_row, start, seg_tiles, n_cols, row_max, 1.0 / row_sum, BLOCK, VEC)
            tl.atomic_xchg(done_ptr + part + seg, tag << 31, sem="relaxed")


_BUFFERS: dict = {}


def _buffers(device, rows: int, n_segs: int) -> tuple:
    """(slots, done): (rows, n_segs) int64 each, zero when made, kept per layout (module docstring).
    Not fs._slots's buffer: the shipped split's launches flip that one's tags, and readers and
    writers take theirs from the two buffers, which must flip together."""
    key = (device, rows, n_segs)
    if key not in _BUFFERS:
        _BUFFERS[key] = tuple(torch.zeros((rows, n_segs), dtype=torch.int64, device=device) for _ in range(2))
    return _BUFFERS[key]


def plan(rows: int, cols: int, elem: int, block: int, per_pop: int, round_mb: float) -> tuple:
    """(seg_tiles, n_segs, rows a round) for populations of per_pop programs: a round holds at most
    round_mb of input, or one row; its rows' segments are the population."""
    tiles = cdiv(cols, block)
    per_round = max(1, min(rows, int(round_mb * 2**20) // (cols * elem), per_pop))
    seg_tiles = cdiv(tiles, max(1, per_pop // per_round))
    n_segs = cdiv(tiles, seg_tiles)
    return seg_tiles, n_segs, max(1, min(rows, per_pop // n_segs))


def pipeline_split(x: torch.Tensor, out: torch.Tensor, cfg: fs.Config | None = None, per_sm: int = 2,
                   lag: int = 1, round_mb: float = ROUND_MB, interleave: bool = False,
                   sms: int | None = None) -> torch.Tensor:
    """Softmax of each row of x (rows, cols) into out by the reader/writer pipeline; returns out.
    cfg: tile and warps (None: fs.config("split")); per_sm: programs an SM of each population;
    sms: SMs assumed (None: the device's; the dry run passes a few). Refuses rows the split
    kernel would peel."""
    rows, cols = x.shape
    vec, peel = fs._access(x, out)
    if peel:
        raise ValueError(f"pipeline_split: rows of {cols} columns at strides {x.stride(0)}/{out.stride(0)} "
                         "are off the access boundary (the split kernel peels them)")
    cfg = cfg or fs.config("split", cols, x.dtype)
    per_pop = per_sm * (sms or fs.num_sms(x.device))
    seg_tiles, n_segs, per_round = plan(rows, cols, x.element_size(), cfg.block, per_pop, round_mb)
    if n_segs > per_pop:
        raise ValueError(f"pipeline_split: {n_segs} segments a row exceed {per_pop} programs")
    slots, done = _buffers(x.device, rows, n_segs)
    pop = per_round * n_segs
    args = (out, x, slots, done, x.stride(0), out.stride(0), rows, cols, n_segs, seg_tiles, pop)
    const = dict(BLOCK=cfg.block, VEC=vec, PARTIALS_BLOCK=fs.PARTIALS_BLOCK, LAG=lag, INTERLEAVE=interleave,
                 num_warps=cfg.num_warps)
    if interpreting():
        for mode in (_PARTIALS, _FINISH):
            _pipeline_kernel[(pop,)](*args, MODE=mode.value, **const)
    else:
        _pipeline_kernel[(2 * pop,)](*args, MODE=_FUSED.value, launch_cooperative_grid=True, **const)
    return out


# ---- PROBE_DRYRUN=1: the interpreter on small shapes ----

def dry_run() -> None:
    small = fs.Config(block=16, num_warps=1)
    failed = total = 0
    print("dry run (Triton CPU interpreter): pipeline_split against torch.softmax in float64")
    print("shape dtype | programs a population | round bytes | seg_tiles n_segs rows-a-round | max abs err | NaN ok | ok")
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        for rows, cols, per_sm, sms, round_bytes in ((6, 328, 1, 21, 328),      # 21 tiles: 1-tile segments, a row a round
                                                     (6, 328, 1, 11, 656),      # 5-tile segments, the last 1 tile; 2 rows a round
                                                     (6, 328, 2, 40, 1e9),      # one round of 2-tile segments
                                                     (7, 168, 2, 4, 2 * 168),   # rounds of 2 rows: 4 rounds
                                                     (5, 168, 1, 4, 1),         # one row a round, 3-tile segments
                                                     (4, 1024, 1, 3, 1)):       # 64 tiles in 3 segments of 22
            x = _dry_input(rows, cols, dt)
            ref = torch.softmax(x.double(), -1)
            round_mb = round_bytes * x.element_size() / 2**20
            seg_tiles, n_segs, per_round = plan(rows, cols, x.element_size(), 16, per_sm * sms, round_mb)
            for launch in range(2):                  # the second launch reuses the buffers' flipped tags
                out = torch.full_like(x, float("nan"))
                pipeline_split(x, out, cfg=small, per_sm=per_sm, sms=sms, round_mb=round_mb)
                err = (out.double() - ref).abs().nan_to_num(nan=0.0).max().item()
                nan_ok = torch.equal(out.isnan(), ref.isnan())
                ok = err <= TOL[dt] and nan_ok
                failed += not ok
                total += 1
                print(f"{rows}x{cols} {str(dt)[6:]} launch {launch} | {per_sm * sms} | {round_bytes:g} | "
                      f"{seg_tiles} {n_segs} {per_round} | {err:.3g} | {nan_ok} | {'ok' if ok else 'FAIL'}",
                      flush=True)
    x = _dry_input(3, 1025, torch.float16)                    # odd rows: the split kernel peels them
    total += 1
    try:
        pipeline_split(x, torch.empty_like(x))
        print("3x1025 float16: not refused: FAIL")
        failed += 1
    except ValueError as exc:
        print(f"3x1025 float16: refused (ValueError: {exc})")
    print(f"# {total - failed} of {total} checks passed")
    if failed:
        sys.exit(1)


# ---- the GPU probe ----

def variants(x: torch.Tensor, out: torch.Tensor, sms: int) -> dict:
    rows, cols = x.shape
    cfg = fs.config("split", cols, x.dtype, rows, sms)
    half = fs.Config(block=cfg.block // 2, num_warps=4)
    return {"ours": lambda: fs.softmax(x, -1),
            "split": lambda: fs.STRATEGIES["split"].run(x, out, cfg),
            "pipe": lambda: pipeline_split(x, out),
            "pipe lag2": lambda: pipeline_split(x, out, lag=2),
            "pipe 8K 3+3": lambda: pipeline_split(x, out, cfg=half, per_sm=3),
            "pipe r6": lambda: pipeline_split(x, out, round_mb=6),
            "pipe il": lambda: pipeline_split(x, out, interleave=True)}


def main() -> None:
    from softmax_small import long_row_probe   # the shared probe loop (probes/, beside this script)
    long_row_probe(SHAPES, variants, "softmax_split_pipeline.csv", BUDGET_S, TOL)


if __name__ == "__main__":
    if DRY:
        dry_run()
    else:
        main()
