"""Probe: burst-to-burst spread of the copy ceiling of 128 MiB moved, beside softmax at that size.

probes/copy_alloc.py found a copy's median over 30 calls 4.22-4.44 TB/s on the same buffers from one
pass to the next, and the calibrate job's copy of 128 MiB moved read 4.46 and 4.21 TB/s in two
runs, while fp32 softmax rows of 134 MB read up to 1.09x the 2 GiB copy in the sweeps. This probe
alternates bursts of BURST calls (CUPTI kernel time, the L2 flushed by a read before each call, as
the calibrate job's re-timing, rooflab.ceilings._kernel_ms): the calibrate job's fastest copy of
128 MiB moved (rooflab.ceilings._fastest over copy_candidates), torch's copy_, ours and Liger at
4096x4096 fp32; CYCLES cycles of the four, the order shuffled in each. It prints each burst's
median: whether the copies and the softmaxes move together from burst to burst (a state of the GPU
at the time) or apart, and how the best burst of the copy compares with the softmaxes'.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/ceiling_bursts.py
Writes $OUT/ceiling_bursts.csv and prints TB/s per burst last.
"""
from __future__ import annotations

import os
import random
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402
from rooflab import ceilings  # noqa: E402
from probe_csv import write_csv  # noqa: E402  (probes/, the script's directory)

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
BURST, CYCLES = 15, 10


def main():
    src = torch.rand(2**24, device="cuda")            # 64 MiB fp32 each way: 128 MiB moved
    dst = torch.empty_like(src)
    copies = ceilings.copy_candidates(dst, src)
    best = ceilings._fastest(copies)
    x = torch.randn(4096, 4096, device="cuda")
    torch.testing.assert_close(fs.softmax(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    cands = {f"copy {best}": copies[best], "torch copy_": copies["torch copy_"],
             "ours 4096x4096": lambda: fs.softmax(x)}
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        cands["liger 4096x4096"] = lambda: LigerSoftmaxFunction.apply(x)
    except ImportError:
        pass
    moved = 2 * src.numel() * 4                        # the same bytes as a 4096x4096 fp32 softmax
    timer = ceilings._timer()
    for fn in cands.values():
        fn()
    rows = []
    for cycle in range(CYCLES):
        names = list(cands)
        random.shuffle(names)
        for name in names:
            med = statistics.median(timer.cupti(cands[name], BURST))
            rows.append({"cycle": cycle, "candidate": name, "ms": round(med, 6),
                         "tbps": round(moved / med / 1e9, 3)})
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "ceiling_bursts.csv")
    write_csv(path, rows)
    print(f"\nTB/s per burst of {BURST} calls, cycles 0..{CYCLES - 1} -> {path}")
    for name in cands:
        got = [r["tbps"] for r in rows if r["candidate"] == name]
        print(f"{name:40} " + " ".join(f"{v:5.2f}" for v in got)
              + f" | median {statistics.median(got):.3f} max {max(got):.3f}")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("ceiling_bursts needs a CUDA GPU")
    main()
