"""Probe: 16-bit inputs of at least 256 MiB with rows of up to 4096 columns, dispatched to looped.

The question. The four full runs of the exp2 kernels timed the looped kernel (forced) 4-5% ahead
of the row kernel at 32768x4096 in fp16 and bf16 (122.6-123.4 against 128.1-129.2 us), where
the dispatcher ran row and tied Liger; kernels.fused_softmax now sends such inputs to looped, as
it did fp32 ones (LOOPED_MIN_BYTES). This probe times, through softmax() as shipped (`ours`),
that choice at the grid's shape and at held-out ones on both sides of the 256 MiB line
(16384x4096 and 65536x2048 under or at it, 65536x4096, 131072x2048 and 49152x3072 over it),
beside the row and looped kernels forced on their launch table, Liger, torch and a copy of the
same bytes. Every variant is checked first against a float64 softmax of a hostile input (-inf
entries, a row of -inf, a huge entry) with its output poisoned.

Measured at c33931d on an H200 (GPU-46f36d93), us, row / looped forced, fp16 and bf16: 32768x4096
126.4 / 123.1, 128.4 / 123.0; 65536x4096 258.5 / 246.1, 258.3 / 245.9; but 65536x2048 123.2 /
131.6, 123.9 / 135.6; 131072x2048 249.8 / 263.6, 249.6 / 270.4; 49152x3072 141.9 / 151.4, 142.9
/ 161.1 (Liger 143.1-154.3). Looped leads only at 4096 columns, so 16-bit rows go looped from
LOOPED_LARGE_MIN_COLS_16BIT (3073) columns, fp32 from any up to 4096.

    PYTHONUNBUFFERED=1 python3 probes/softmax_looped16.py
Writes $OUT/softmax_looped16.csv; prints each shape's variants, fastest first, with copy time /
variant time. Kernel time: CUPTI, L2 flushed (softmax_small's helpers).
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmax_small import BUDGET_S, fs, long_row_probe, ours_and_peers  # noqa: E402

SHAPES = [(r, c, d) for r, c in ((32768, 4096), (16384, 4096), (65536, 4096), (65536, 2048),
                                 (131072, 2048), (49152, 3072))
          for d in (torch.float16, torch.bfloat16)]


def variants(x: torch.Tensor, out: torch.Tensor, sms: int) -> dict:
    rows, cols = x.shape
    fns = ours_and_peers(x)
    print(f"# {rows}x{cols} {str(x.dtype)[6:]}: ours dispatches to {fs.choose(rows, cols, x.dtype, sms)}")
    for name in ("row", "looped"):
        cfg = fs.config(name, cols, x.dtype, rows, sms)
        fns[f"ours_{name}"] = lambda name=name, cfg=cfg: fs.STRATEGIES[name].run(x, out, cfg)
    return fns


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("softmax_looped16 needs a CUDA GPU")
    long_row_probe(SHAPES, variants, "softmax_looped16.csv", BUDGET_S)
