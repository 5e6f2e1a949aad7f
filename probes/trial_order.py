"""Probe: does a kernel's time in the sweep's trials follow its place in the trial, or the kernel run
just before it?

The sweep times a case's implementations together in `trials` rounds (six in the full profile), each
in an order seeded by the bench seed and the case (rooflab.bench._trial_orders), an
implementation's `events` calls then its `cupti` calls. A trial's order moves a kernel's median by
up to 3.5% (probes/sweep_vs_probe.py DIAG=seeds and DIAG=launch), and on two H100 runs in a row
(c7023ae and cb24611, bench seed 0) `ours` at 16384x1024 fp32 took 39.0-39.7 us with intervals
2.2-2.9 us wide, where the same row kernel forced took 37.4-37.9 (intervals under 0.5 us wide) and
torch.compile 37.1-37.4: the one fp32 softmax loss of either run. Whether a counterbalanced order
(each implementation at each place in turn) would remove that luck, or only more trials would,
depends on which of the two carries it. Here the sweep's implementations of a case are built,
checked against float64 and warmed up as the sweep does (rooflab.bench._warm_up and _calls: the same
calls a trial), then timed in TRIALS shuffled trials with the sweep's events-then-cupti calls, and
every implementation's cupti median of every trial is kept with its place, the implementation before
it and the SM clock at the trial's start. Printed per implementation: the median over all trials, by
third of the trial (first, middle, last places), the predecessors it ran slowest and fastest after
(at least MIN_AFTER trials each), and the range of medians over consecutive groups of six trials
(what six trials of a sweep row can land on).

    PYTHONUNBUFFERED=1 TRIALS=60 SHAPES=16384x1024:float32,8192x4096:float32 python3 probes/trial_order.py

ORDER=balanced (the default) times each group of six trials in the sweep's orders
(rooflab.trial_orders.balanced_orders: no implementation follows the same one twice), ORDER=shuffled
in the fresh shuffles the sweep used up to the H100 run at cb24611 (where one implementation follows
the same one in up to three of six trials): whether a row's spread
over six trials narrows when no predecessor can repeat. SETTLE_MS idles the GPU that long after each
implementation's calls; RELEASE=1 empties the caching allocator after them (torch.cuda.empty_cache),
so that every block's outputs come from a fresh allocation wherever the blocks before it left
theirs. PROBE_EXTRA adds stand-ins to the trials: `zeros` (a fresh zero-filled output a call),
`zeros3` (three, the writes and allocations of seed_multipass's zero fill and two passes) and
`fill3` (three zero fills of one buffer made once and held for the whole run, which also moves
where every other output lands), `ones3` (fill3 with ones), and reads of the case's input with one L2
eviction priority, `lastread` (evict_last), `firstread` (evict_first) and `plainread` (the default).
FLUSH=fillread zero-fills the flush's buffer before each
flush's read (the calls then start from the same writes and read whatever ran before them).
RESET=1 resets the L2's persisting lines (cuCtxResetPersistingL2Cache, which returns lines held as
evict_last to normal) after each implementation's calls, RESET=call before every call's flush.
After the table, the three predecessors whose next implementation ran slowest against its own median,
with the first and last three cupti calls of those blocks (does the after-effect fade in a block?).

Measured on an H100 (GPU-877288b7, dd1df63, 60 trials, SETTLE_MS=0): a kernel's place in the trial
moves nothing (median time by place 0.999-1.002x its own median at both shapes); the kernel before it
does. At 16384x1024 fp32 the two implementations run right after seed_multipass (four launches and a
zero fill, 161 us a call) take 1.054x and 1.056x their own medians, the third 1.023x, the fourth on
0.99-1.00x; after ours_looped and ours_split the next runs at 0.980x and 0.982x. The copy of the same
bytes is among those slowed (40.29 us after seed_multipass, 38.26 median), so the after-effect lies
outside the kernel timed (the GPU's state, or where its output lands). The SM clock read at each trial's start was 1980 MHz
throughout. At 8192x4096 fp32 the same predecessor moves the next by 1.004x. `ours` spanned
37.52-40.51 us over ten groups of six trials at 16384x1024 (the cb24611 H100 run's 39.71 lies
inside it), ours_row 37.41-39.17, torch.compile 36.48-39.54.
On a third H100 (GPU-de3379a1, d99387c, 48 trials each at 16384x1024 fp32): ORDER=balanced held
`ours`'s six-trial medians to 37.41-38.83 us against 37.71-40.61 shuffled (torch.compile 36.53-38.53
against 36.50-39.36), while the next implementation after seed_multipass still ran 1.054-1.061x,
1.060x over a block's first three calls and 1.062x over its last three; SETTLE_MS=50 left it at
1.050x; with PROBE_EXTRA=zeros3,fill3 nearly every implementation took 40.2-40.5 us in any order.
Those runs, at d99387c, also held fill3's buffer (the case's size) when fill3 was not asked for: the
probe made it whenever it listed the stand-ins, which moved where the other outputs landed in every
run of that GPU; since then it is made only for fill3.

On a fourth H100 (GPU-cf66de32, 5e79d2d, 36 trials each at 16384x1024 fp32, no held buffer):
RELEASE=1 changed nothing, block by block (99.3% of 288 blocks in the same state, about 37.4 or 40.3
us, times correlated 0.992); the state is carried from block to block, set fast by ours_looped and
ours_split (every block after them), slow by seed_multipass (every block after it), and passed on by
the others (94% of 108 pairs); with zeros3,fill3 every block ran slow (ours 40.40-40.54 us). The slow
state is the 128 MiB copy's rate (3.33 TB/s), the fast one 3.59 TB/s, above the datasheet's 3.35.

PROBE_DRYRUN=1 runs the trial loop and the summary on the CPU with stand-in kernels whose time
grows with their place (no GPU, no Triton).
Writes $OUT/trial_order.csv (one line a trial and implementation) and prints the summary last.
"""
from __future__ import annotations

