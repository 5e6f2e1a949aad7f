"""Probe: does a copy's bandwidth at 128 MiB moved depend on which buffers it moves?

The calibrate job's copy of 128 MiB moved read 4.46 TB/s in the run at fc0c291 and 4.21 in the run
at da7f2b4 (the same candidates, ranked the same way), and in the da7f2b4 run `ours` at 8192x4096
fp32 took 63.5 us where the same kernel forced (`ours_row`) took 61.2, intervals apart; softmax
rows of that size read up to 1.09x the 2 GiB copy (the above_ceiling flags). This probe times, in
one profiler session and shuffled rounds (softmax_small.time_all, CUPTI kernel time, the L2
flushed by a read), the same copy kernels on PAIRS separately allocated (src, dst) pairs of 64 MiB
each, and ours and Liger at 4096x4096 fp32 on PAIRS separately allocated inputs; all of it twice
(`pass` 1 and 2). If a buffer pair's rate repeats from pass to pass while pairs differ, the rate
belongs to the allocation, and a ceiling wants the best of several.

Measured on an H200 after the run at da7f2b4, TB/s, pass 1 / pass 2: the 1024 x 8-warp copy on six
pairs 4.44 / 4.22, 4.42 / 4.42, 4.42 / 4.40, 4.41 / 4.40, 4.43 / 4.44, 4.30 / 4.43; torch's copy_
4.16-4.40; ours at 4096x4096 on six inputs 4.20-4.34, Liger 4.20-4.35. A pair's rate does not repeat
from pass to pass (pair 0: 4.44 then 4.22), so the spread is the timing's from one burst of calls
to the next, not the allocation's.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/copy_alloc.py
Writes $OUT/copy_alloc.csv and prints TB/s per candidate and pass last.
"""
from __future__ import annotations

import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402
from rooflab.ceilings import copy_candidates  # noqa: E402
from rooflab.timing import CudaTimer  # noqa: E402
from probe_csv import write_csv  # noqa: E402  (probes/, the script's directory)
from softmax_small import time_all  # noqa: E402

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
PAIRS = 6
COPIES = ("torch copy_", "triton copy BLOCK=1024 warps=8", "triton copy BLOCK=1024 warps=4")


def candidates() -> dict:
    """{name: (callable, bytes moved, address of the buffer read)}; the callables hold their buffers."""
    out = {}
    for i in range(PAIRS):
        src = torch.rand(2**24, device="cuda")            # 64 MiB fp32 each way: 128 MiB moved
        dst = torch.empty_like(src)
        fns = copy_candidates(dst, src)
        for name in COPIES:
            out[f"{name} pair{i}"] = (fns[name], 2 * src.numel() * 4, src.data_ptr())
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
    except ImportError:
        LigerSoftmaxFunction = None
    for i in range(PAIRS):
        x = torch.randn(4096, 4096, device="cuda")
        torch.testing.assert_close(fs.softmax(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
        moved = 2 * x.numel() * 4
        out[f"ours 4096x4096 x{i}"] = (lambda x=x: fs.softmax(x), moved, x.data_ptr())
        if LigerSoftmaxFunction is not None:
            out[f"liger 4096x4096 x{i}"] = (lambda x=x: LigerSoftmaxFunction.apply(x), moved, x.data_ptr())
    return out


def main():
    timer = CudaTimer()
    cands = candidates()
    for fn, _, _ in cands.values():
        fn()
    torch.cuda.synchronize()
    rows = []
    for rep in (1, 2):
        us = time_all({n: fn for n, (fn, _, _) in cands.items()}, timer)
        for name, (_, moved, ptr) in cands.items():
            med = statistics.median(us[name])
            rows.append({"pass": rep, "candidate": name, "us": round(med, 3),
                         "tbps": round(moved / med / 1e6, 3), "src_mod_2mib": ptr % (2 << 20),
                         "src_ptr": ptr})
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "copy_alloc.csv")
    write_csv(path, rows)
    print(f"\nTB/s (bytes read + written over CUPTI kernel time), pass 1 / pass 2 -> {path}")
    for name in cands:
        a, b = (next(r["tbps"] for r in rows if r["pass"] == p and r["candidate"] == name) for p in (1, 2))
        print(f"{name:45} {a:6.3f} {b:6.3f}")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("copy_alloc needs a CUDA GPU")
    main()
