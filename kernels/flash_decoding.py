"""Split-KV decode attention (flash-decoding): one query token per sequence against a KV cache.

    out[b, h] = softmax(q[b, h] . K[b, h // G, :n_b]^T * sm_scale) @ V[b, h // G, :n_b]

q is (B, Hq, D), the caches are (B, Hkv, Lmax, D) with any strides, n_b = seqlens[b] and
G = Hq // Hkv query heads share each KV head (grouped-query attention).

Decoding reads the whole valid cache once and does almost no arithmetic per byte, so the
only question is how fast the cache streams from memory. One kernel, one program per
(split, batch, kv head):

1. Each program reads a contiguous chunk of its sequence's K and V once, in BLOCK_N-token
   tiles, for its whole query group at once: the G query heads are the M dimension of a small
   tl.dot (padded to 16), so a KV head is never read twice. An online softmax keeps a running
   max and sum. Programs whose chunk starts past the sequence's length exit at once.
2. With S > 1 splits, each program writes its normalised partial output (fp32) and its
   log-sum-exp (base 2), then bumps a per-(batch, kv head) counter. The program that arrives
   last merges the splits holding keys, weighting each by exp2(lse_s - max lse), into the
   output in the input dtype. Merging in the same launch saves a second kernel launch
   (host time that is not hidden when the cache is small) and the idle gap between kernels.
   With S = 1 the program normalises and writes the output directly, and there is no counter.

`decode_attention_nosplit` always uses S = 1 (one program per (batch, kv head)).

Number of splits (`choose_splits`): the B * Hkv programs of an unsplit launch fill the GPU
once there are NO_SPLIT_FILL (0.9) times as many as SMs. Below that, each sequence is cut into S chunks of a
whole number of BLOCK_N tiles so that B * Hkv * S is about TARGET_WAVES times the SM count,
with no chunk shorter than MIN_CHUNK_BLOCKS tiles. S depends on the cache shape (B, Hkv,
Lmax) only, never on the values in `seqlens`, so the host never waits for the GPU.

Lengths: seqlens[b] in 0..Lmax (None means every sequence is Lmax long). A sequence of
length 0 attends to nothing and its output is defined as zeros. Lengths on the host are
checked and raise ValueError; lengths already on the GPU are not read back (that would stall
the host every call): the kernel clamps them to 0..Lmax, so it never reads outside the cache.

Traffic (`decode_traffic`, the count the decode study divides by): the K and V bytes actually
read, 2 * sum(n_b) * Hkv * D * element_size, plus q and out, 2 * B * Hq * D * element_size.
The partial outputs (B * Hq * S * (D + 1) fp32 values written, and read back by one program
per kv head) are overhead and not counted.
"""
from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl

from kernels._checks import check_no_grad, check_same_device, check_tensor, interpreting
from kernels._device import cdiv, pow2, sm_count
from kernels._plans import ALIGN, Launch, aligned, current_stream, remember

DTYPES = (torch.float16, torch.bfloat16)
MAX_HEAD_DIM = 256
TARGET_WAVES = 8             # split until B * Hkv * S >= TARGET_WAVES * SMs programs
MIN_CHUNK_BLOCKS = 8         # a split reads at least this many BLOCK_N tiles (H200: B=1, L=4096:
                             # 8 splits 2.11 TB/s, 16 splits 1.97)
NO_SPLIT_FILL = 0.9          # B * Hkv programs on at least this share of the SMs need no split
                             # (H200: B=16, Hkv=8, 128 programs: S=1 4.05 TB/s, S=9 3.59)
