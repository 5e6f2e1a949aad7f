"""Probe: split's rows dealt out evenly over its rounds, against rounds filled but the last.

The question. The fused split runs rows in rounds of capacity // segments rows (every segment of
a round resident), so the last round holds what is left: 64x1048576 fp16 on the rounds setting
(64 two-tile segments a row, 5 programs an SM: 10 rows a round) runs six rounds of 10 rows and
one of 4, on 256 of the 660 resident programs. The same seven rounds of 9-10 rows each keep every
round near full. If a round's time is its bytes plus a fixed cost, the two tie; if a thin round
reads below the machine's bandwidth, the even deal is faster.

The variants, on aligned rows (probes/softmax_split_slots.py's kernel, no lookahead): the rounds
setting (2-tile segments, 4 warps, up to 6 an SM) and the table's (4-tile segments, 8 warps, 4 an
SM), each with the shipped grid and with the even deal (`_bal`), beside `ours`.

Measured at 858666a (H200 GPU-ccc68a72, CUPTI medians, share of the copy, shipped grid / even
deal): rounds setting 256x262144 fp16 0.80 / 0.79, 512x151936 bf16 0.76 / 0.77, fp32 0.89 / 0.90,
1024x131072 fp16 0.86 / 0.83, fp32 0.92 / 0.92, 64x1048576 fp16 0.73 / 0.73 (its 7 rounds of at
most 10 rows keep their last round of 4 either way); the table's setting 0.00-0.03 apart the same
way. No gain beyond a trial's spread and one loss: not kept. Where the even deal does change the
grid, its rows a round are fewer, so what it saves in the thin last round it pays in every other.

    PYTHONUNBUFFERED=1 python3 probes/softmax_split_balance.py      (a GPU; $OUT/softmax_split_balance.csv)
"""
from __future__ import annotations

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402
from softmax_split_slots import SHIPPED_SETTINGS, TOL, _split_slots_kernel, launch_split  # noqa: E402

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "100"))
SHAPES = [(64, 1048576, torch.float16), (64, 1048576, torch.float32), (256, 262144, torch.float16),
          (256, 262144, torch.float32), (512, 151936, torch.bfloat16), (512, 151936, torch.float32),
          (1024, 131072, torch.float16), (1024, 131072, torch.float32), (16, 4194304, torch.float16),
          (16, 4194304, torch.float32), (64, 1048576, torch.bfloat16)]
SETTINGS = SHIPPED_SETTINGS


def variants(x, out, sms):
    fns = {"ours": lambda: fs.softmax(x)}
    for name, (per_sm, seg_tiles, warps) in SETTINGS.items():
        for balance in (False, True):
            fns[name + ("_bal" if balance else "")] = (
                lambda a=(per_sm, seg_tiles, warps, balance): launch_split(
                    _split_slots_kernel, x, out, *a, LOOKAHEAD=False))
    return fns


def main() -> None:
    from softmax_small import long_row_probe
    long_row_probe(SHAPES, variants, "softmax_split_balance.csv", BUDGET_S, TOL)


if __name__ == "__main__":
    main()
