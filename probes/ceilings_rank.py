"""Probe: the calibrate job's CUPTI-ranked copies (rooflab.ceilings.sized_copies, `_fastest`) at a
few sizes, beside the winner of each ranking, on a 512 MiB buffer pair. A check that the ranking
runs on the GPU and what it picks; prints a row per size.

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
