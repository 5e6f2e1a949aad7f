"""Roofline Lab's Triton kernels.

Public API (each raises ValueError on a bad shape, dtype or device):
    softmax(x, dim=-1)
    attention(q, k, v, causal=False, sm_scale=None)
    decode_attention(q, k_cache, v_cache, seqlens=None, sm_scale=None)

Importing defines the kernels; nothing is compiled or launched until a first call.
"""
from kernels.attention import attention
from kernels.decode import decode_attention
from kernels.softmax import softmax

__all__ = ["softmax", "attention", "decode_attention"]