import os
import random
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from l2_reset import reset_before_flush, reset_persisting_l2  # noqa: E402
from probe_csv import write_csv  # noqa: E402
from rooflab.trial_orders import balanced_orders, follows, shuffled_orders  # noqa: E402

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
TRIALS = int(os.environ.get("TRIALS", "60"))
SHAPES = [(*(int(v) for v in dims.split("x")), dtype)          # ROWSxCOLS:dtype
          for dims, dtype in (s.split(":") for s in os.environ.get(
              "SHAPES", "16384x1024:float32,8192x4096:float32").split(","))]
MIN_AFTER = 3          # trials behind a predecessor's median
GROUP = 6              # the full profile's trials a row
SETTLE_MS = float(os.environ.get("SETTLE_MS", "0"))
RELEASE = os.environ.get("RELEASE") == "1"   # empty the caching allocator after each implementation
FLUSH = os.environ.get("FLUSH", "read")   # read (the sweep's flush) or fillread (a zero fill of its buffer, then the read)
RESET = os.environ.get("RESET", "")   # 1: reset the L2's persisting (evict_last) lines after each implementation; call: before every call
if FLUSH not in ("read", "fillread") or RESET not in ("", "1", "call"):
    raise ValueError(f"FLUSH={FLUSH!r} (read or fillread), RESET={RESET!r} ('', 1 or call)")
ORDER = os.environ.get("ORDER", "balanced")   # balanced (the sweep's) or shuffled (trial_orders)
EXTRA = os.environ.get("PROBE_EXTRA", "")   # stand-ins timed beside the impls: zeros, zeros3, fill3 (measure)


