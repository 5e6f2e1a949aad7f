"""Probe: does a softmax kernel's time at 128 MiB depend on the buffers it reads and writes?

In the da7f2b4 run `ours` at 8192x4096 fp32 took 63.5 us (63.4 in the quick profile's re-run) and
the same kernel forced (`ours_row`, one config, one launch table) 61.2 (61.2), while at 16384x1024
fp32 `ours` took 28.8 and `ours_row` 29.9: the gap repeats from process to process, in both
directions. The two paths differ in the output's allocation (the plan's repeat call takes
torch.empty_like of the input, the strategy torch.empty) and in how the launch is made (the plan
replays Triton's compiled launcher with addresses). This probe times, at both shapes, on X inputs
of separate allocations: the plain call (`ours x<i>`), the forced strategy (`row x<i>`), the row
kernel into each of X preallocated outputs (`row x<i> out<j>`) and Liger, in one profiler session
in shuffled rounds (softmax_small.time_all: CUPTI kernel time, the L2 flushed by a read), twice.
If a given (input, output) pair's time repeats from pass to pass while pairs differ, the time
belongs to the buffers, not to the kernel or its launch.

Measured on an H200 at c5a658a, us, pass 1 / pass 2: at 8192x4096 every candidate took 64.0-65.0
(ours 64.0-64.7, row 64.4-64.7, row into each output 64.1-65.0, Liger 64.2-64.6); at 16384x1024
30.6-32.2 (ours 30.8-31.6, Liger 30.7-31.4). No input or output buffer moves the time beyond the
pass-to-pass spread, and the plain call runs the forced kernel's time. The sweeps' gap between the
two (63.5 against 61.2 us) and their faster times (61.1-63.5 at 8192x4096, 28.8-29.9 at 16384x1024)
belong to the sweep process, not to the buffers or the launch path; what in it is not yet found.

On an H100 (GPU-cf66de32, 5e79d2d), where the sweep's trials run this shape at about 37.4 or about
40.3 us by the GPU's state (probes/trial_order.py), every candidate at 16384x1024 took 40.1-40.9 us
in both passes (ours 40.34-40.59, row into each output 40.13-40.94, Liger 40.42-40.80): no buffer
is faster, and this probe's shuffled rounds, which hold no looped or split kernel, stay in the slow
state throughout.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/softmax_alloc.py
Writes $OUT/softmax_alloc.csv and prints us per candidate, pass 1 / pass 2, last.
"""
from __future__ import annotations

import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402
from rooflab.timing import CudaTimer  # noqa: E402
from probe_csv import write_csv  # noqa: E402  (probes/, the script's directory)
from softmax_small import time_all  # noqa: E402

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
SHAPES = [(8192, 4096), (16384, 1024)]
X = 3


def candidates(rows: int, cols: int) -> dict:
    """{name: callable} at one fp32 shape, every one checked against torch.softmax first."""
    row = fs.STRATEGIES["row"]
    xs = [torch.randn(rows, cols, device="cuda").mul_(3.0) for _ in range(X)]
    outs = [torch.empty(rows, cols, device="cuda") for _ in range(X)]
    out = {}
    for i, x in enumerate(xs):
        out[f"ours x{i}"] = lambda x=x: fs.softmax(x)
        out[f"row x{i}"] = lambda x=x: row.run(x)
        for j, o in enumerate(outs):
            out[f"row x{i} out{j}"] = lambda x=x, o=o: row.run(x, o)
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        for i, x in enumerate(xs):
            out[f"liger x{i}"] = lambda x=x: LigerSoftmaxFunction.apply(x)
    except ImportError:
        pass
    for name, fn in out.items():
        i = int(name.split(" x")[1][0])
        torch.testing.assert_close(fn(), torch.softmax(xs[i], -1), rtol=1e-5, atol=1e-6)
    return out


def main():
    timer = CudaTimer()
    rows_out = []
    for rows, cols in SHAPES:
        cands = candidates(rows, cols)
        print(f"{rows}x{cols} fp32 ({fs.choose(rows, cols, torch.float32, fs.num_sms(torch.device('cuda')))})"
              f", us, pass 1 / pass 2")
        got = {}
        for rep in (1, 2):
            for name, us in time_all(cands, timer).items():
                got.setdefault(name, []).append(statistics.median(us))
        for name, (a, b) in got.items():
            rows_out.append({"shape": f"{rows}x{cols}", "candidate": name, "us_pass1": round(a, 3),
                             "us_pass2": round(b, 3)})
            print(f"  {name:22} {a:7.2f} {b:7.2f}")
    os.makedirs(OUT, exist_ok=True)
    write_csv(os.path.join(OUT, "softmax_alloc.csv"), rows_out)


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("softmax_alloc needs a CUDA GPU")
    main()
