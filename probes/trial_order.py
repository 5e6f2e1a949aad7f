"""Probe: does a kernel's time in the sweep's trials follow its place in the trial, or the kernel run
just before it?

The sweep times a case's implementations together in `trials` rounds (six in the full profile), each
in a shuffled order seeded by the bench seed and the case (rooflab.bench._trial_order), an
implementation's `events` calls then its `cupti` calls. A trial's order moves a kernel's median by
up to 3.5% (probes/sweep_vs_probe.py DIAG=seeds and DIAG=launch), and on two H100 runs in a row
(c7023ae and cb24611, bench seed 0) `ours` at 16384x1024 fp32 took 39.0-39.7 us with intervals
2.2-2.9 us wide, where the same row kernel forced took 37.4-37.9 (intervals under 0.5 us wide) and
torch.compile 37.1-37.4: the one fp32 softmax loss of either run. Whether a counterbalanced order (each implementation at
each place in turn) would remove that luck, or only more trials would, depends on which of the two
carries it. Here the sweep's implementations of a case are built, checked against float64 and warmed
up as the sweep does (rooflab.bench._warm_up and _calls: the same calls a trial), then timed in
TRIALS shuffled trials with the sweep's events-then-cupti calls, and every implementation's cupti
median of every trial is kept with its place, the implementation before it and the SM clock at the
trial's start. Printed per implementation: the median over all trials, by third of the trial
(first, middle, last places), the predecessors it ran slowest and fastest after (at least
MIN_AFTER trials each), and the range of medians over consecutive groups of six trials (what six
trials of a sweep row can land on).

    PYTHONUNBUFFERED=1 TRIALS=60 SHAPES=16384x1024:float32,8192x4096:float32 python3 probes/trial_order.py

PROBE_DRYRUN=1 runs the trial loop and the summary on the CPU with stand-in kernels whose time
grows with their place (no GPU, no Triton).
Writes $OUT/trial_order.csv (one line a trial and implementation) and prints the summary last.
"""
from __future__ import annotations

import os
import random
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe_csv import write_csv  # noqa: E402

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
TRIALS = int(os.environ.get("TRIALS", "60"))
SHAPES = [(*(int(v) for v in dims.split("x")), dtype)          # ROWSxCOLS:dtype
          for dims, dtype in (s.split(":") for s in os.environ.get(
              "SHAPES", "16384x1024:float32,8192x4096:float32").split(","))]
MIN_AFTER = 3          # trials behind a predecessor's median
GROUP = 6              # the full profile's trials a row


def run_trials(fns: dict, calls: dict, timer, trials: int, seed: str, clock=None) -> list[dict]:
    """One record a trial and implementation: its place, the implementation before it, its cupti
    median (us) and the SM clock at the trial's start (clock(): MHz, or None)."""
    records = []
    for trial in range(trials):
        order = list(fns)
        random.Random(f"{seed}|{trial}").shuffle(order)
        mhz = clock() if clock else None
        before = "-"
        for place, impl in enumerate(order):
            timer.sample(fns[impl], calls[impl], "events")               # as a sweep trial: events, then cupti
            us = statistics.median(timer.sample(fns[impl], calls[impl], "cupti")) * 1e3
            records.append({"trial": trial, "place": place, "impl": impl, "before": before,
                            "us": round(us, 4), "sm_mhz": mhz})
            before = impl
    return records


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


def dry_run() -> None:
    fns = {f"k{i}": (lambda i=i: 0.03 + 0.001 * i) for i in range(11)}
    records = run_trials(fns, {k: 5 for k in fns}, _DryTimer(), 24, "dry")
    assert len(records) == 24 * 11 and {r["place"] for r in records} == set(range(11))
    print("\n".join(summary(records, list(fns))))


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
    estimates = bench._warm_up(fns, cfg, sweep.timer, lambda impl, exc: print(f"  {impl}: warm-up failed: {exc}"))
    calls = bench._calls(cfg, estimates)
    label = f"{rows}x{cols} {dtype}"
    records = run_trials(fns, calls, sweep.timer, TRIALS, label, lambda: monitor.read().get("sm_mhz"))
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
        print("\n".join(summary(records, impls)), flush=True)
    os.makedirs(OUT, exist_ok=True)
    write_csv(os.path.join(OUT, "trial_order.csv"), out)


if __name__ == "__main__":
    main()
