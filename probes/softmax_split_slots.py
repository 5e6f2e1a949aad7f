"""Probe: split with its exchange in one 64-bit word a segment, no counters and no fences.

The question. The shipped split publishes a segment's (max, sum) with two relaxed exchanges, a
barrier and a release add on the row's arrive counter, spins on that counter with acquire loads,
reads the partials, and leaves through an acq_rel add on a depart counter (the last one out
re-arms both). At 4096x32768 fp16, one segment a row (no partner to wait for), split reaches
0.669 of the copy where looped, the same reads and writes without the exchange, reaches 0.859;
with relaxed instead of release/acquire ordering the few-long-row shapes ran 0.673-0.759 against
0.637-0.692 (probes/softmax_split_diag.py). Each round a program stalls on those serial round
trips to L2 with nothing of its own in flight.

The variant. A segment's partials are one 64-bit word: the max's fp32 bits high, the sum's low,
and the sum's sign bit (a sum of exponentials is never negative) a tag. A program publishes
with one relaxed 64-bit exchange, whose result it never reads, and waits by reading its row's
words (volatile, PARTIALS_BLOCK at a time) until every one carries this launch's tag, merging
them as they come: the data is its own flag, so no fence orders it. Every launch writes every
word of its (rows, segments) buffer once, so after a launch all words carry its tag; the next
launch reads its first word (which no other program writes) and takes the other tag. No counter
to re-arm, no host-side state: the buffer starts zeroed (tag 0) and the first launch takes tag 1.
LOOKAHEAD: a program reads and publishes round r + 1's segment before it waits on round r's
partials, so HBM reads stay in flight while the row's other segments finish (two segments of a
program in L2 instead of one). Exponentials are exp2(y log2 e) (`ex2.approx.ftz.f32`, see
probes/softmax_exp2.py). At 1325d3f `split` was the shipped kernel with the old exchange and
tl.exp; since c899ebb the shipped split has this exchange and exp2, so `split` and `sl_pm4_s4`
(its launch table) time the same design, and the other settings ask what is left: segments of
2-8 tiles, lookahead on 2-4 programs an SM (two segments a program in L2 at 17-34 MB in all), and
6-8 programs an SM on 4 warps. At 2048x65537 (rows off the vector boundary, which this probe's
kernel does not take) it times the shipped split, whose segments cover the aligned body since
the branch `next-run` (two 4-tile segments a 16-bit row where there were three, one empty),
against looped, which ships there at 0.71 of the copy.

Measured at 0d069c1 (the shipped split as in the run at that commit; two calls on GPU-37f0fe30,
CUPTI medians, share of the copy; the probe's settings are "programs an SM at most": the fp16/bf16
kernel holds 86 registers on 4 warps and 48 on 8, 5 an SM either way, fp32 56 and 40, 9 and 6, so
pm6-pm12 on 4 warps are 5 an SM in 16 bits). 16x4194304 fp16: split 0.70, sl_pm4_s4 0.69-0.70,
every 2-tile or 4-warp setting 0.59-0.64; fp32: split 0.66-0.70, sl_pm8_s2_w4 0.67-0.69,
sl_pm6_s2_w4 0.53 (512 segments a row, one row a round). 64x1048576 fp32: split 0.78-0.79,
sl_pm6_s2_w4 0.81, sl_pm8_s2_w4 0.79-0.81, sl_pm12_s2_w4 0.72. 256x262144 fp16: split 0.75,
sl_pm8_s2_w4 0.79 (and pm6, pm12: 0.78). 1024x131072 bf16: split 0.78, pm6-pm12 s2 w4 0.83-0.84;
fp32: split 0.86, sl_pm6_s2_w4 and sl_pm8_s2_w8 (6 an SM) 0.93, sl_pm4_s2 0.90-0.91, sl_pm8_s2_w4
0.84-0.85, sl_pm12_s2_w4 0.81. 512x151936 bf16: split 0.72, pm6-pm12 s2 w4 0.76-0.77. 2048x65537:
split 0.81 fp16, 0.79-0.80 bf16, against looped (and ours) 0.72. Hence, on the branch after it,
`config("split")` gives problems of several rounds whose rows hold at most 128 two-tile segments
2-tile segments on 4 warps, up to 6 an SM, and `choose` sends 2048x65537 in 16 bits to split.
`split_table` times the launch table before that (4-tile segments on 8 warps, 4 an SM, through the
shipped split, which peels), `split` the table as shipped, so at every shape the two face each other.

Measured at 1325d3f (H200, CUPTI medians, us, share of the copy; old split with exp2 in brackets):
16x4194304 fp16 sl_pm4_s4 87.8 (0.68) [92.4], sl_pm4_s2_la 90.9, sl_pm4_s4_la 93.5; 64x1048576
fp32 sl_pm4_s2_la 154.3 (0.80), sl_pm4_s4 156.4 (0.79), sl_pm4_s2 171.5 [181.3]; 256x262144 fp16
sl_pm4_s2 80.1 (0.74), sl_pm4_s4 80.8, sl_pm4_s2_la 82.9 [88.5]; 1024x131072 bf16 sl_pm4_s4 157.6
(0.78), sl_pm4_s2 159.9, sl_pm4_s2_la 168.8 [172.5]; 1024x131072 fp32 sl_pm4_s2 279.8 (0.91),
sl_pm4_s4 295.4, sl_pm4_s2_la 317.8 [340.7]; 512x151936 bf16 sl_pm4_s4 97.5 (0.72), sl_pm4_s2
101.3, sl_pm4_s2_la 101.7 [104.0]. The other settings' times were cut from that call's output.

Shapes: the few-long-row shapes where split ships at 0.60-0.68 of the copy (aligned rows only:
this probe does not peel). Every variant is checked against float64 on a hostile input with its
output poisoned first (softmax_small.long_row_probe), then timed with CUPTI between L2 flushes.
Writes $OUT/softmax_split_slots.csv; prints each variant's us and the copy's time over it.

    PYTHONUNBUFFERED=1 python3 probes/softmax_split_slots.py              (a GPU)
    PROBE_DRYRUN=1 python3 probes/softmax_split_slots.py                  (no GPU: compile for sm_90
        and print registers and SASS instruction counts)
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
from kernels._device import cdiv  # noqa: E402
from kernels._device import sm_count as num_sms  # noqa: E402

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "100"))
SHAPES = [(16, 4194304, torch.float16), (16, 4194304, torch.float32), (64, 1048576, torch.float32),
          (256, 262144, torch.float16), (1024, 131072, torch.bfloat16), (1024, 131072, torch.float32),
          (512, 151936, torch.bfloat16), (2048, 65537, torch.float16), (2048, 65537, torch.bfloat16),
          (64, 1048576, torch.float16), (256, 262144, torch.float32), (512, 151936, torch.float32),
          (1024, 131072, torch.float16), (2048, 65537, torch.float32), (64, 65537, torch.float32),
          (16, 262144, torch.float32)]
# (name, programs an SM at most, tiles a segment, warps, lookahead); 16 KB tiles as the table's.
# sl_pm4_s4 is the exchange the shipped split has had since c899ebb, with its launch table.
SETTINGS = [("sl_pm4_s4", 4, 4, 8, False), ("sl_pm4_s2", 4, 2, 8, False), ("sl_pm4_s8", 4, 8, 8, False),
            ("sl_pm2_s4_la", 2, 4, 8, True), ("sl_pm2_s2_la", 2, 2, 8, True), ("sl_pm3_s4_la", 3, 4, 8, True),
            ("sl_pm4_s2_la", 4, 2, 8, True), ("sl_pm6_s4_w4", 6, 4, 4, False), ("sl_pm8_s2_w4", 8, 2, 4, False),
            ("sl_pm8_s4_w4", 8, 4, 4, False), ("sl_pm6_s2_w4", 6, 2, 4, False), ("sl_pm8_s2_w8", 8, 2, 8, False),
            ("sl_pm12_s2_w4", 12, 2, 4, False), ("sl_pm8_s3_w4", 8, 3, 4, False)]
# (programs an SM at most, tiles a segment, warps) of the shipped split's two settings
SHIPPED_SETTINGS = {"rounds": (fs.SPLIT_ROUNDS_PER_SM, fs.SPLIT_ROUNDS_SEG_TILES, fs.SPLIT_ROUNDS_WARPS),
                    "table": (fs.SPLIT_MAX_PER_SM, fs.SPLIT_SEG_TILES, fs.SPLIT_WARPS)}
TILE_BYTES = 16384
PARTIALS_BLOCK = 128
SPIN_LIMIT = tl.constexpr(1 << 24)   # reads of a block of words before giving up (about a second)
TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5}


@triton.jit
def _gather(slots_ptr, part, n_segs, tag, PARTIALS_BLOCK: tl.constexpr):
    """fs._gather with its spin bounded: a probe's bug shows as a mismatch, not a hang."""
    offs = tl.arange(0, PARTIALS_BLOCK)
    ready = (tl.full([], -float("inf"), tl.float32).to(tl.int32, bitcast=True).to(tl.int64) << 32) \
        | (tag << 31)                                             # masked lanes: (-inf, 0), ready
    row_max = tl.full([], -float("inf"), tl.float32)
    row_sum = tl.full([], 0.0, tl.float32)
    for j in range(0, n_segs, PARTIALS_BLOCK):
        mask = j + offs < n_segs
        w = tl.load(slots_ptr + part + j + offs, mask=mask, other=ready, volatile=True)
        tries = 0
        while (tl.sum((((w >> 31) & 1) != tag).to(tl.int32), axis=0) > 0) & (tries < SPIN_LIMIT):
            tries += 1
            w = tl.load(slots_ptr + part + j + offs, mask=mask, other=ready, volatile=True)
        pm = (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)
        ps = (w & 0x7FFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
        bm = tl.max(pm, axis=0)
        bm_safe = tl.where(bm == -float("inf"), 0.0, bm)
        row_max, row_sum = fs._merge_stats(row_max, row_sum, bm, tl.sum(ps * fs._exp(pm - bm_safe), axis=0))
    return row_max, row_sum


@triton.jit
def program_segment(slots_ptr, n_segs, seg_tiles, BLOCK: tl.constexpr):
    """(segment, first row, rows a round, first column, tag) of this program, as the shipped split."""
    pid = tl.program_id(0)
    seg = pid % n_segs
    first = pid // n_segs
    tag = fs._tag(slots_ptr, tl.cast(first, tl.int64) * n_segs + seg, fs._FUSED)
    return seg, first, tl.num_programs(0) // n_segs, seg * seg_tiles * BLOCK, tag


@triton.jit(do_not_specialize=["x_row_stride", "out_row_stride", "n_rows", "n_cols", "n_segs", "seg_tiles"])
def _split_slots_kernel(out_ptr, x_ptr, slots_ptr, x_row_stride, out_row_stride, n_rows, n_cols, n_segs,
                        seg_tiles, BLOCK: tl.constexpr, VEC: tl.constexpr, PARTIALS_BLOCK: tl.constexpr,
                        LOOKAHEAD: tl.constexpr):
    seg, first, rows_per_round, start, tag = program_segment(slots_ptr, n_segs, seg_tiles, BLOCK)
    if LOOKAHEAD:
        x_row = x_ptr + tl.multiple_of(tl.cast(first, tl.int64) * x_row_stride, VEC)
        m, s = fs._tiles_stats(x_row, start, seg_tiles, n_cols, BLOCK, VEC)
        fs._publish(slots_ptr, tl.cast(first, tl.int64) * n_segs + seg, m, s, tag)
    for row in range(first, n_rows, rows_per_round):
        x_row = x_ptr + tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
        o_row = out_ptr + tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC)
        part = tl.cast(row, tl.int64) * n_segs
        if LOOKAHEAD:
            nxt = row + rows_per_round
            if nxt < n_rows:
                x_nxt = x_ptr + tl.multiple_of(tl.cast(nxt, tl.int64) * x_row_stride, VEC)
                m, s = fs._tiles_stats(x_nxt, start, seg_tiles, n_cols, BLOCK, VEC)
                fs._publish(slots_ptr, tl.cast(nxt, tl.int64) * n_segs + seg, m, s, tag)
        else:
            m, s = fs._tiles_stats(x_row, start, seg_tiles, n_cols, BLOCK, VEC)
            fs._publish(slots_ptr, part + seg, m, s, tag)
        row_max, row_sum = _gather(slots_ptr, part, n_segs, tag, PARTIALS_BLOCK)
        fs._tiles_normalize(o_row, x_row, start, seg_tiles, n_cols, row_max, 1.0 / row_sum, BLOCK, VEC)


