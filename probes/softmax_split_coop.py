"""Probe: what split's launch and exchange cost by themselves, against the looped kernel doing the
same per-program work.

The question. With one segment a row (n_segs = 1, the 4-tile table setting at 32768 columns in 16
bits) split does exactly what the looped kernel does, a row a program read from HBM, read again
from L2 and written, yet it was measured at 0.67 of the copy where looped reached 0.86
(docs/kernels/softmax.md, the exchange before the tagged words). What is left of that
gap with the tagged-word exchange, and which part of it is the cooperative launch (the driver's
co-residency guarantee, `launch_cooperative_grid`) and which the exchange (a tag read, a publish
and a gather a round)? At the few-long-row shapes the same switches show what the launch and the
exchange cost split where it ships.

Variants per shape, on the shipped table setting (4-tile segments of 16 KB tiles, 8 warps, up to
4 programs an SM; the kernel is softmax_split_lanes's with the shipped phase 1, the shipped fused
split on aligned rows):
  coop+x     cooperative launch, exchange (split as shipped; checked)
  plain+x    the same grid launched without the cooperative flag (every program is resident on an
             otherwise idle GPU at these grids; the gather's spin is bounded; checked)
  coop-x     cooperative, no exchange: each segment normalised by its own (max, sum) (timing only)
  plain-x    neither (timing only)
beside `ours` (fs.softmax), `looped` (the looped strategy forced) and a copy of the same bytes;
checked variants against float64 on a hostile input first (softmax_small.long_row_probe), then
CUPTI kernel time with the L2 flushed, shuffled rounds.

Measured (H100 80GB HBM3 GPU-8994f584, at 2eaf7a6; CUPTI kernel time, L2 flushed, us, and the
copy's time over the variant's; checked variants matched float64 first):

| shape | copy | ours | looped | coop+x | plain+x | coop-x | plain-x |
|---|---|---|---|---|---|---|---|
| 4096x32768 fp16 | 171.7 | 183.2 (0.94) | 184.7 (0.93) | 196.3 (0.87) | 195.2 (0.88) | 191.4 (0.90) | 192.4 (0.89) |
| 2048x32768 fp16 | 81.1 | 92.3 (0.88) | 92.2 (0.88) | 97.6 (0.83) | 97.6 (0.83) | 95.4 (0.85) | 95.4 (0.85) |
| 16x4194304 fp16 | 81.3 | 107.6 (0.76) | 1015.6 | 107.3 (0.76) | 104.6 (0.78) | 95.3 (0.85) | 95.6 (0.85) |
| 64x1048576 fp16 | 81.3 | 99.3 (0.82) | 286.6 | 101.9 (0.80) | 100.0 (0.81) | 95.4 (0.85) | 95.5 (0.85) |
| 256x262144 fp16 | 81.2 | 94.7 (0.86) | 132.7 | 99.3 (0.82) | 98.8 (0.82) | 95.3 (0.85) | 95.2 (0.85) |
| 16x4194304 fp32 | 170.8 | 222.6 (0.77) | 1126.2 | 223.7 (0.76) | 221.5 (0.77) | 189.8 (0.90) | 189.4 (0.90) |

The cooperative launch costs nothing (plain and cooperative within 2.5% at every shape, either
way). The exchange costs split 2-3% at one segment a row and 5-17% at the few-long-row shapes
(16x4194304 fp32 223.7 against 189.8 us): there the wait for the row, once a round, is most of the
gap to the copy. But with no exchange at all (wrong results) the same rounds of segments read,
re-read from L2 and write at only 0.85 of the copy in 16 bits (0.90 in fp32), and at one segment a
row split's loop runs 3-6% behind looped's doing the same work: an exchange hidden completely
would still leave the 16-bit few-long-row shapes under 90% of the copy on this GPU, whose copy is
1.4x slower than the H200's, where the same shapes sit lower still (0.71-0.83 in the committed
run).

    PYTHONUNBUFFERED=1 python3 probes/softmax_split_coop.py      (a GPU; $OUT/softmax_split_coop.csv)
"""
from __future__ import annotations

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402
from softmax_split_lanes import _split_lanes_kernel  # noqa: E402
from softmax_split_slots import SHIPPED_SETTINGS, TOL, launch_split  # noqa: E402

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "90"))
SHAPES = [(4096, 32768, torch.float16), (2048, 32768, torch.float16), (16, 4194304, torch.float16),
          (64, 1048576, torch.float16), (256, 262144, torch.float16), (16, 4194304, torch.float32)]


def split_coop(x: torch.Tensor, out: torch.Tensor, coop: bool, exchange: bool):
    """One launch on the table setting's grid (`launch_split`): rounds of rows, every segment of a
    round resident."""
    per_sm, seg_tiles, warps = SHIPPED_SETTINGS["table"]
    return launch_split(_split_lanes_kernel, x, out, per_sm, seg_tiles, warps, coop=coop, LANE_STATS=False,
                        EXCHANGE=exchange)


def checked_variants(x, out, sms):
    looped = fs.STRATEGIES["looped"]
    return {"ours": lambda: fs.softmax(x), "looped": lambda: looped.run(x, out),
            "coop+x": lambda: split_coop(x, out, True, True), "plain+x": lambda: split_coop(x, out, False, True)}


def timing_only(x, out, sms):
    return {"coop-x": lambda: split_coop(x, out, True, False), "plain-x": lambda: split_coop(x, out, False, False)}


def main() -> None:
    from softmax_small import long_row_probe
    long_row_probe(SHAPES, checked_variants, "softmax_split_coop.csv", BUDGET_S, TOL, extra=timing_only)


if __name__ == "__main__":
    main()
