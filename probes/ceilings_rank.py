"""Probe: the calibrate job's CUPTI-ranked copies (rooflab.ceilings.sized_copies, `_fastest`) at a
few sizes, beside the winner of each ranking, on a 512 MiB buffer pair. A check that the ranking
runs on the GPU and what it picks; prints a row per size.

With the winner's value the fastest of three bursts' medians (rooflab.ceilings._kernel_ms), three
processes one after another on one H200 (53ec087), TB/s at 64 / 128 / 256 / 512 / 1024 MiB moved:
4.434 / 4.486 / 4.406 / 4.370 / 4.339; 4.415 / 4.486 / 4.358 / 4.369 / 4.329; 4.424 / 4.491 / 4.346 /
4.363 / 4.344. With one burst's median the full runs at fc0c291 and da7f2b4 had 4.46 and 4.21 at
128 MiB.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/ceilings_rank.py
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from rooflab import ceilings  # noqa: E402

t0 = time.perf_counter()
src = torch.rand(2**27, device="cuda")            # 512 MiB fp32
dst = torch.empty_like(src)
for name, value, unit, how in ceilings.sized_copies(dst, src, [64, 128, 256, 512, 1024]):
    print(f"{name:20} {value:6.3f} {unit}  {how}")
print(f"copy of the whole pair: {ceilings._fastest(ceilings.copy_candidates(dst, src))}")
print(f"# total {time.perf_counter() - t0:.0f} s")