def launch_split(kernel, x: torch.Tensor, out: torch.Tensor, per_sm: int, seg_tiles: int, warps: int,
                 balance: bool = False, coop: bool = True, **consts):
    """A probe's split kernel (arguments as `_split_slots_kernel`'s, then `consts`) on aligned rows:
    one cooperative launch, every segment of a round resident, the shipped split's 16 KB tiles and
    partials buffers (the same tags and layout). balance: the same number of rounds with the rows
    dealt out evenly over them (the shipped grid fills every round but the last). coop=False: the
    same grid launched without the cooperative flag."""
    rows, cols = x.shape
    vec = 16 // x.element_size()
    assert cols % vec == 0 and x.stride(0) % vec == 0 and out.stride(0) % vec == 0
    block = TILE_BYTES // x.element_size()
    n_segs = cdiv(cdiv(cols, block), seg_tiles)
    slots = fs._slots(x.device, rows, n_segs)
    consts = dict(BLOCK=block, VEC=vec, PARTIALS_BLOCK=PARTIALS_BLOCK, num_warps=warps, **consts)
    args = (out, x, slots, x.stride(0), out.stride(0), rows, cols, n_segs, seg_tiles)
    key = (kernel.fn.__name__, x.dtype, coop, *sorted(consts.items()))
    resident = fs._resident_per_sm(key, x.device, lambda: kernel.warmup(
        *args, grid=(1,), launch_cooperative_grid=coop, **consts))
    capacity = min(resident, per_sm) * num_sms(x.device)
    if n_segs > capacity:
        raise RuntimeError(f"{n_segs} segments a row > {capacity} resident programs")
    per_round = min(capacity // n_segs, rows)
    if balance:
        per_round = cdiv(rows, cdiv(rows, per_round))
    kernel[(per_round * n_segs,)](*args, launch_cooperative_grid=coop, **consts)
    return out


def print_split_resources(kernel, variants: dict) -> None:
    """No GPU: a probe's split kernel (`_split_slots_kernel`'s arguments, then its constexprs)
    compiled for sm_90 on each shipped setting, in fp16 and fp32, for each variant (name: the
    constexpr values after PARTIALS_BLOCK); prints registers, MUFU.EX2, spill loads and programs an SM."""
    from sm90 import compile_for_sm90, programs_per_sm, usage
    for dtype in (torch.float16, torch.float32):
        x = torch.empty(64, 1048576, dtype=dtype)
        slots = torch.empty(1, dtype=torch.int64)
        for setting, (per_sm, seg_tiles, warps) in SHIPPED_SETTINGS.items():
            for name, values in variants.items():
                consts = (fs.SPLIT_TILE_BYTES // dtype.itemsize, 16 // dtype.itemsize, fs.PARTIALS_BLOCK, *values)
                compiled = compile_for_sm90(kernel, (x, x, slots, 1048576, 1048576, 64, 1048576, 64, seg_tiles)
                                            + consts, dict(num_warps=warps))
                u = usage(compiled)
                print(f"{str(dtype)[6:]:>8} {setting:>6} {name:>6}: regs {u['regs']} ex2 {u['mufu_ex2']} "
                      f"ldl {u['ldl']}, {programs_per_sm(u['regs'], warps)} an SM")


def split_slots(x: torch.Tensor, out: torch.Tensor, per_sm: int, seg_tiles: int, warps: int, lookahead: bool):
    """The probe's split on aligned rows (`launch_split`)."""
    return launch_split(_split_slots_kernel, x, out, per_sm, seg_tiles, warps, LOOKAHEAD=lookahead)


def make_variants():
    def variants(x, out, sms):
        table = fs.Config(block=fs.SPLIT_TILE_BYTES // x.element_size(), num_warps=fs.SPLIT_WARPS)
        fns = {"ours": lambda: fs.softmax(x), "split": lambda: fs.STRATEGIES["split"].run(x, out),
               "split_table": lambda: fs.STRATEGIES["split"].run(x, out, table)}
        if x.shape[0] >= 4 * sms:
            fns["looped"] = lambda: fs.STRATEGIES["looped"].run(x, out)
        if x.shape[1] % (16 // x.element_size()) == 0:      # the probe's own kernel does not peel
            for name, per_sm, seg_tiles, warps, la in SETTINGS:
                fns[name] = lambda a=(per_sm, seg_tiles, warps, la): split_slots(x, out, *a)
        return fns
    return variants


def dry_run() -> None:
    """Compile for sm_90 offline: registers, spills and MUFU.EX2 count of each setting's kernel."""
    from sm90 import compile_for_sm90, programs_per_sm, usage
    for dtype in (torch.float16, torch.float32):
        x = torch.empty(64, 1048576, dtype=dtype)
        slots = torch.empty(1, dtype=torch.int64)
        for warps, la in sorted({(w, la) for _, _, _, w, la in SETTINGS}):
            consts = (TILE_BYTES // dtype.itemsize, 16 // dtype.itemsize, PARTIALS_BLOCK, la)
            kernel = compile_for_sm90(_split_slots_kernel, (x, x, slots, 1048576, 1048576, 64, 1048576, 64, 4)
                                      + consts, dict(num_warps=warps))
            u = usage(kernel)
            print(f"{str(dtype)[6:]:>8} warps {warps:>2} lookahead {la!s:>5}: {u}, "
                  f"{programs_per_sm(u['regs'], warps)} an SM")


def main() -> None:
    if os.environ.get("PROBE_DRYRUN") == "1":
        dry_run()
        return
    from softmax_small import long_row_probe   # the shared probe loop (probes/, beside this script)
    long_row_probe(SHAPES, make_variants(), "softmax_split_slots.csv", BUDGET_S, TOL)


if __name__ == "__main__":
    main()