def run_trials(fns: dict, calls: dict, timer, trials: int, seed: str, clock=None, state=None) -> list[dict]:
    """One record a trial and implementation: its place, the implementation before it, its cupti
    median (us), the medians of its first and last three cupti calls, the SM clock at the trial's
    start (clock(): MHz, or None) and, with state(), the GPU's state read right after its calls
    (SM clock, power, temperature, throttle reasons), and the memory the caching allocator holds
    then (MiB). The trials run in `trial_orders`; SETTLE_MS idles the GPU that long after each
    implementation's calls; RELEASE=1 hands the allocator's free blocks back after them."""
    records = []
    orders = trial_orders(list(fns), trials, seed)
    for trial in range(trials):
        order = orders[trial]
        mhz = clock() if clock else None
        before = "-"
        for place, impl in enumerate(order):
            timer.sample(fns[impl], calls[impl], "events")               # as a sweep trial: events, then cupti
            samples = timer.sample(fns[impl], calls[impl], "cupti")
            record = {"trial": trial, "place": place, "impl": impl, "before": before,
                      "us": round(statistics.median(samples) * 1e3, 4),
                      "first3_us": round(statistics.median(samples[:3]) * 1e3, 4),
                      "last3_us": round(statistics.median(samples[-3:]) * 1e3, 4), "sm_mhz": mhz}
            if state:
                now = state()
                record.update(after_mhz=now.get("sm_mhz"), after_w=now.get("power_w"),
                              after_c=now.get("temp_c"), after_throttle="|".join(now.get("throttle") or []))
            if torch.cuda.is_available():
                record["reserved_mib"] = torch.cuda.memory_reserved() >> 20
            records.append(record)
            if SETTLE_MS:
                torch.cuda.synchronize()
                time.sleep(SETTLE_MS / 1e3)
            if RELEASE and torch.cuda.is_available():
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            if RESET == "1" and torch.cuda.is_available():
                torch.cuda.synchronize()
                reset_persisting_l2()
            before = impl
    return records


def trial_orders(impls: list, trials: int, seed: str) -> list[list]:
    """Each trial's order. ORDER=balanced (the sweep's): each group of GROUP trials (a sweep row's)
    from rooflab.trial_orders.balanced_orders. ORDER=shuffled: a fresh shuffle a trial, as the
    sweep's up to the H100 run at cb24611."""
    if ORDER == "balanced":
        return [order for g in range(0, trials, GROUP)
                for order in balanced_orders(impls, min(GROUP, trials - g), f"{seed}|{g}")]
    return shuffled_orders(impls, trials, seed)


def after_effects(records: list[dict], top: int = 3) -> list[str]:
    """The predecessors whose next implementation ran slowest against that implementation's own
    median (median ratio over the trials behind it), with the ratio of its first and last three
    calls there: whether the after-effect fades within a block."""
    base = {impl: statistics.median(r["us"] for r in records if r["impl"] == impl)
            for impl in {r["impl"] for r in records}}
    by = {}
    for r in records:
        if r["before"] != "-":
            by.setdefault(r["before"], []).append(r)
    rel = {k: statistics.median(r["us"] / base[r["impl"]] for r in v) for k, v in by.items()}
    lines = []
    for k in sorted(rel, key=rel.get, reverse=True)[:top]:
        v = by[k]
        first = statistics.median(r["first3_us"] / base[r["impl"]] for r in v)
        last = statistics.median(r["last3_us"] / base[r["impl"]] for r in v)
        lines.append(f"after {k:15} next impl at {rel[k]:.3f}x its median (first 3 calls {first:.3f}, "
                     f"last 3 {last:.3f}; {len(v)} blocks)")
    return lines


