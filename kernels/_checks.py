"""Input validation shared by the kernel wrappers: bad input -> ValueError naming the problem."""
from __future__ import annotations

import functools
import math
import os

import torch

MAX_GRID_Y = 65535                 # CUDA's limit on a launch grid's second axis
LOG2E = 1.4426950408889634         # exp(x) == exp2(x * log2(e)); the wrappers fold it into their scales
FP32_MAX = 3.4028234663852886e38


@functools.lru_cache(maxsize=1)
def interpreting() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1).

    Read once: Triton itself decides at import whether to interpret, and the wrappers call
    this on every launch, where an environment lookup would add host time.
    """
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def check_tensor(name: str, t, dtypes: tuple[torch.dtype, ...], ndim: int | None = None) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        allowed = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise ValueError(f"{name} has dtype {str(t.dtype).removeprefix('torch.')}; supported: {allowed}")
    if t.layout != torch.strided or t.is_nested:
        kind = "nested" if t.is_nested else str(t.layout).removeprefix("torch.")
        raise ValueError(f"{name} is a {kind} tensor; the kernels read dense strided tensors (convert with .to_dense())")
    if t.is_neg() or t.is_conj():
        raise ValueError(f"{name} is a lazily negated or conjugated view, whose memory holds the values before "
                         "the sign; pass .resolve_neg() or .resolve_conj() of it")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")
    if t.device.type != "cuda" and not interpreting():
        raise ValueError(f"{name} is on {t.device}; the kernels need a CUDA tensor "
                         "(or TRITON_INTERPRET=1 for Triton's CPU interpreter)")


def check_scale(sm_scale, positive: bool) -> None:
    """sm_scale: None, or a real number (not a bool) whose product with log2(e), the kernels' fp32
    score scale, is finite in fp32 (and, with `positive`, above 0)."""
    if sm_scale is None:
        return
    wanted = "a positive finite number" if positive else "a finite number"
    try:
        finite = (not isinstance(sm_scale, bool) and isinstance(sm_scale, (int, float))
                  and math.isfinite(float(sm_scale)) and abs(float(sm_scale)) * LOG2E <= FP32_MAX)
    except OverflowError:                   # an int past float's range
        finite = False
    if not finite or (positive and sm_scale <= 0):
        raise ValueError(f"sm_scale must be {wanted} or None whose product with log2(e) fits fp32, got {sm_scale!r}")


def check_grid_rows(what: str, n: int) -> None:
    """A launch puts `n` programs on its grid's second axis, which CUDA caps at MAX_GRID_Y."""
    if n > MAX_GRID_Y:
        raise ValueError(f"{what} = {n}: the launch grid's second axis holds at most {MAX_GRID_Y} programs")


def check_same_device(**tensors) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        raise ValueError(f"tensors on different devices: {devices}")


def check_no_grad(api: str, **tensors) -> None:
    """Forward-only kernels: refuse inputs that require grad while grad mode is on, rather than
    return an output silently cut from the autograd graph."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors.values()):
        needing = ", ".join(name for name, t in tensors.items() if t.requires_grad)
        raise ValueError(f"{api} has no backward: call it on tensors that do not require grad, "
                         f"or under torch.no_grad() ({needing} requires grad)")
