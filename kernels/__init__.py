"""Roofline Lab's Triton kernels.

Public API (each raises ValueError on a bad shape, dtype or device):
    softmax(x, dim=-1)
    attention(q, k, v, causal=False, sm_scale=None)
    decode_attention(q, k_cache, v_cache, seqlens=None, sm_scale=None)

Submodules are imported on first use, so `import kernels` compiles and launches nothing.
"""
from importlib import import_module

_EXPORTS = {
    "softmax": "kernels.softmax",
    "attention": "kernels.attention",
    "decode_attention": "kernels.decode",
}
__all__ = list(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'kernels' has no attribute {name!r}")