def summary(records: list[dict], impls: list[str]) -> list[str]:
    """Lines a reader compares, in the order of `impls`: per implementation its median, by third of
    the trial, its slowest and fastest predecessor, and the range of six-trial medians."""
    places = max(r["place"] for r in records) + 1
    lines = [f"{'impl':15} {'median':>8}  {'first':>8} {'middle':>8} {'last':>8}  "
             f"{'6-trial medians':>17}  slowest after / fastest after"]
    for impl in impls:
        mine = [r for r in records if r["impl"] == impl]
        third = [statistics.median([r["us"] for r in mine if r["place"] * 3 // places == k] or [float("nan")])
                 for k in range(3)]
        groups = [statistics.median([r["us"] for r in mine if r["trial"] // GROUP == g])
                  for g in sorted({r["trial"] // GROUP for r in mine})]
        after = {}
        for r in mine:
            after.setdefault(r["before"], []).append(r["us"])
        after = {k: statistics.median(v) for k, v in after.items() if len(v) >= MIN_AFTER}
        slow = max(after, key=after.get) if after else "-"
        fast = min(after, key=after.get) if after else "-"
        lines.append(f"{impl:15} {statistics.median(r['us'] for r in mine):8.3f}  "
                     + " ".join(f"{v:8.3f}" for v in third)
                     + f"  {min(groups):8.3f}-{max(groups):8.3f}"
                     + (f"  {slow} {after[slow]:.3f} / {fast} {after[fast]:.3f}" if after else ""))
    return lines


class _DryTimer:
    """Stand-in for CudaTimer: a call's time is its kernel's base time, 2% more a place later in the
    trial, with a little noise."""
    def __init__(self):
        self.place = 0

    def sample(self, fn, n, mode):
        base = fn()
        if mode == "cupti":
            self.place += 1
        return [base * (1 + 0.002 * (self.place % 11)) * random.uniform(0.995, 1.005) for _ in range(n)]


def _max_repeat(orders: list[list]) -> int:
    """The most times one implementation follows the same one in a GROUP of trials (one sequence)."""
    return max(n for g in range(0, len(orders), GROUP)
               for (_, _, distance), n in follows([i for o in orders[g:g + GROUP] for i in o]).items()
               if distance == 1)


def dry_run() -> None:
    impls = [f"k{i}" for i in range(11)]
    orders = trial_orders(impls, 60, "dry")
    assert all(sorted(o) == sorted(impls) for o in orders)
    print(f"ORDER={ORDER}: one implementation after the same one in at most {_max_repeat(orders)} "
          f"trials of {GROUP}")
    fns = {f"k{i}": (lambda i=i: 0.03 + 0.001 * i) for i in range(11)}
    records = run_trials(fns, {k: 5 for k in fns}, _DryTimer(), 24, "dry")
    assert len(records) == 24 * 11 and {r["place"] for r in records} == set(range(11))
    print("\n".join(summary(records, list(fns)) + after_effects(records)))


def _reader(x: torch.Tensor, policy: str):
    """A read of x with one eviction policy (evict_last, evict_first or '' for the default), one
    partial sum a program written: whether a read's L2 priority leaves x in the L2 across flushes.
    The timer's read kernel with a policy added, kept apart: a kernel named like its `_flush_l2`
    would mark a flush in the CUPTI timeline (rooflab.timing.device_segments) and split the call."""
    import triton
    import triton.language as tl

    @triton.jit
    def _read(ptr, partial_ptr, n, BLOCK: tl.constexpr, POLICY: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(ptr + offs, mask=offs < n, other=0, eviction_policy=POLICY)
        tl.store(partial_ptr + tl.program_id(0), tl.sum(v.to(tl.float32), 0))

    flat = x.reshape(-1)
    block = 4096
    grid = (triton.cdiv(flat.numel(), block),)
    partial = torch.empty(grid[0], device=x.device, dtype=torch.float32)
    return lambda: _read[grid](flat, partial, flat.numel(), BLOCK=block, POLICY=policy, num_warps=8)


def _fill_then_read(timer) -> None:
    """FLUSH=fillread: the timer's flush becomes a zero fill of its buffer (`_flush_fill`, a Triton
    kernel) followed by its read, so every call starts after the same writes and the same read;
    the fill, which lands in the call before's CUPTI segment, is left out of it."""
    import triton
    import triton.language as tl
    from rooflab import timing

    @triton.jit
    def _flush_fill(ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.int32), mask=offs < n)

    read, buf = timer.flush, timer._buffer
    grid = (triton.cdiv(buf.numel(), 8192),)

    def flush() -> None:
        _flush_fill[grid](buf, buf.numel(), BLOCK=8192, num_warps=8)
        read()

    segments = timing.device_segments
    timer.flush = flush
    timing.device_segments = lambda events, n: segments([e for e in events if "_flush_fill" not in e[2]], n)


def _stand_in(name: str, x: torch.Tensor):
    """A PROBE_EXTRA stand-in; fill3's and ones3's buffers are made here, only when asked for."""
    if name in ("lastread", "firstread", "plainread"):   # a read of x with that L2 priority
        return _reader(x, {"lastread": "evict_last", "firstread": "evict_first", "plainread": ""}[name])
    if name == "ones3":                 # fill3 with ones: the writes without the zeros
        buf = torch.empty_like(x)
        return lambda: [buf.fill_(1.0) for _ in range(3)][-1]
    if name == "zeros":                 # a fresh output, zero-filled
        return lambda: torch.zeros_like(x)
    if name == "zeros3":                # three, as seed_multipass writes
        return lambda: [torch.zeros_like(x) for _ in range(3)][-1]
    if name == "fill3":                 # one buffer, held for the whole run
        buf = torch.empty_like(x)
        return lambda: [buf.zero_() for _ in range(3)][-1]
    raise ValueError(f"PROBE_EXTRA: unknown stand-in {name!r} (zeros, zeros3, fill3, ones3, lastread, "
                     "firstread, plainread)")


def measure(shape_dtype, monitor, record) -> list[dict]:
    from rooflab import bench
    from rooflab.studies import softmax as study
    from sweep_vs_probe import bench_config, load_config
    rows, cols, dtype = shape_dtype
    shape = {"rows": rows, "cols": cols}
    cfg = bench_config()
    sweep = bench.Sweep(study=study, gpu="probe", shapes=[shape], dtypes=[dtype], impls=[], ceilings={},
                        bench=cfg, monitor=monitor, steady_mhz=record["warm_up"]["steady_sm_mhz"])
    inputs = study.make_inputs(shape, getattr(torch, dtype), "cuda")
    ref = study.reference(inputs)
    factories, fns = study.impls(), {}
    for impl in load_config()["softmax"]["impls"]:
        try:
            fn, out = bench._first_call(sweep, factories[impl], inputs)
        except Exception as exc:       # unsupported here, or failing: the sweep records it, the probe goes on
            print(f"  {impl}: left out ({type(exc).__name__}: {str(exc)[:120]})")
            continue
        rel = study.check(out, ref, inputs)[1]
        del out
        if not rel <= study.tolerance(dtype):
            print(f"  {impl}: incorrect (rel_err {rel:.3g}), left out")
            continue
        fns[impl] = fn
    del ref
    for name in filter(None, EXTRA.split(",")):
        fns[name] = _stand_in(name, inputs["x"])
    if RESET == "call":
        reset_before_flush(sweep.timer)
    if FLUSH == "fillread":
        _fill_then_read(sweep.timer)
    estimates = bench._warm_up(fns, cfg, sweep.timer, lambda impl, exc: print(f"  {impl}: warm-up failed: {exc}"))
    calls = bench._calls(cfg, estimates)
    label = f"{rows}x{cols} {dtype}"
    records = run_trials(fns, calls, sweep.timer, TRIALS, label, lambda: monitor.read().get("sm_mhz"), monitor.read)
    return [{"shape": label, **r} for r in records], list(fns)


def main() -> None:
    if os.environ.get("PROBE_DRYRUN") == "1":
        return dry_run()
    from rooflab.gpustate import start_job
    monitor, record = start_job()
    print(f"warm-up {record['warm_up']['seconds']} s, steady SM clock {record['warm_up']['steady_sm_mhz']} MHz")
    out = []
    for shape_dtype in SHAPES:
        records, impls = measure(shape_dtype, monitor, record)
        out += records
        print(f"{records[0]['shape']}: {TRIALS} trials, us (cupti median of each trial's calls)", flush=True)
        print("\n".join(summary(records, impls) + after_effects(records)), flush=True)
    os.makedirs(OUT, exist_ok=True)
    write_csv(os.path.join(OUT, "trial_order.csv"), out)


if __name__ == "__main__":
    main()
