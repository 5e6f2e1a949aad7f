"""The rows strategy's two kernels side by side: `_rows_static_kernel` (contiguous rows, the row length
compiled in; `ROWS_STATIC_MAX_BLOCK`) against `_rows_kernel` (length and strides as arguments), the
same table tile, at rows in blocks of 2 to 512 and one block past the limit, beside softmax as
shipped, torch.softmax and a copy of the same bytes. Each variant is checked against float64 on a
hostile input with its output poisoned, then timed (CUPTI, L2 flushed, shuffled rounds):
probes/softmax_small.long_row_probe.

    SHAPES=65536x350:float32,1048576x7:float32 PROBE_BUDGET_S=60 python3 probes/softmax_rows_static.py
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmax_small import fs, long_row_probe  # noqa: E402

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "60"))
SHAPES = [(*(int(v) for v in dims.split("x")), getattr(torch, dtype))          # ROWSxCOLS:dtype
          for dims, dtype in (s.split(":") for s in os.environ.get(
              "SHAPES", "65536x350:float32,65536x350:bfloat16,262144x33:float32,200000x65:bfloat16,"
                        "200000x129:float32,131072x200:float16,1048576x7:float32,1048576x2:bfloat16,"
                        "32768x1000:float16").split(","))]


def launches(x: torch.Tensor, out: torch.Tensor) -> dict:
    """{"static": launch, "dynamic": launch} of the rows table's tile for x: `_rows_args` with the
    static limit as shipped and with it at 0 (one entry where the shipped limit excludes x)."""
    rows, cols = x.shape
    cfg = fs.config("rows", cols, x.dtype, rows)
    found = {}
    shipped = fs.ROWS_STATIC_MAX_BLOCK
    for limit in (shipped, 0):
        fs.ROWS_STATIC_MAX_BLOCK = limit
        try:
            kernel, grid, args, options = fs._rows_args(x, out, cfg)
        finally:
            fs.ROWS_STATIC_MAX_BLOCK = shipped
        name = "static" if kernel is fs._rows_static_kernel else "dynamic"
        found.setdefault(name, (kernel, grid, args, options))
    return found


def variants(x: torch.Tensor, out: torch.Tensor, sms: int) -> dict:
    fns = {"ours": lambda: fs.softmax(x, -1), "torch": lambda: torch.softmax(x, -1)}
    for name, (kernel, grid, args, options) in launches(x, out).items():
        def run(kernel=kernel, grid=grid, args=args, options=options):
            kernel[grid](*args, **options)
            return out
        fns[f"rows {name}"] = run
    return fns


if __name__ == "__main__":
    long_row_probe(SHAPES, variants, "softmax_rows_static.csv", BUDGET_S)
