"""Probe: the softmax kernels with exp(y) computed as exp2(y * log2 e), against the kernels as shipped.

The question. Triton lowers tl.exp(y) to y * log2 e and `ex2.approx.f32`, which ptxas expands on
sm_90 into a range test and two predicated multiplies around MUFU.EX2, so that results below
2^-126 come out subnormal. tl.exp2 lowers to `ex2.approx.ftz.f32`: one MUFU.EX2, results below
2^-126 flushed to zero. Compiled offline for sm_90 (probes/sm90.py, Triton 3.6's ptxas; one
32768-column fp16 row on 32 warps, 32 elements a thread: load, max, exponentials, sum, scale,
store), the kernel body is 440 SASS instructions with tl.exp(x - m) against 344 with
tl.exp2((x - m) * log2 e), the same argument rounded the same way: FMUL 132 -> 68, FADD 73,
FSETP 34 -> 0 (and 312 with one FFMA, x * log2 e - m * log2 e, which loses rows whose maximum is
near 1e30; not used here). The shipped kernels against the copy below, compiled the same way
(SASS instructions, registers a thread): row 4096x32768 fp16 480 / 61 -> 384 / 63 (one program an
SM either way), fp32 472 / 51 -> 376 / 51, 8192x4096 fp32 280 / 34 -> 240 / 32; looped 2048x65537
fp16 1048 / 64 -> 840 / 64; rows 65536x128 fp16 272 / 32 -> 224 / 31; MUFU.EX2 unchanged.
The register-resident row kernel runs one program an SM at long rows,
where its loads, reductions and stores follow one another, and reads 4096x32768 fp16 at 0.74 of
the copy against 0.96 in fp32 (twice the bytes for the same instructions): fewer instructions an
element should show there first, then in looped and split.

The edit: a copy of kernels/fused_softmax.py whose every `tl.exp(` calls `_exp_ftz(`, a jitted
exp2(y * log2 e) appended to the copy (`exp2_module`). The flush changes outputs below about
1.2e-38 times the row's sum from a subnormal to zero: an absolute change under 1.2e-38.

Variants per shape: `ours` (kernels.fused_softmax.softmax as shipped) and `ours_exp2` (the copy's),
then the strategy the dispatch picks and its neighbours forced on both (`<strategy>` and
`<strategy>_exp2`), torch.softmax, and `copy` (out.copy_(x): the same bytes). Every variant but
copy is checked first against a float64 softmax of a hostile input (rows with -inf entries, a row
of -inf, one entry of 3e4 in 16 bits or 1e30 in fp32) with the output poisoned with NaN
(softmax_small.long_row_probe: tolerance 2e-3 in fp16, 1e-2 in bf16, 1e-5 in fp32, NaN exactly
where the reference has it). Kernel time: CUPTI device time between L2 flushes, every variant of a shape in
one profiler session, in shuffled rounds. Writes $OUT/softmax_exp2.csv; prints each variant's us
and the copy's time over it, fastest first.

    PYTHONUNBUFFERED=1 python3 probes/softmax_exp2.py            (a GPU)
    PROBE_DRYRUN=1 python3 probes/softmax_exp2.py                (no GPU: the copy in Triton's
        interpreter against float64 on small hostile shapes, every strategy and dtype)
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
DRY = os.environ.get("PROBE_DRYRUN") == "1"
if DRY:
    from rooflab import interpreter
    interpreter.enable()

import torch  # noqa: E402

from kernels import fused_softmax as fs  # noqa: E402
from module_copy import dry_check, import_source  # noqa: E402  (probes/, beside this script)

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "120"))
HELPER = '''

@triton.jit
def _exp_ftz(y):
    """exp(y) as exp2(y * log2 e): `ex2.approx.ftz.f32`, results below 2^-126 flushed to zero."""
    return tl.exp2(y * 1.4426950408889634)
'''
# (rows, cols, dtype): the long rows where the row kernel runs one program an SM, looped and split
# at long rows, and the 8-64 MB shapes where ours and Liger are within a few percent
SHAPES = [(4096, 32768, torch.float16), (4096, 32768, torch.bfloat16), (4096, 32768, torch.float32),
          (8192, 16384, torch.float16), (2048, 65537, torch.float16), (1024, 131072, torch.bfloat16),
          (16, 4194304, torch.float16), (8192, 4096, torch.float32), (1024, 1000, torch.float32),
          (65536, 128, torch.float16), (32768, 1000, torch.bfloat16)]
TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5}   # bf16 keeps 8 bits: 0.4% of values near 1
NEIGHBOURS = {"rows": ("rows", "row"), "row": ("row", "looped"), "looped": ("looped", "row", "split"),
              "split": ("split", "looped")}


def exp2_module():
    """A copy of kernels/fused_softmax.py with every tl.exp( calling _exp_ftz(, imported under its own name."""
    src = open(fs.__file__).read()
    assert "tl.exp(" in src and "_exp_ftz" not in src
    return import_source("fused_softmax_exp2", src.replace("tl.exp(", "_exp_ftz(") + HELPER)


def strategies(rows: int, cols: int, dtype: torch.dtype, sms: int) -> tuple[str, ...]:
    """The dispatched strategy and its neighbours that handle rows of `cols` columns."""
    return tuple(s for s in NEIGHBOURS[fs.choose(rows, cols, dtype, sms)] if fs.STRATEGIES[s].supports(cols))


def make_variants(fx):
    """variants(x, out, sms) for long_row_probe: shipped and edited softmax, and each strategy forced on both."""
    def variants(x, out, sms):
        fns = {"ours": lambda: fs.softmax(x), "ours_exp2": lambda: fx.softmax(x)}
        for s in strategies(*x.shape, x.dtype, sms):
            fns[s] = lambda s=s: fs.STRATEGIES[s].run(x, out)
            fns[f"{s}_exp2"] = lambda s=s: fx.STRATEGIES[s].run(x, out)
        fns["torch"] = lambda: torch.softmax(x, -1)
        return fns
    return variants


def dry_run(fx) -> int:
    """The copy's softmax and forced strategies in the interpreter against float64 on small hostile inputs."""
    def variants(x, cols):
        fns = {"ours": lambda out: fx.softmax(x)}
        for s in (n for n in fs.STRATEGIES if fs.STRATEGIES[n].supports(cols)):
            fns[s] = lambda out, s=s: fx.STRATEGIES[s].run(x, out)
        return fns
    return dry_check(((5, 1), (7, 33), (3, 1000), (2, 4097)), fs.DTYPES, variants, TOL)


def main() -> None:
    fx = exp2_module()
    if DRY:
        raise SystemExit(1 if dry_run(fx) else 0)
    from softmax_small import long_row_probe   # the shared probe loop (probes/, beside this script)
    long_row_probe(SHAPES, make_variants(fx), "softmax_exp2.csv", BUDGET_S, TOL)


if __name__ == "__main__":
    main()
