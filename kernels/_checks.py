"""Input validation shared by the kernel wrappers: bad input -> ValueError naming the problem."""
from __future__ import annotations

import functools
import os

import torch


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
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {tuple(t.shape)}")
    if t.device.type != "cuda" and not interpreting():
        raise ValueError(f"{name} is on {t.device}; the kernels need a CUDA tensor "
                         "(or TRITON_INTERPRET=1 for Triton's CPU interpreter)")


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
