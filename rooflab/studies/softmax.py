"""Softmax over the last dimension of a (rows, cols) tensor.

Traffic: one read and one write of the tensor, 2 * rows * cols * element_size bytes;
the metric is that count over the median time, against the measured copy ceiling.

`copy` is a bound, not a softmax: torch's copy_ of x into a buffer made once, the same bytes read
and written, timed as one more implementation in the case's own trials. The calibrate job's copies
run in a process of their own, and the sweep's rows of 134 MB read up to 1.07x a copy of their size
there (the above_ceiling flags) while, in a probe on another GPU, copies in the trials read within
1-2% of the calibrate job's (probes/sweep_vs_probe.py DIAG=copy); the copy in the same trials tells
the two apart in every run. It is checked equal to x, not against the softmax reference.
"""
from __future__ import annotations

import functools

import torch

from rooflab.bench import TOLERANCE, Ceiling, Unsupported, error_metrics

STUDY = "softmax"


def shapes(grid: list[dict]) -> list[dict]:
    return [{"rows": int(g["rows"]), "cols": int(g["cols"])} for g in grid]


def make_inputs(shape: dict, dtype: torch.dtype, device: str) -> dict:
    x = torch.randn(shape["rows"], shape["cols"], device=device, dtype=torch.float32)
    return {"x": x.mul_(3.0).to(dtype)}  # (rows, cols), logits spread over ~[-12, 12]


def reference(inputs: dict) -> torch.Tensor:
    return torch.softmax(inputs["x"].to(torch.float64), dim=-1)


def check(out, ref, inputs):
    if out is not None and out is inputs.get("copy_out"):     # the copy bound: its output must be x itself
        same = torch.equal(out, inputs["x"])
        return (0.0, 0.0) if same else (float("inf"), float("inf"))
    return error_metrics(out, ref)


def tolerance(dtype: str) -> float:
    return TOLERANCE[dtype]


def work(shape: dict, dtype: str) -> tuple[float, None]:
    element = torch.tensor([], dtype=getattr(torch, dtype)).element_size()
    return 2.0 * shape["rows"] * shape["cols"] * element, None


def ceiling(dtype: str, ceilings: dict) -> Ceiling:
    return Ceiling("tbps", ceilings.get("copy_tbps"), ceilings.get("datasheet_bandwidth_tbps"), "copy_tbps")


def strategy(shape: dict, dtype: str, inputs: dict) -> str:
    """The strategy kernels.softmax dispatches this case to (its forced twin is ours_<strategy>)."""
    from kernels._device import sm_count
    from kernels.fused_softmax import choose
    x = inputs["x"]
    return choose(shape["rows"], shape["cols"], x.dtype, sm_count(x.device))


# ---- implementations: each factory takes the inputs and returns a zero-argument callable ----

def _ours(inputs):
    import kernels
    from kernels import _native_replay
    x = inputs["x"]
    if x.is_cuda:
        _native_replay.module()     # built or loaded now, not in the background while calls are timed
    return lambda: kernels.softmax(x, dim=-1)


def _strategy(name):
    def factory(inputs):
        from kernels.fused_softmax import STRATEGIES
        strategy = STRATEGIES[name]
        x = inputs["x"]
        if not strategy.supports(x.shape[-1]):
            raise Unsupported(f"strategy {name} does not handle rows of {x.shape[-1]} columns")
        return lambda: strategy.run(x)
    return factory


def _torch(inputs):
    x = inputs["x"]
    return lambda: torch.softmax(x, dim=-1)


def _copy(inputs):
    """The copy bound: x copied into a buffer made once (kept in inputs for `check`)."""
    x = inputs["x"]
    out = inputs["copy_out"] = torch.empty_like(x)
    return lambda: out.copy_(x)


@functools.lru_cache(maxsize=1)
def _compiled():
    torch._dynamo.config.cache_size_limit = 1024   # one specialised graph per shape, no eager fallback
    return torch.compile(lambda t: torch.softmax(t, dim=-1), dynamic=False)


def _torch_compile(inputs):
    x = inputs["x"]
    fn = _compiled()
    return lambda: fn(x)


PRECOMPILED_IMPL = "torch_compile"   # its graphs are compiled before the sweep (rooflab.precompile)


def compile_case(shape: dict, dtype_name: str, device: str) -> None:
    """Compile torch_compile's graph for one case, with inputs made as the sweep makes them."""
    _torch_compile(make_inputs(shape, getattr(torch, dtype_name), device))()
    if device == "cuda":
        torch.cuda.synchronize()


def _liger(inputs):
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        from liger_kernel.ops.utils import calculate_settings
    except ImportError as exc:
        raise Unsupported(f"liger-kernel not installed ({exc})") from exc
    x = inputs["x"]
    try:
        calculate_settings(x.shape[-1])
    except RuntimeError as exc:
        raise Unsupported(f"liger refuses rows of {x.shape[-1]} columns") from exc
    return lambda: LigerSoftmaxFunction.apply(x)


def _seed(name):
    def factory(inputs):
        from kernels.seeds import softmax as seeds
        fn = getattr(seeds, name)
        x = inputs["x"]
        if not seeds.supports(name, x.shape[-1]):
            raise Unsupported(f"{name} keeps a whole row in one block; {x.shape[-1]} columns do not fit")
        return lambda: fn(x)
    return factory


def impls() -> dict:
    from kernels.fused_softmax import STRATEGIES
    table = {"ours": _ours, "torch": _torch, "torch_compile": _torch_compile, "liger": _liger,
             "seed_rowwise": _seed("seed_rowwise"), "seed_multipass": _seed("seed_multipass"), "copy": _copy}
    table.update({f"ours_{name}": _strategy(name) for name in STRATEGIES})
    return table
