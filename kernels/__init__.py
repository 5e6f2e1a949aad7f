"""Roofline Lab's Triton kernels.

Public API (each raises ValueError on a bad shape, dtype or device):
    softmax(x, dim=-1)                   differentiable (backward in fp32 torch ops)
    attention(q, k, v, causal=False, sm_scale=None)
    decode_attention(q, k_cache, v_cache, seqlens=None, sm_scale=None, num_splits=None, block_table=None)
                                         block_table: paged caches (num_pages, page_size, Hkv, D)
attention and decode_attention are forward-only: inputs requiring grad raise ValueError unless
grad mode is off (torch.no_grad(), torch.inference_mode()). On Hopper, attention runs a Gluon
kernel (kernels.flash_attention_hopper) for the shapes it supports, imported on first use.

Importing defines the kernels; nothing is compiled or launched until a first call. Repeat calls
with the same layout reuse a checked plan (kernels._plans).
"""
from kernels.flash_attention import attention
from kernels.flash_decoding import decode_attention
from kernels.fused_softmax import softmax

__all__ = ["softmax", "attention", "decode_attention"]