MERGE_BLOCK_S = 16           # splits merged per step by the last program
LENGTH_DTYPES = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)
LOG2E = math.log2(math.e)


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
def _merge_splits(Part, Lse, Out, row, n_valid, num_splits,
                  HEAD_DIM: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    """Out[row] = sum_s exp2(lse_s) * Part[row, s] / sum_s exp2(lse_s) over the first n_valid splits."""
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    mask_d = offs_d < HEAD_DIM
    p_ptrs = Part + (row * num_splits + offs_s)[:, None] * HEAD_DIM + offs_d[None, :]   # (BLOCK_S, BLOCK_D)
    l_ptrs = Lse + row * num_splits + offs_s                                             # (BLOCK_S,)
    m_i = tl.full([BLOCK_S], float("-inf"), tl.float32)    # per-lane running max of the lse
    l_i = tl.zeros([BLOCK_S], tl.float32)
    acc = tl.zeros([BLOCK_S, BLOCK_D], tl.float32)
    for s0 in range(0, n_valid, BLOCK_S):
        mask_s = (s0 + offs_s) < n_valid
        # .cg: read the other programs' partials from L2, never from this SM's L1.
        lse = tl.load(l_ptrs, mask=mask_s, other=float("-inf"), cache_modifier=".cg")
        part = tl.load(p_ptrs, mask=mask_s[:, None] & mask_d[None, :], other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m_i, lse)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.math.exp2(m_i - m_safe)
        w = tl.math.exp2(lse - m_safe)
        l_i = l_i * alpha + w
        acc = acc * alpha[:, None] + w[:, None] * part
        m_i = m_new
        p_ptrs += BLOCK_S * HEAD_DIM
        l_ptrs += BLOCK_S
    # Merge the BLOCK_S lanes: rescale each to the overall max, then reduce.
    m = tl.max(m_i, 0)
    scale = tl.math.exp2(m_i - m)                      # lanes that saw no split: exp2(-inf) = 0
    out = tl.sum(acc * scale[:, None], 0) / tl.sum(l_i * scale, 0)
    tl.store(Out + row * HEAD_DIM + offs_d, out.to(Out.dtype.element_ty), mask=mask_d)


@triton.jit
def _decode_kernel(
    Q, K, V, Lens, Out, Part, Lse, Count,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    heads_kv, cache_len, chunk_len, num_splits, qk_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
    HAS_LENS: tl.constexpr, SPLIT: tl.constexpr, UPCAST_DOT: tl.constexpr,
):
    # Out (B, Hq, D) contiguous; when SPLIT: Part (B, Hq, S, D) fp32, Lse (B, Hq, S) fp32 and
    # Count (B * Hkv,) int32 zeros, all contiguous.
    split = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // heads_kv
    h = bh % heads_kv
    seqlen = cache_len
    if HAS_LENS:
        seqlen = tl.minimum(tl.maximum(tl.load(Lens + b).to(tl.int32), 0), cache_len)
    start = split * chunk_len
    end = tl.minimum(start + chunk_len, seqlen)

    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < HEAD_DIM
    out_mask = mask_g[:, None] & mask_d[None, :]
    b64 = b.to(tl.int64)
    heads = h * GROUP + offs_g                                   # this KV head's query heads
    rows = b64 * (heads_kv * GROUP) + heads                      # their index in (B * Hq)

    if SPLIT:
        if start >= end:   # this chunk lies past the sequence: nothing to read or merge
            # A length-0 sequence has no split with keys; split 0 writes its zeros.
            zero = tl.zeros([BLOCK_G, BLOCK_D], tl.float32).to(Out.dtype.element_ty)
            tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :], zero,
                     mask=out_mask & (seqlen == 0) & (split == 0))
            return

    q_ptrs = Q + b64 * stride_qb + heads[:, None] * stride_qh + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=out_mask, other=0.0)                                  # (BLOCK_G, BLOCK_D)
    start64 = start.to(tl.int64)
    h64 = h.to(tl.int64)
    k_ptrs = (K + b64 * stride_kb + h64 * stride_kh + start64 * stride_kn
              + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd)          # (BLOCK_N, BLOCK_D)
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
        s = _mma(q, tl.trans(k), UPCAST_DOT) * qk_scale                           # (BLOCK_G, BLOCK_N)
        s = tl.where(mask_n[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptrs, mask=mask_n[:, None] & mask_d[None, :], other=0.0)
        acc = acc * alpha[:, None] + _mma(p.to(v.dtype), v, UPCAST_DOT)          # (BLOCK_G, BLOCK_D)
        m_i = m_new
        k_ptrs += k_step
        v_ptrs += v_step

    if SPLIT:
        # start < end, so every row saw at least one key and l_i > 0.
        tl.store(Part + (rows * num_splits + split)[:, None] * HEAD_DIM + offs_d[None, :],
                 acc / l_i[:, None], mask=out_mask)
        tl.store(Lse + rows * num_splits + split, m_i + tl.math.log2(l_i), mask=mask_g)
        # Every thread's stores precede the counter bump (barrier), and the release/acquire
        # atomic makes them visible to the program that arrives last.
        tl.debug_barrier()
        arrived = tl.atomic_add(Count + bh, 1, sem="acq_rel", scope="gpu")
        n_valid = tl.cdiv(seqlen, chunk_len)                     # splits holding keys
        if arrived == n_valid - 1:
            for g in range(GROUP):
                _merge_splits(Part, Lse, Out, b64 * (heads_kv * GROUP) + h * GROUP + g, n_valid, num_splits,
                              HEAD_DIM, BLOCK_S, BLOCK_D)
            tl.store(Count + bh, 0)                              # every other program has arrived: reset
    else:
        l_safe = tl.where(l_i > 0, l_i, 1.0)                     # length 0: acc is 0, out is 0
        tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :],
                 (acc / l_safe[:, None]).to(Out.dtype.element_ty), mask=out_mask)


_COUNTERS: dict = {}


