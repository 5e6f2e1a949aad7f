"""Split-KV decode attention (flash-decoding): one query token per sequence against a KV cache.

    out[b, h] = softmax(q[b, h] . K[b, h // G, :n_b]^T * sm_scale) @ V[b, h // G, :n_b]

q is (B, Hq, D), the caches are (B, Hkv, Lmax, D) with any strides, n_b = seqlens[b] and
G = Hq // Hkv query heads share each KV head (grouped-query attention).

Decoding reads the whole valid cache once and does almost no arithmetic per byte, so the
only question is how fast the cache streams from memory. Two kernels:

1. `_decode_split_kernel`, one program per (split, batch, kv head). Each reads a contiguous
   chunk of its sequence's K and V once, in BLOCK_N-token tiles, for its whole query group
   at once: the G query heads are the M dimension of a small tl.dot (padded to 16), so a KV
   head is never read twice. An online softmax keeps a running max and sum; the program
   writes its normalised partial output (fp32) and log-sum-exp (base 2). Programs whose
   chunk starts past the sequence's length exit at once.
2. `_decode_combine_kernel`, one program per (batch, query head), merges the splits that
   hold keys, weighting each by exp2(lse_s - max lse), into the output in the input dtype.

With one split the first kernel normalises and writes the output itself and the second is
not launched (`decode_attention_nosplit` always does this: one program per (batch, kv head)).

Number of splits (`choose_splits`): B * Hkv programs alone leave most of the GPU idle at
small batch; each sequence is cut into S chunks of a whole number of BLOCK_N tiles so that
B * Hkv * S fills the SMs for several waves (see TARGET_WAVES), with no chunk shorter than
MIN_CHUNK_BLOCKS tiles. S depends on the cache shape only (B, Hkv, Lmax), never on the
values in `seqlens`, so the host never waits for the GPU.

Lengths: seqlens[b] in 0..Lmax (None means every sequence is Lmax long). A sequence of
length 0 attends to nothing and its output is defined as zeros. Lengths on the host are
checked and raise ValueError; lengths already on the GPU are not read back (that would stall
the host every call): the kernels clamp them to 0..Lmax, so they never read outside the cache.

Traffic (`decode_traffic`, the count the decode study divides by): the K and V bytes actually
read, 2 * sum(n_b) * Hkv * D * element_size, plus q and out, 2 * B * Hq * D * element_size.
The partial outputs (B * Hq * S * (D + 1) fp32 values written and read back) are overhead
and not counted.
"""
from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl

from kernels._checks import check_same_device, check_tensor, interpreting

DTYPES = (torch.float16, torch.bfloat16)
MAX_HEAD_DIM = 256
INTERPRETER_SMS = 132        # SM count assumed in the CPU interpreter (an H100/H200)
TARGET_WAVES = 4             # aim for B * Hkv * S >= TARGET_WAVES * SMs programs
MIN_CHUNK_BLOCKS = 2         # a split reads at least this many BLOCK_N tiles
COMBINE_BLOCK_S = 16         # splits merged per step of the combine kernel
LENGTH_DTYPES = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)


def decode_traffic(seqlens_total: int, batch: int, heads_q: int, heads_kv: int, head_dim: int,
                   element_size: int) -> tuple[int, int]:
    """(K and V bytes read, q and out bytes) of one decode step; seqlens_total = sum of n_b."""
    kv_bytes = 2 * seqlens_total * heads_kv * head_dim * element_size
    qo_bytes = 2 * batch * heads_q * head_dim * element_size
    return kv_bytes, qo_bytes


