"""Probe: what the looped and split kernels' evict_last first pass buys within a call, once no call
can find lines a call before it left.

`_tiles_stats` (the first pass of looped and of split's multi-tile segments) loads x with
eviction_policy="evict_last" so that the normalising pass, which reads the tiles again last tile
first, finds them in L2. On an H100 (GPU-cf66de32, probes/trial_order.py) every block timed right
after looped or split ran fast (3.59 TB/s at 16384x1024 fp32, above the 3.35 datasheet), and
looped read 32768x4096 fp32 at 1.00-1.03x a copy of its bytes on both GPUs: lines held as
evict_last may outlive the read flush and serve the next call (probes/l2_state.sh tests that).
If so, the shipped kernels' times include that help, and a flush that returns persisting lines to
normal first (`cuCtxResetPersistingL2Cache`, as on the flush-reset branch's timer) takes it away.
The question here: with that reset, is evict_last still the best first-pass policy, or do the
default or evict_first, which leave nothing behind, read as fast?

Variants per shape: the strategy the dispatch picks, forced, from the module as shipped
(`<strategy>`, evict_last) and from two copies whose `_tiles_stats` load is the default
(`<strategy>_normal`) or evict_first (`<strategy>_first`), beside `copy` (out.copy_(x)), each
checked against float64 on a hostile input with the output poisoned (softmax_small.long_row_probe).
RESET=1 (the default) makes the timer's flush wait for the GPU and reset persisting lines before
its read; RESET=0 keeps the sweep's flush as shipped (the numbers the committed runs took).
Kernel time: CUPTI, every variant of a shape in one profiler session, in shuffled rounds.

    PYTHONUNBUFFERED=1 python3 probes/softmax_stats_policy.py            (a GPU)
    PROBE_DRYRUN=1 python3 probes/softmax_stats_policy.py                (no GPU: the copies in
        Triton's interpreter against float64 on small hostile shapes)

Writes $OUT/softmax_stats_policy.csv; prints each variant's us and the copy's time over it.
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
from l2_reset import reset_before_flush  # noqa: E402  (probes/, beside this script)
from module_copy import dry_check, import_source  # noqa: E402

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "150"))
RESET = os.environ.get("RESET", "1")
if RESET not in ("0", "1"):
    raise ValueError(f"RESET={RESET!r}: 1 (reset persisting lines before every flush) or 0 (the sweep's flush)")
SHAPES = [(32768, 4096, torch.float32), (4096, 32768, torch.float16), (4096, 32768, torch.bfloat16),
          (2048, 65537, torch.float32), (1024, 131072, torch.float32), (1024, 131072, torch.bfloat16),
          (64, 1048576, torch.float32), (16, 4194304, torch.float32), (16, 4194304, torch.float16)]
TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5}
POLICIES = {"normal": "", "first": "evict_first"}     # suffix -> _tiles_stats's eviction_policy
STATS_LOAD = 'eviction_policy="evict_last").to(tl.float32)'


def policy_module(suffix: str):
    """kernels/fused_softmax.py with `_tiles_stats`'s one evict_last load given POLICIES[suffix]."""
    src = open(fs.__file__).read()
    start = src.index("def _tiles_stats(")
    end = src.index("\n@triton.jit", start)
    body = src[start:end]
    assert body.count(STATS_LOAD) == 1, "expected one evict_last load in _tiles_stats"
    edited = body.replace(STATS_LOAD, f'eviction_policy="{POLICIES[suffix]}").to(tl.float32)')
    return import_source(f"fused_softmax_stats_{suffix}", src[:start] + edited + src[end:])


def make_variants(copies: dict):
    """variants(x, out, sms) for long_row_probe: the dispatched strategy (looped or split) forced from
    the shipped module and from each copy."""
    def variants(x, out, sms):
        name = fs.choose(*x.shape, x.dtype, sms)
        fns = {name: lambda: fs.STRATEGIES[name].run(x, out)}
        for suffix, mod in copies.items():
            fns[f"{name}_{suffix}"] = lambda mod=mod: mod.STRATEGIES[name].run(x, out)
        return fns
    return variants


def dry_run(copies: dict) -> int:
    """The copies' looped and split strategies in the interpreter against float64 on small hostile inputs."""
    def variants(x, cols):
        return {f"{s}_{suffix}": (lambda out, mod=mod, s=s: mod.STRATEGIES[s].run(x, out))
                for suffix, mod in copies.items() for s in ("looped", "split")}
    return dry_check(((3, 1000), (2, 4097), (2, 70000)), fs.DTYPES, variants, TOL)


def main() -> None:
    copies = {suffix: policy_module(suffix) for suffix in POLICIES}
    if DRY:
        sys.exit(1 if dry_run(copies) else 0)
    if not torch.cuda.is_available():
        sys.exit("softmax_stats_policy needs a CUDA GPU (or PROBE_DRYRUN=1)")
    import softmax_small as ss
    if RESET == "1":
        made = ss.CudaTimer

        def resetting():                              # long_row_probe makes its timer through this name
            timer = made()
            reset_before_flush(timer)
            return timer
        ss.CudaTimer = resetting
    print(f"RESET={RESET}: {'persisting lines reset before every flush' if RESET == '1' else 'the sweep flush'}",
          flush=True)
    ss.long_row_probe(SHAPES, make_variants(copies), "softmax_stats_policy.csv", BUDGET_S, TOL)


if __name__ == "__main__":
    main()