def _counters(device: torch.device, n: int, stream: int) -> torch.Tensor:
    """Arrival counters of the split merge, zeroed once per device and stream and reused.

    `stream` is the handle of the stream the kernel launches on (0 in the interpreter). The
    program that merges a (batch, kv head) resets its counter, so the buffer is zero again
    when the kernel ends and no memset is launched per call.
    """
    key = (device, stream)
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < n:
        buf = torch.zeros(max(n, 1024), device=device, dtype=torch.int32)
        _COUNTERS[key] = buf
    return buf


@functools.lru_cache(maxsize=None)
def launch_config(head_dim: int, element_size: int) -> tuple[int, int, int]:
    """(BLOCK_N, num_warps, num_stages): about 32 KB of K+V per tile, num_stages tiles in flight.

    On the H200 at D = 128, fp16, BLOCK_N of 32, 64 and 128 with 3-4 stages all stream
    within noise of each other once the grid is full; 64 x 4 warps x 4 stages is kept.
    """
    block_d = max(16, pow2(head_dim))
    block_n = max(16, min(128, 8192 // block_d))
    return block_n, 4, 4


def choose_splits(batch: int, heads_kv: int, cache_len: int, block_n: int, num_sms: int) -> tuple[int, int]:
    """(S, chunk_len): split each sequence into S chunks of chunk_len tokens (a multiple of block_n)."""
    n_blocks = cdiv(cache_len, block_n)
    programs = batch * heads_kv
    if programs >= NO_SPLIT_FILL * num_sms:
        return 1, n_blocks * block_n
    wanted = cdiv(TARGET_WAVES * num_sms, programs)
    return _chunking(n_blocks, max(1, min(wanted, n_blocks // MIN_CHUNK_BLOCKS)), block_n)


def _chunking(n_blocks: int, splits: int, block_n: int) -> tuple[int, int]:
    blocks_per_split = cdiv(n_blocks, max(1, min(splits, n_blocks)))
    return cdiv(n_blocks, blocks_per_split), blocks_per_split * block_n


def _check_inputs(q, k_cache, v_cache, seqlens, sm_scale, num_splits):
    """Shape, dtype and device checks of a call (the values of host lengths: _lengths_to_device)."""
    check_tensor("q", q, DTYPES, ndim=3)
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(cache, torch.Tensor) or cache.dtype != q.dtype:
            kind = cache.dtype if isinstance(cache, torch.Tensor) else type(cache).__name__
            raise ValueError(f"{name} must be a tensor of q's dtype ({q.dtype}), got {kind}")
        if cache.dim() != 4:
            raise ValueError(f"{name} must have 4 dimensions (B, Hkv, Lmax, D), got shape {tuple(cache.shape)}")
    if k_cache.device != q.device or v_cache.device != q.device:
        check_same_device(q=q, k_cache=k_cache, v_cache=v_cache)
    check_no_grad("decode_attention", q=q, k_cache=k_cache, v_cache=v_cache)
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
        return
    if not isinstance(seqlens, torch.Tensor) or seqlens.dtype not in LENGTH_DTYPES:
        kind = seqlens.dtype if isinstance(seqlens, torch.Tensor) else type(seqlens).__name__
        raise ValueError(f"seqlens must be an integer tensor, got {kind}")
    if seqlens.shape != (batch,):
        raise ValueError(f"seqlens must have shape ({batch},), got {tuple(seqlens.shape)}")
    if seqlens.device.type != "cpu" and seqlens.device != q.device:
        raise ValueError(f"seqlens is on {seqlens.device} but q is on {q.device}")


def _lengths_to_device(seqlens, device: torch.device, cache_len: int):
    """Lengths on the host are checked (their values, on every call) and copied to `device`."""
    if seqlens is None or seqlens.device.type != "cpu":
        return seqlens
    if seqlens.numel() and (int(seqlens.min()) < 0 or int(seqlens.max()) > cache_len):
        raise ValueError(f"seqlens must lie in 0..{cache_len} (Lmax), got "
                         f"{int(seqlens.min())}..{int(seqlens.max())}")
    return seqlens.to(device, non_blocking=True)


_PLANS: dict = {}   # layouts of q, k_cache, v_cache, seqlens and the options -> _DecodePlan


class _DecodePlan:
    """A checked call's launch: grid, scratch shapes and every non-tensor kernel argument.

    `fast` (GPU only, set after the first launch when the lengths are None or on the GPU) is
    the compiled kernel (kernels._plans.Launch).
    """
    __slots__ = ("grid", "out_shape", "part_shape", "counters", "scalars", "options", "fast")

    def __init__(self, grid, out_shape, part_shape, counters, scalars, options):
        self.grid, self.out_shape, self.part_shape, self.counters = grid, out_shape, part_shape, counters
        self.scalars, self.options, self.fast = scalars, options, None


def _layout(t: torch.Tensor) -> tuple:
    """What a launch specialises on for tensor t (see kernels._plans)."""
    return t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % ALIGN


def _plan(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_n, num_warps, num_stages):
    """Validate a call and choose its launch (splits, tiles, warps): a _DecodePlan."""
    _check_inputs(q, k_cache, v_cache, seqlens, sm_scale, num_splits)
    batch, heads_q, head_dim = q.shape
    _, heads_kv, cache_len, _ = k_cache.shape
    if batch == 0 or heads_q == 0:
        return _DecodePlan(None, (batch, heads_q, head_dim), None, 0, (), {})
    cfg_n, cfg_w, cfg_s = launch_config(head_dim, q.element_size())
    block_n, num_warps, num_stages = block_n or cfg_n, num_warps or cfg_w, num_stages or cfg_s
    n_blocks = cdiv(cache_len, block_n)
    if num_splits is None:
        splits, chunk = choose_splits(batch, heads_kv, cache_len, block_n, sm_count(q.device))
    else:
        splits, chunk = _chunking(n_blocks, num_splits, block_n)
    group = heads_q // heads_kv
    scale = (head_dim ** -0.5 if sm_scale is None else float(sm_scale)) * LOG2E
    scalars = (*q.stride(), *k_cache.stride(), *v_cache.stride(), heads_kv, cache_len, chunk, splits, scale,
               group, head_dim, max(16, pow2(group)), block_n, max(16, pow2(head_dim)), MERGE_BLOCK_S,
               seqlens is not None, splits > 1,
               # Triton's CPU interpreter multiplies bf16 tiles as raw uint16 bits; give it fp32.
               q.dtype == torch.bfloat16 and interpreting())
    return _DecodePlan((splits, batch * heads_kv), (batch, heads_q, head_dim),
                       (batch, heads_q, splits) if splits > 1 else None, batch * heads_kv, scalars,
                       dict(num_warps=num_warps, num_stages=num_stages))


def _decode(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_n=None, num_warps=None, num_stages=None):
    """Shared launcher; num_splits=None chooses S with choose_splits, 1 writes the output directly.

    Plan cache (kernels._plans): the first call with a given layout of q, the caches and the
    lengths (shapes, strides, dtypes, devices, data pointer offsets) and the same options is
    validated and planned; a repeat call looks the plan up, allocates the output (and the
    split partials) and launches, on a GPU the compiled kernel directly. Lengths on the host
    are still range-checked and copied on every call (their values are not part of the key).
    """
    try:
        key = (_layout(q), _layout(k_cache), _layout(v_cache),
               None if seqlens is None else _layout(seqlens),
               sm_scale, type(sm_scale), num_splits, type(num_splits), block_n, num_warps, num_stages)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError, RuntimeError):   # not tensors, unhashable options: checked below
        key, plan = None, None
    if plan is not None and torch.is_grad_enabled() and (
            q.requires_grad or k_cache.requires_grad or v_cache.requires_grad):
        plan = None                                 # checked (and refused) below
    if plan is not None and plan.fast is not None:
        stream = plan.fast.stream()
        if stream is not None:
            out = torch.empty(plan.out_shape, device=q.device, dtype=q.dtype)      # (B, Hq, D)
            part, lse, count = _scratch(plan, out, stream)
            if aligned(out, part, lse, count):
                plan.fast(stream, q, k_cache, v_cache, q if seqlens is None else seqlens,
                          out, part, lse, count, *plan.scalars)
                return out
    if plan is None:
        plan = _plan(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_n, num_warps, num_stages)
        if key is not None:
            remember(_PLANS, key, plan)
    out = torch.empty(plan.out_shape, device=q.device, dtype=q.dtype)             # (B, Hq, D)
    lens = _lengths_to_device(seqlens, q.device, k_cache.shape[2])
    if plan.grid is None:                                                          # B = 0 or Hq = 0
        return out
    stream = 0 if interpreting() else current_stream()
    part, lse, count = _scratch(plan, out, stream)
    compiled = _decode_kernel[plan.grid](q, k_cache, v_cache, q if lens is None else lens,
                                         out, part, lse, count, *plan.scalars, **plan.options)
    if (plan.fast is None and key is not None and not interpreting() and lens is seqlens
            and aligned(out, part, lse, count)):
        plan.fast = Launch(compiled, plan.grid)
    return out


def _scratch(plan: _DecodePlan, out: torch.Tensor, stream: int):
    """Split partials (B, Hq, S, D) and log-sum-exps (B, Hq, S) in fp32, and the arrival counters.

    Without splits the kernel reads none of them, and `out` stands in for each.
    """
    if plan.part_shape is None:
        return out, out, out
    part = torch.empty((*plan.part_shape, plan.out_shape[2]), device=out.device, dtype=torch.float32)
    lse = torch.empty(plan.part_shape, device=out.device, dtype=torch.float32)
    return part, lse, _counters(out.device, plan.counters, stream)


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
