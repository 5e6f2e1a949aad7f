"""Probe: the register-resident softmax kernels' streaming stores (.cs) against plain stores.

kernels.fused_softmax stores the rows and row strategies' output with cache_modifier=".cs"; Liger and
inductor's kernels store with the default policy. At 16384x1024 fp32 torch.compile's kernel ran
29.5 us where every rows/row setting of ours took 30.2 or more (probes/softmax_small.py DIAG=mid),
and at the 134 MB shapes the two policies may differ in how much of the output is still in L2 when
the kernel ends. This probe builds a copy of the module with every `.cs` store made plain
(written to $OUT/fused_softmax_plain.py and imported from there: Triton compiles from source files)
and times `softmax` from each module, Liger, torch.compile and torch at shapes of 8-1074 MB.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/softmax_store_policy.py
Writes $OUT/softmax_store_policy.csv; prints us per shape and the plain module over the shipped one.
"""
from __future__ import annotations

import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels import fused_softmax as fs  # noqa: E402
from rooflab.timing import CudaTimer  # noqa: E402
import softmax_small as ss  # noqa: E402  (case, checked, record, within_budget, times_by_shape, write_csv)
from module_copy import import_source  # noqa: E402

OUT = ss.OUT
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "90"))
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
SHAPES = [(16384, 1024, F32), (4096, 4096, F32), (8192, 4096, F32), (65536, 128, F32), (32768, 1000, F32),
          (8192, 4096, F16), (16384, 1024, BF16), (4096, 32768, F32), (1024, 1024, F32), (4096, 4096, BF16)]


def plain_module():
    """kernels.fused_softmax with its `.cs` stores plain, imported from a file of its own."""
    with open(fs.__file__) as handle:
        src = handle.read()
    n = src.count('cache_modifier=".cs"')
    assert n >= 3, f"expected the rows and row kernels' .cs stores, found {n}"
    os.makedirs(OUT, exist_ok=True)
    module = import_source("fused_softmax_plain", src.replace('cache_modifier=".cs"', 'cache_modifier=""'), OUT)
    print(f"plain module: {n} stores changed", flush=True)
    return module


def main() -> None:
    t0 = time.perf_counter()
    plain = plain_module()
    timer = CudaTimer()
    rows_out, strategy = [], {}
    from liger_kernel.ops.softmax import LigerSoftmaxFunction
    for r, c, dt, label in ss.within_budget(SHAPES, rows_out, t0, BUDGET_S):
        x, out, ref, tol = ss.case(r, c, dt)
        compiled = ss.compiled_softmax()
        fns = {"ours": lambda: fs.softmax(x, -1), "plain": lambda: plain.softmax(x, -1),
               "liger": lambda: LigerSoftmaxFunction.apply(x), "torch_compile": lambda: compiled(x),
               "torch": lambda: torch.softmax(x, -1)}
        good = ss.checked(rows_out, label, fns, out, ref, tol)
        ss.record(rows_out, label, good, timer, t0)
        strategy[label] = fs.choose(r, c, dt, torch.cuda.get_device_properties(0).multi_processor_count)
        del x, out, ref
        torch.cuda.empty_cache()
    ss.write_csv("softmax_store_policy.csv", rows_out)
    print("kernel time, us (CUPTI median); plain / ours")
    for label, ok in ss.times_by_shape(rows_out).items():
        ratio = ok["plain"] / ok["ours"] if ok.get("plain") and ok.get("ours") else float("nan")
        print(f"{label:>20} {strategy.get(label, '-'):>6} ours {ok.get('ours', '-'):>8} plain {ok.get('plain', '-'):>8} ({ratio:.3f}) "
              f"liger {ok.get('liger', '-'):>8} compile {ok.get('torch_compile', '-'):>8} torch {ok.get('torch', '-'):>8}")
    ss.print_notes(rows_out, t0)


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("softmax_store_policy needs a CUDA GPU")
    main()