@triton.jit
def _mma(a, b, UPCAST: tl.constexpr):
    """a @ b accumulated in fp32; UPCAST feeds fp32 operands instead (holding the same values)."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    return tl.dot(a, b)


@triton.jit
def _decode_split_kernel(
    Q, K, V, Lens, Out, Lse,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    stride_lb, stride_lh, stride_ls,
    heads_kv, cache_len, chunk_len, qk_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    HAS_LENS: tl.constexpr, SPLIT: tl.constexpr, UPCAST_DOT: tl.constexpr,
):
    # Out is (B, Hq, S, D) fp32 and Lse (B, Hq, S) fp32 when SPLIT, else Out is (B, Hq, D).
    split = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // heads_kv
    h = bh % heads_kv
    seqlen = cache_len
    if HAS_LENS:
        seqlen = tl.minimum(tl.maximum(tl.load(Lens + b).to(tl.int32), 0), cache_len)
    start = split * chunk_len
    end = tl.minimum(start + chunk_len, seqlen)
    if SPLIT:
        if start >= end:   # this chunk lies past the sequence: the combine kernel skips it
            return

    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < HEAD_DIM
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    start64 = start.to(tl.int64)
    heads = h * GROUP + offs_g                                               # query heads of this KV head

    q_ptrs = Q + b64 * stride_qb + heads[:, None] * stride_qh + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=mask_g[:, None] & mask_d[None, :], other=0.0)   # (BLOCK_G, BLOCK_D)
    k_ptrs = (K + b64 * stride_kb + h64 * stride_kh + start64 * stride_kn
              + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd)    # (BLOCK_N, BLOCK_D)
    v_ptrs = (V + b64 * stride_vb + h64 * stride_vh + start64 * stride_vn
              + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd)
    k_step = tl.full([], BLOCK_N, tl.int64) * stride_kn
    v_step = tl.full([], BLOCK_N, tl.int64) * stride_vn

    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)   # running max of the logits (log2 units)
    l_i = tl.zeros([BLOCK_G], tl.float32)                  # running sum of exp2(logit - m_i)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    for n0 in range(start, end, BLOCK_N):
        mask_n = (n0 + offs_n) < end
        k = tl.load(k_ptrs, mask=mask_n[:, None] & mask_d[None, :], other=0.0)
        s = _mma(q, tl.trans(k), UPCAST_DOT) * qk_scale                               # (BLOCK_G, BLOCK_N)
        s = tl.where(mask_n[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptrs, mask=mask_n[:, None] & mask_d[None, :], other=0.0)
        acc = acc * alpha[:, None] + _mma(p.to(v.dtype), v, UPCAST_DOT)            # (BLOCK_G, BLOCK_D)
        m_i = m_new
        k_ptrs += k_step
        v_ptrs += v_step

    out_mask = mask_g[:, None] & mask_d[None, :]
    if SPLIT:
        # start < end, so every row saw at least one key and l_i > 0.
        o_ptrs = (Out + b64 * stride_ob + heads[:, None] * stride_oh + split * stride_os
                  + offs_d[None, :] * stride_od)
        tl.store(o_ptrs, acc / l_i[:, None], mask=out_mask)
        tl.store(Lse + b64 * stride_lb + heads * stride_lh + split * stride_ls,
                 m_i + tl.math.log2(l_i), mask=mask_g)
    else:
        l_safe = tl.where(l_i > 0, l_i, 1.0)                 # length 0: acc is 0, out is 0
        o_ptrs = Out + b64 * stride_ob + heads[:, None] * stride_oh + offs_d[None, :] * stride_od
        tl.store(o_ptrs, (acc / l_safe[:, None]).to(Out.dtype.element_ty), mask=out_mask)


@triton.jit
def _decode_combine_kernel(
    Part, Lse, Lens, Out,
    stride_pb, stride_ph, stride_ps, stride_pd,
    stride_lb, stride_lh, stride_ls,
    stride_ob, stride_oh, stride_od,
    heads_q, cache_len, chunk_len,
    HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr, HAS_LENS: tl.constexpr,
):
    # Part (B, Hq, S, D) fp32 and Lse (B, Hq, S) fp32 -> Out (B, Hq, D) in the input dtype.
    bh = tl.program_id(0)
    b = bh // heads_q
    h = bh % heads_q
    seqlen = cache_len
    if HAS_LENS:
        seqlen = tl.minimum(tl.maximum(tl.load(Lens + b).to(tl.int32), 0), cache_len)
    n_valid = tl.cdiv(seqlen, chunk_len)             # splits that hold at least one key

    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    b64 = b.to(tl.int64)
    p_ptrs = Part + b64 * stride_pb + h * stride_ph + offs_s[:, None] * stride_ps + offs_d[None, :] * stride_pd
    l_ptrs = Lse + b64 * stride_lb + h * stride_lh + offs_s * stride_ls

    m_i = tl.full([BLOCK_S], float("-inf"), tl.float32)    # per-lane running max of the lse
    l_i = tl.zeros([BLOCK_S], tl.float32)
    acc = tl.zeros([BLOCK_S, BLOCK_D], tl.float32)
    for s0 in range(0, n_valid, BLOCK_S):
        mask_s = (s0 + offs_s) < n_valid
        lse = tl.load(l_ptrs, mask=mask_s, other=float("-inf"))              # (BLOCK_S,)
        part = tl.load(p_ptrs, mask=mask_s[:, None] & mask_d[None, :], other=0.0)  # (BLOCK_S, BLOCK_D)
        m_new = tl.maximum(m_i, lse)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.math.exp2(m_i - m_safe)
        w = tl.math.exp2(lse - m_safe)
        l_i = l_i * alpha + w
        acc = acc * alpha[:, None] + w[:, None] * part
        m_i = m_new
        p_ptrs += BLOCK_S * stride_ps
        l_ptrs += BLOCK_S * stride_ls
    # Merge the BLOCK_S lanes: rescale each to the overall max, then reduce.
    m = tl.max(m_i, 0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    scale = tl.math.exp2(m_i - m_safe)                 # lanes that saw nothing: exp2(-inf) = 0
    total = tl.sum(l_i * scale, 0)
    out = tl.sum(acc * scale[:, None], 0) / tl.where(total > 0, total, 1.0)   # length 0: zeros
    tl.store(Out + b64 * stride_ob + h * stride_oh + offs_d * stride_od,
             out.to(Out.dtype.element_ty), mask=mask_d)


@functools.lru_cache(maxsize=None)
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of `device`; INTERPRETER_SMS in Triton's CPU interpreter."""
    if device.type != "cuda":
        return INTERPRETER_SMS
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def launch_config(head_dim: int, element_size: int) -> tuple[int, int, int]:
    """(BLOCK_N, num_warps, num_stages) for a head dimension: keeps num_stages K+V tiles in shared memory."""
    block_d = max(16, triton.next_power_of_2(head_dim))
    if block_d <= 64:
        return 128, 4, 4
    if block_d <= 128:
        return 64, 4, 4
    return 32, 4, 4


