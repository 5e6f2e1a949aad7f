"""Probe: the copy ceiling and the softmax rows that beat it, timed before and after the GPU warm-up.

The calibrate job measures its ceilings without the sweeps' warm-up (rooflab.gpustate.warm_up:
dense matmuls until the SM clock is steady), straight after start-up; the sweeps measure after it.
In the fc0c291 run fp32 softmax rows of 134 MB (4096x4096, 16384x1024) ran 1.03-1.05x the
calibrate job's copy of their size, while probes without a warm-up timed the same kernels below
the copies. This probe times, in one process: a set of candidates right away (the SM clock read
before and after), then the GPU warm-up, then the same set again. The set: the calibrate job's
copy candidates moving 128 MiB (rooflab.ceilings.copy_candidates) and the same copies with
streaming stores (copy_ceiling.streaming_copies), the 2 GiB copy's winner, and at the two flagged
shapes ours, Liger and one-program-a-row copies with and without streaming stores; every call's kernel time from CUPTI with the L2 flushed
by a read (rooflab.timing.CudaTimer), candidates in shuffled rounds (softmax_small.time_all).

Measured on an H200 at da7f2b4, TB/s, cold / warm (SM clock 1980 MHz cold, 1575 steady under the
warm-up): the calibrate job's 128 MiB copies 4.12-4.43 / 4.21-4.42, with streaming stores 4.15-4.23 /
4.07-4.34, the 2 GiB copy 4.31 / 4.31; at 4096x4096 fp32 ours 4.21 / 4.28, Liger 4.30 / 4.25,
one-program-a-row copies 4.20-4.26 / 4.17-4.28; at 16384x1024 ours 4.36 / 4.36, the row copies
4.29-4.44 / 4.30-4.36. Neither the warm-up nor streaming stores move the copies beyond that spread.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/clock_ceiling.py
Writes $OUT/clock_ceiling.csv and prints TB/s per candidate, cold and warm, last.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402
from rooflab.ceilings import copy_candidates  # noqa: E402
from rooflab.gpustate import Monitor, warm_up  # noqa: E402
from rooflab.timing import CudaTimer  # noqa: E402
from probe_csv import write_csv  # noqa: E402  (probes/, the script's directory)
from softmax_small import time_all  # noqa: E402
from copy_ceiling import streaming_copies  # noqa: E402

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
SHAPES = [(4096, 4096, torch.float32), (16384, 1024, torch.float32)]


def candidates() -> dict:
    """{name: (callable, bytes moved)}: the copies of 128 MiB moved, a 2 GiB copy, the softmaxes."""
    out = {}
    src = torch.rand(2**24, device="cuda")            # 64 MiB fp32 each way: 128 MiB moved
    dst = torch.empty_like(src)
    for name, fn in {**copy_candidates(dst, src), **streaming_copies(dst, src)}.items():
        out[f"copy128 {name}"] = (fn, 2 * src.numel() * 4)
    big = torch.rand(2**28, device="cuda")            # 1 GiB each way: 2 GiB moved
    big_dst = torch.empty_like(big)
    for name, fn in copy_candidates(big_dst, big).items():
        if name in ("torch copy_", "triton copy BLOCK=1024 warps=8"):
            out[f"copy2g {name}"] = (fn, 2 * big.numel() * 4)
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
    except ImportError:
        LigerSoftmaxFunction = None
    for rows, cols, dtype in SHAPES:
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        moved = 2 * x.numel() * x.element_size()
        torch.testing.assert_close(fs.softmax(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
        out[f"ours {rows}x{cols}"] = (lambda x=x: fs.softmax(x), moved)
        y = torch.empty_like(x)
        for name, fn in streaming_copies(y, x).items():
            if name.startswith("rowcopy"):
                out[f"{name} {rows}x{cols}"] = (fn, moved)
        if LigerSoftmaxFunction is not None:
            out[f"liger {rows}x{cols}"] = (lambda x=x: LigerSoftmaxFunction.apply(x), moved)
    return out


def timed(timer: CudaTimer, cands: dict) -> dict:
    """{name: median ms}: every candidate's calls in shuffled rounds, one session (softmax_small's)."""
    return {name: statistics.median(us) / 1e3
            for name, us in time_all({n: fn for n, (fn, _) in cands.items()}, timer).items()}


def main():
    monitor = Monitor()
    t0 = time.perf_counter()
    idle = monitor.read().get("sm_mhz")
    timer = CudaTimer()
    cands = candidates()
    for fn, _ in cands.values():                      # compile outside the timing
        fn()
    torch.cuda.synchronize()
    rows = []
    for phase in ("cold", "warm"):
        if phase == "warm":
            record = warm_up(monitor)
            print(f"warm-up {record['seconds']} s, steady SM clock {record['steady_sm_mhz']} MHz", flush=True)
        before = monitor.read().get("sm_mhz")
        ms = timed(timer, cands)
        after = monitor.read().get("sm_mhz")
        print(f"{phase}: SM clock {before} -> {after} MHz (idle {idle}) at {time.perf_counter() - t0:.0f} s",
              flush=True)
        for name, (_, moved) in cands.items():
            rows.append({"phase": phase, "candidate": name, "ms": round(ms[name], 5),
                         "tbps": round(moved / ms[name] / 1e9, 3), "sm_mhz_before": before, "sm_mhz_after": after})
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "clock_ceiling.csv")
    write_csv(path, rows)
    print(f"\nTB/s (bytes read + written over CUPTI kernel time), cold then warm -> {path}")
    for name in cands:
        cold, warm = (next(r["tbps"] for r in rows if r["phase"] == p and r["candidate"] == name)
                      for p in ("cold", "warm"))
        print(f"{name:45} {cold:6.3f} {warm:6.3f}")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("clock_ceiling needs a CUDA GPU")
    main()
