"""The rows strategy's two kernels side by side: `_rows_static_kernel` (contiguous rows, the row length
compiled in; `ROWS_STATIC_MAX_BLOCK`) against `_rows_kernel` (length and strides as arguments), the
same table tile, at rows in blocks of 2 to 512 and one block past the limit, beside softmax as
shipped, torch.softmax, torch.compile (COMPILE=0 leaves it out) and a copy of the same bytes. At
rows of 1024 columns and more, the `row` strategy's (16384x1024 fp32 lost 0.95x to torch.compile in
the H100 run at c7023ae), the same question for one row a program: `row static` (`_row_static` here: the
length compiled in, 32-bit offsets, a plain store and a division) against `row` (the shipped
`_row_kernel` launch). Each variant is checked against float64 on a hostile input with its output
poisoned, then timed (CUPTI, L2 flushed, shuffled rounds): probes/softmax_small.long_row_probe.

    SHAPES=65536x350:float32,1048576x7:float32 PROBE_BUDGET_S=60 python3 probes/softmax_rows_static.py

Measured at cb24611 (H100 GPU-e513f42e, right after the H100 run of that commit; 1048576x2 left out,
kernel time, us, copy / variant): rows static against rows dynamic 56.54 (1.00) / 59.09 at 65536x350
fp32, 27.09 (0.98) / 29.87 at 65536x350 bf16, 24.42 / 25.07 at 262144x33 fp32, 22.35 / 22.53 at
200000x65 bf16, 65.98 / 67.01 at 200000x129 fp32, 31.30 / 31.92 at 131072x200 fp16, 18.10 / 18.64
at 1048576x7 fp32 (torch.compile 56.38, 31.62, 45.17, 50.40, 66.06, 38.02, 30.51). One block past
the limit: 32768x1000 fp16 rows dynamic 39.82, row static 39.89, row 40.32, ours 39.66; 16384x1024
fp32 39.38, 40.21, 40.64, ours 40.24. Row static against row: 8192x4096 fp32 83.31 / 83.95, bf16
40.08 / 40.64, 4096x2048 fp16 9.84 / 9.89. From 16384x1024 on, the ninth shape, torch.compile had
run eager torch (Dynamo's limit of eight graphs a function; the sweep's compiled peer, which raises
it, is the probes' since).
"""
from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmax_small import compiled_softmax, fs, long_row_probe  # noqa: E402
from softmax_inductor import _softmax_rows, _store_tile  # noqa: E402

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "60"))
SHAPES = [(*(int(v) for v in dims.split("x")), getattr(torch, dtype))          # ROWSxCOLS:dtype
          for dims, dtype in (s.split(":") for s in os.environ.get(
              "SHAPES", "65536x350:float32,65536x350:bfloat16,262144x33:float32,200000x65:bfloat16,"
                        "200000x129:float32,131072x200:float16,1048576x7:float32,1048576x2:bfloat16,"
                        "32768x1000:float16,16384x1024:float32,8192x4096:float32,4096x2048:float16,"
                        "8192x4096:bfloat16").split(","))]
COMPILE = os.environ.get("COMPILE", "1") == "1"


@triton.jit
def _row_static(out_ptr, x_ptr, N_COLS: tl.constexpr, BLOCK: tl.constexpr):
    """One contiguous row a program with its length compiled in: 32-bit offsets, a plain store and a
    division by the row's sum (a (1, BLOCK) tile of softmax_inductor's helpers)."""
    cols = tl.arange(0, BLOCK)[None, :]
    offs = tl.program_id(0) * N_COLS + cols
    mask = cols < N_COLS
    x = tl.load(x_ptr + offs, mask=mask, other=-float("inf")).to(tl.float32)
    _store_tile(out_ptr + offs, _softmax_rows(x, True), mask, False)


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
    rows, cols = x.shape
    fns = {"ours": lambda: fs.softmax(x, -1), "torch": lambda: torch.softmax(x, -1)}
    if COMPILE:
        compiled = compiled_softmax()
        fns["torch_compile"] = lambda: compiled(x)
    block = fs.pow2(cols)
    if block <= 2 * fs.ROWS_STATIC_MAX_BLOCK:                 # rows' blocks, and one past the limit
        for name, launch in launches(x, out).items():
            fns[f"rows {name}"] = lambda launch=launch: run(*launch, out)
    if block >= 2 * fs.ROWS_STATIC_MAX_BLOCK:                 # the row strategy's rows
        launch = fs._row_args(x, out, fs.config("row", cols, x.dtype))
        fns["row"] = lambda: run(*launch, out)
        fns["row static"] = lambda: run(_row_static, (rows,), (out, x, cols, fs.pow2(cols)),
                                        dict(num_warps=launch[3]["num_warps"], num_stages=1), out)
    return fns


def run(kernel, grid, args, options, out):
    kernel[grid](*args, **options)
    return out


if __name__ == "__main__":
    long_row_probe(SHAPES, variants, "softmax_rows_static.csv", BUDGET_S)
