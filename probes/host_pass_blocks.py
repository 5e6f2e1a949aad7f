"""Probe: the softmax sweep's host pass, block by block, with every implementation the sweep runs.

The question. In the run at e0c1a10 four of the 21 softmax cases under 8 MB had ours's plain-call
host time above 1.2x torch.softmax's (fp32 4096x7 14.2 against 8.3 us, 1.71x; bf16 1024x1024
1.40x, bf16 512x512 1.32x, fp16 4096x1 1.24x), the same shape's ratio differed between dtypes, and
torch's own median ranged 7.3-15.0 us over the cases; with only ours and torch in the same blocks
on a quiet host (probes/host_rounds.py) none was above 1.2x, at most 1.18x. This probe runs the
sweep's own host pass (rooflab.bench.host_pass: each case's ten implementations, each timed in
blocks of up to 15 calls, six trials in shuffled orders, before any CUPTI session) over those 21
cases with config/config.yaml's bench settings, and logs every block in order: the
implementation, its calls' median, first and last, and the implementation timed before it. Is a
slow median ours's in every block of a case (something in its calls), or in some blocks (the host),
and do slow blocks follow particular implementations?

    PYTHONUNBUFFERED=1 python3 probes/host_pass_blocks.py
Writes $OUT/host_pass_blocks.csv (one row per block) and prints, per case, the host medians of ours
and torch and their ratio, each trial's block medians of the two, and last, over all blocks of
ours and torch, the median block time after each preceding implementation.

Measured at c712a76 (GPU-454fd514's host): ours over torch 1.04-1.27x, median 1.16x, 6 of 21 above
1.2x (fp32 256x256 1.27x, fp16 512x512 1.23x, bf16 4096x1 1.23x, bf16 4096x7 1.22x, fp16 1024x1024
1.21x, bf16 1024x128 1.20x), none of them the run's four; within a case ours's blocks were slower
than torch's in nearly every pair (fp32 256x256: ours 16.3-18.3, torch 12.8-14.2 us), and a case's
blocks sat together near 9 us (bf16 256x256, 1024x1000, 1024x1024 and 1048576x1) or near 11-15.
Over all blocks, the median after each preceding implementation was 13.0-14.5 us for ours and
11.6-12.4 for torch: no implementation before a block slows it. So ours's cost over torch is in its
own calls (about 2 us a call on that host), and which cases cross 1.2x moves with the host's state.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
import types

import torch
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from host_rounds import WallTimer  # noqa: E402
from probe_csv import write_csv  # noqa: E402

from rooflab import bench  # noqa: E402
from rooflab.studies import softmax as study  # noqa: E402
from rooflab.timing import CudaTimer  # noqa: E402

DRY = bool(os.environ.get("PROBE_DRYRUN"))      # CPU interpreter, two small cases, a wall-clock timer
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "150"))
SHAPES = [(256, 256), (512, 512), (1024, 128), (4096, 1), (4096, 7), (1024, 1000), (1024, 1024),
          (1048576, 1)]
DTYPES = ["float32", "float16", "bfloat16"]
if DRY:
    from rooflab import interpreter
    interpreter.enable()
    SHAPES, DTYPES = [(4, 7), (3, 128)], ["float32"]


class Tagged:
    """An implementation's callable with its name, so the timer can log whose block it times."""

    def __init__(self, name, fn):
        self.name, self.fn = name, fn

    def __call__(self):
        return self.fn()


class BlockLog:
    """Wraps the sweep's timer: every host block is logged in order (impl, samples)."""

    def __init__(self, timer):
        self.timer, self.blocks = timer, []

    def __getattr__(self, name):
        return getattr(self.timer, name)

    def sample(self, fn, n, mode):
        out = self.timer.sample(fn, n, mode)
        if mode == "host":
            self.blocks.append((getattr(fn, "name", "?"), out))
        return out


def bench_config() -> tuple[bench.BenchConfig, list[str]]:
    """config/config.yaml's bench settings of the full profile, as the sweep rule merges them, and
    the softmax study's implementations."""
    with open(os.path.join(ROOT, "config", "config.yaml")) as f:
        cfg = yaml.safe_load(f)
    settings = {k: v for k, v in cfg["bench"].items() if k not in ("quick", "full")}
    settings.update(cfg["bench"]["full"])
    return bench.BenchConfig(**settings), list(cfg["softmax"]["impls"])


def main():
    start = time.perf_counter()
    cfg, impls = bench_config()
    factories = study.impls()
    tagged = {name: (lambda name: lambda inputs: Tagged(name, factories[name](inputs)))(name) for name in impls}
    view = types.SimpleNamespace(**{**vars(study), "impls": lambda: tagged})     # the study, its callables tagged
    if DRY:
        impls = ["ours", "ours_rows", "torch"]
    log = BlockLog(WallTimer() if DRY else CudaTimer(cfg.flush_mib))
    sweep = bench.Sweep(study=view, gpu="probe", shapes=[], dtypes=DTYPES, impls=impls, ceilings={},
                        bench=cfg, device="cpu" if DRY else "cuda", timer=log)
    rows, per_case = [], []
    for dtype in DTYPES:
        itemsize = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
        for r, c in SHAPES:
            if 2 * r * c * itemsize >= 8e6:
                continue
            if time.perf_counter() - start > BUDGET_S:
                print(f"# budget spent at {dtype} {r}x{c}")
                break
            first = len(log.blocks)
            host = bench.host_pass(sweep, {"rows": r, "cols": c}, dtype)
            blocks = log.blocks[first:]
            case_rows = []
            for i, (name, samples) in enumerate(blocks):
                us = [v * 1e3 for v in samples]
                case_rows.append({"dtype": dtype, "rows": r, "cols": c, "block": i, "impl": name,
                                  "after": blocks[i - 1][0] if i else "", "median_us": round(statistics.median(us), 3),
                                  "first_us": round(us[0], 3), "last_us": round(us[-1], 3), "calls": len(us)})
            rows += case_rows
            med = {k: statistics.median(v) * 1e3 for k, v in host.samples.items() if v}
            per_case.append((dtype, r, c, med, [(row["impl"], row["median_us"]) for row in case_rows]))
            print(f"# {dtype} {r}x{c} done at {time.perf_counter() - start:.0f} s", flush=True)
    write_csv(os.path.join(os.environ.get("OUT", "."), "host_pass_blocks.csv"), rows)
    for dtype, r, c, med, blocks in per_case:
        trail = " ".join(f"{n[0]}{m:.1f}" for n, m in blocks if n in ("ours", "torch"))
        if "ours" not in med or "torch" not in med:       # one of them failed in the host pass
            print(f"{dtype:>8} {r}x{c}: host medians {med} | blocks (o/t): {trail}")
            continue
        o, t = med["ours"], med["torch"]
        print(f"{dtype:>8} {r}x{c}: ours {o:.1f} torch {t:.1f} us, {o / t:.2f}x | blocks (o/t): {trail}")
    after = {}
    for row in rows:
        if row["impl"] in ("ours", "torch") and row["after"]:
            after.setdefault((row["impl"], row["after"]), []).append(row["median_us"])
    print("block median (us) of ours / torch by the implementation timed before it:")
    for prev in sorted({p for _, p in after}):
        cells = [f"{statistics.median(after[(i, prev)]):.1f} ({len(after[(i, prev)])})" if (i, prev) in after
                 else "-" for i in ("ours", "torch")]
        print(f"  after {prev:>15}: ours {cells[0]:>10}  torch {cells[1]:>10}")


if __name__ == "__main__":
    main()