def choose_splits(batch: int, heads_kv: int, cache_len: int, block_n: int, num_sms: int) -> tuple[int, int]:
    """(S, chunk_len): split each sequence into S chunks of chunk_len tokens (a multiple of block_n)."""
    n_blocks = triton.cdiv(cache_len, block_n)
    programs = batch * heads_kv
    wanted = triton.cdiv(TARGET_WAVES * num_sms, programs)
    splits = max(1, min(wanted, n_blocks // MIN_CHUNK_BLOCKS))
    return _chunking(n_blocks, splits, block_n)


def _chunking(n_blocks: int, splits: int, block_n: int) -> tuple[int, int]:
    blocks_per_split = triton.cdiv(n_blocks, max(1, min(splits, n_blocks)))
    return triton.cdiv(n_blocks, blocks_per_split), blocks_per_split * block_n


def _check_inputs(q, k_cache, v_cache, seqlens, sm_scale, num_splits):
    check_tensor("q", q, DTYPES, ndim=3)
    check_tensor("k_cache", k_cache, DTYPES, ndim=4)
    check_tensor("v_cache", v_cache, DTYPES, ndim=4)
    check_same_device(q=q, k_cache=k_cache, v_cache=v_cache)
    if k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise ValueError(f"q, k_cache and v_cache must share a dtype, got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    batch, heads_q, head_dim = q.shape
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} differ in shape")
    kb, heads_kv, cache_len, kd = k_cache.shape
    if kb != batch:
        raise ValueError(f"q has batch {batch} but the caches have batch {kb}")
    if kd != head_dim:
        raise ValueError(f"q has head_dim {head_dim} but the caches have head_dim {kd}")
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be 1..{MAX_HEAD_DIM}, got {head_dim}")
    if heads_kv == 0 or heads_q % heads_kv != 0:
        raise ValueError(f"heads_q ({heads_q}) must be a positive multiple of heads_kv ({heads_kv})")
    if cache_len == 0:
        raise ValueError("the caches hold no tokens (Lmax = 0)")
    if sm_scale is not None and not (isinstance(sm_scale, (int, float)) and math.isfinite(sm_scale)):
        raise ValueError(f"sm_scale must be a finite number or None, got {sm_scale!r}")
    if num_splits is not None and (not isinstance(num_splits, int) or num_splits < 1):
        raise ValueError(f"num_splits must be a positive int or None, got {num_splits!r}")
    if seqlens is None:
        return None
    if not isinstance(seqlens, torch.Tensor) or seqlens.dtype not in LENGTH_DTYPES:
        kind = seqlens.dtype if isinstance(seqlens, torch.Tensor) else type(seqlens).__name__
        raise ValueError(f"seqlens must be an integer tensor, got {kind}")
    if seqlens.shape != (batch,):
        raise ValueError(f"seqlens must have shape ({batch},), got {tuple(seqlens.shape)}")
    if seqlens.device.type == "cpu":
        if batch and (int(seqlens.min()) < 0 or int(seqlens.max()) > cache_len):
            raise ValueError(f"seqlens must lie in 0..{cache_len} (Lmax), got "
                             f"{int(seqlens.min())}..{int(seqlens.max())}")
        seqlens = seqlens.to(q.device, non_blocking=True)
    elif seqlens.device != q.device:
        raise ValueError(f"seqlens is on {seqlens.device} but q is on {q.device}")
    return seqlens


def _decode(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_n=None, num_warps=None, num_stages=None):
    """Shared launcher; num_splits=None chooses S with choose_splits, 1 skips the combine kernel."""
    seqlens = _check_inputs(q, k_cache, v_cache, seqlens, sm_scale, num_splits)
    batch, heads_q, head_dim = q.shape
    _, heads_kv, cache_len, _ = k_cache.shape
    out = torch.empty(batch, heads_q, head_dim, device=q.device, dtype=q.dtype)   # (B, Hq, D)
    if batch == 0 or heads_q == 0:
        return out
    cfg_n, cfg_w, cfg_s = launch_config(head_dim, q.element_size())
    block_n = block_n or cfg_n
    num_warps = num_warps or cfg_w
    num_stages = num_stages or cfg_s
    if num_splits is None:
        splits, chunk = choose_splits(batch, heads_kv, cache_len, block_n, sm_count(q.device))
    else:
        splits, chunk = _chunking(triton.cdiv(cache_len, block_n), num_splits, block_n)
    if splits == 1:
        chunk = cache_len
    group = heads_q // heads_kv
    scale = (1.0 / math.sqrt(head_dim) if sm_scale is None else float(sm_scale)) * math.log2(math.e)
    block_d = max(16, triton.next_power_of_2(head_dim))
    lens = seqlens if seqlens is not None else q        # dummy pointer when HAS_LENS is False
    common = dict(GROUP=group, HEAD_DIM=head_dim, BLOCK_G=max(16, triton.next_power_of_2(group)),
                  BLOCK_N=block_n, BLOCK_D=block_d, HAS_LENS=seqlens is not None,
                  num_warps=num_warps, num_stages=num_stages,
                  # Triton's CPU interpreter multiplies bf16 tiles as raw uint16 bits; give it fp32.
                  UPCAST_DOT=interpreting() and q.dtype == torch.bfloat16)
    strides = (*q.stride(), *k_cache.stride(), *v_cache.stride())
    grid = (splits, batch * heads_kv)
    if splits == 1:
        _decode_split_kernel[grid](
            q, k_cache, v_cache, lens, out, out,
            *strides, out.stride(0), out.stride(1), 0, out.stride(2), 0, 0, 0,
            heads_kv, cache_len, chunk, scale, SPLIT=False, **common)
        return out
    part = torch.empty(batch, heads_q, splits, head_dim, device=q.device, dtype=torch.float32)  # (B, Hq, S, D)
    lse = torch.empty(batch, heads_q, splits, device=q.device, dtype=torch.float32)              # (B, Hq, S)
    _decode_split_kernel[grid](
        q, k_cache, v_cache, lens, part, lse,
        *strides, *part.stride(), *lse.stride(),
        heads_kv, cache_len, chunk, scale, SPLIT=True, **common)
    _decode_combine_kernel[(batch * heads_q,)](
        part, lse, lens, out,
        *part.stride(), *lse.stride(), *out.stride(),
        heads_q, cache_len, chunk,
        HEAD_DIM=head_dim, BLOCK_S=COMBINE_BLOCK_S, BLOCK_D=block_d, HAS_LENS=seqlens is not None,
        num_warps=4)
    return out


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     seqlens: torch.Tensor | None = None, sm_scale: float | None = None,
                     num_splits: int | None = None) -> torch.Tensor:
    """Attention of one query token per sequence over its KV cache, split across the SMs.

    q (B, Hq, D); k_cache, v_cache (B, Hkv, Lmax, D), Hq a multiple of Hkv, any strides;
    fp16 or bf16, D <= 256. seqlens (B,) integer lengths in 0..Lmax (None: all Lmax; 0 gives
    zeros). sm_scale defaults to 1/sqrt(D). num_splits forces the number of KV splits (it is
    rounded so that each split reads whole BLOCK_N tiles); None chooses it from the shape.
    Returns (B, Hq, D) in q's dtype.
    """
    return _decode(q, k_cache, v_cache, seqlens, sm_scale, num_splits)


def decode_attention_nosplit(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                             seqlens: torch.Tensor | None = None, sm_scale: float | None = None) -> torch.Tensor:
    """Same computation with one program per (batch, kv head): the baseline without split-KV."""
    return _decode(q, k_cache, v_cache, seqlens, sm_scale, 1)


def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              seqlens: torch.Tensor | None = None, sm_scale: float | None = None,
              dtype: torch.dtype = torch.float64, budget_bytes: int = 1 << 30) -> torch.Tensor:
    """Decode attention in `dtype`, one sequence (and a bounded number of KV heads) at a time.

    Each sequence attends to its valid prefix only; a length of 0 gives zeros. Returns
    (B, Hq, D) in `dtype`; at most ~budget_bytes of K and V are converted at once.
    """
    batch, heads_q, head_dim = q.shape
    _, heads_kv, cache_len, _ = k_cache.shape
    group = heads_q // heads_kv
    scale = 1.0 / math.sqrt(head_dim) if sm_scale is None else float(sm_scale)
    lengths = [cache_len] * batch if seqlens is None else [int(n) for n in seqlens.tolist()]
    out = torch.zeros(batch, heads_q, head_dim, device=q.device, dtype=dtype)
    element = torch.tensor([], dtype=dtype).element_size()
    for b, n in enumerate(lengths):
        if n == 0:
            continue
        step = max(1, budget_bytes // (2 * n * head_dim * element))
        for h0 in range(0, heads_kv, step):
            h1 = min(heads_kv, h0 + step)
            k = k_cache[b, h0:h1, :n].to(dtype)                                   # (h, n, D)
            v = v_cache[b, h0:h1, :n].to(dtype)
            qg = q[b, h0 * group:h1 * group].to(dtype).reshape(h1 - h0, group, head_dim)  # (h, G, D)
            p = torch.softmax(qg @ k.transpose(1, 2) * scale, dim=-1)               # (h, G, n)
            out[b, h0 * group:h1 * group] = (p @ v).reshape(-1, head_dim)
    return out
