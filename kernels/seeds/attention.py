"""The causal attention design of seed 003, implemented from its description.

seed_attention  one program per (block of 128 queries, batch * head); the key loop runs over
                blocks of 64 keys from the first key up to the end of the query block's diagonal,
                applying the causal mask to every block; plain pointer loads (no tensor
                descriptors), online softmax with exp (not exp2) on scores scaled after the dot,
                probabilities cast to 16 bits for the second product; 4 warps, 3 pipeline stages.
                The article's kernel is written for fp16; here the probabilities take v's dtype,
                which is fp16 for fp16 inputs (for bf16 inputs an fp16 cast would not compile).

Scope, as in the article: causal, square (Nq == Nk), one key/value head per query head, a
power-of-two head dim. Work: 4 * B * H * N * N * D / 2 FLOPs, the same count as
kernels.flash_attention.attention_flops for causal square shapes.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels._checks import check_same_device, check_tensor

DTYPES = (torch.float16, torch.bfloat16)
BLOCK_M, BLOCK_N, NUM_WARPS, NUM_STAGES = 128, 64, 4, 3


@triton.jit
def _seed_attn_fwd(Q, K, V, O,
                   stride_qb, stride_qh, stride_qm, stride_qd,
                   stride_kb, stride_kh, stride_kn, stride_kd,
                   stride_vb, stride_vh, stride_vn, stride_vd,
                   stride_ob, stride_oh, stride_om, stride_od,
                   H, N, sm_scale,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd
    kt_ptrs = K + b * stride_kb + h * stride_kh + offs_n[None, :] * stride_kn + offs_d[:, None] * stride_kd  # (D, BLOCK_N)
    v_ptrs = V + b * stride_vb + h * stride_vh + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd  # (BLOCK_N, D)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    q = tl.load(q_ptrs, mask=offs_m[:, None] < N, other=0.0)  # (BLOCK_M, D), kept for the whole loop

    for start_n in range(0, (pid_m + 1) * BLOCK_M, BLOCK_N):
        cols = start_n + offs_n
        kt = tl.load(kt_ptrs + start_n * stride_kn, mask=cols[None, :] < N, other=0.0)
        v = tl.load(v_ptrs + start_n * stride_vn, mask=cols[:, None] < N, other=0.0)
        s = tl.dot(q, kt) * sm_scale  # (BLOCK_M, BLOCK_N)
        s = tl.where(offs_m[:, None] >= cols[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new

    acc = acc / l_i[:, None]
    o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(O.dtype.element_ty), mask=offs_m[:, None] < N)


def seed_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                   sm_scale: float | None = None) -> torch.Tensor:
    """Causal attention for q, k, v of one shape (B, H, N, D), seed 003's kernel design."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, DTYPES, ndim=4)
    check_same_device(q=q, k=k, v=v)
    if not (q.shape == k.shape == v.shape):
        raise ValueError("seed_attention handles square multi-head attention only: q, k, v must share "
                         f"one shape, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if causal is not True:
        raise ValueError("seed_attention implements the article's causal kernel only (causal=True)")
    batch, heads, seqlen, head_dim = q.shape
    if head_dim not in (16, 32, 64, 128, 256):
        raise ValueError(f"seed_attention needs a power-of-two head dim in [16, 256], got {head_dim}")
    scale = float(sm_scale) if sm_scale is not None else 1.0 / math.sqrt(head_dim)
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    if o.numel() == 0:
        return o
    grid = (triton.cdiv(seqlen, BLOCK_M), batch * heads)
    _seed_attn_fwd[grid](q, k, v, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
                         heads, seqlen, scale,
                         HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                         num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return o
