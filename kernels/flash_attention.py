"""Flash attention forward (the FlashAttention-2 algorithm), written for Hopper in Triton, with a
Gluon kernel (kernels.flash_attention_hopper) taking the shapes it supports on Hopper.

attention(q, k, v, causal=False, sm_scale=None) -> o
    q (B, Hq, Nq, D), k and v (B, Hkv, Nk, D), Hq % Hkv == 0; o (B, Hq, Nq, D) in q's dtype.
attention_triton(...)  the same through the Triton kernel on every device and shape.
kernel_path(q, k, v, causal) -> "gluon-hopper" or "triton": the kernel attention() runs.

Conventions
- fp16 and bf16 (DTYPES); D from 16 to 256, any value (80, 96, 112 included): the kernel works on
  D rounded up to a power of two (BLOCK_D) and masks (or the descriptors zero-fill) the padding.
- Grouped-query attention: query head h reads key/value head h // (Hq // Hkv), never expanded.
- Causal masks are aligned bottom-right, as FlashAttention-2's: query i sees keys
  j <= i + (Nk - Nq); for Nq == Nk the usual lower triangle. When Nq > Nk the first Nq - Nk
  queries see no key; their rows are zeros (FlashAttention-2's convention; torch SDPA's math
  backend returns NaN there, and torch's `is_causal=True` aligns the mask top-left instead).
- sm_scale defaults to 1/sqrt(D) and must be a positive finite number. Scores, softmax
  statistics and the accumulator are fp32, in the log2 domain: log2(e) (LOG2E) is folded into the
  scale once and exp2 replaces exp; probabilities are cast to the input dtype for P V.
- NaN in q, or in a key a query sees, gives that query's row NaN (as SDPA does; `reference`
  states the rules for non-finite inputs). Forward only: inputs that require grad while grad
  mode is on raise ValueError.

Work (`attention_flops`, `visible_pairs`): 2*D FLOPs for q.k and 2*D for p.v per visible (query,
key) pair, i.e. 4*B*Hq*Nq*Nk*D without a mask; causal square shapes count half of that (the
convention of FlashAttention's papers and the SDPA benchmarks), causal Nq != Nk the visible pairs
exactly. Memory traffic (`attention_bytes`): q, k, v read once, o written once.

Hopper path (kernel_path, kernels.flash_attention_hopper.supports): attention() runs the Gluon
kernel where Triton has Gluon (`_hopper`), outside Triton's interpreter, on a GPU of compute
capability 9.0 (CAPABILITY), for fp16/bf16 with D = 128 or 64 (HEAD_DIMS), Nq and Nk multiples of
128 (BLOCK_M, BLOCK_N; at least 128; Nq <= Nk when causal), Hq % Hkv == 0, B*Hq*Nq and B*Hkv*Nk at
most MAX_ROWS, and contiguous, 16-byte aligned q, k, v and output. Everything else runs the
Triton kernel; attention_triton() and `_forward(config=...)` force it.

Triton kernel (_attn_fwd)
- Grid (cdiv(Nq, BLOCK_M), B * Hq): programs of one head are adjacent in launch order, so they
  share K/V tiles in L2; with a causal mask each head's heaviest query blocks start first.
- Online softmax over key blocks (_attn_blocks): blocks every query of the program sees in full
  run without a mask; only the diagonal blocks (causal) or the block past the end of K
  (Nk % BLOCK_N != 0) take the masked path.
- Contiguous rows (last stride 1, 16-byte aligned strides and base) load through per-head tensor
  descriptors (TMA on Hopper), which zero-fill past Nq / Nk and D and clip the output store;
  other layouts use masked pointer loads with any strides.
- On a GPU, CONFIGS (those _prune finds fit D) are autotuned per (Nq bucket, Nk bucket, D, causal,
  dtype, load path), buckets being powers of two capped at BUCKET_CAP; a new key's configs are
  compiled in parallel threads (_precompile), then timed in short bursts (_tune_bench). The
  WARP_SPEC config (a compiler-added producer warpgroup issues the TMA loads, two 4-warp consumer
  warpgroups share 128 query rows; 128 x 128 tiles, 2 stages) competes only without a causal mask,
  on the descriptor path: one key loop, masked only when Nk % BLOCK_N != 0, the form Triton 3.6's
  Hopper warp specialization accepts. The interpreter uses INTERPRETER_CONFIG.

Plan cache (kernels._plans): the key is q, k and v's layout (shapes, strides, dtypes, device, data
pointers' offsets from 16 bytes), causal, sm_scale and their types (attention_triton's calls keyed
apart). The first call with a key is checked, launched as above and kept as a plan holding, on a
GPU, the compiled kernel that ran (the config chosen then, grid and constexprs; for the Gluon
kernel, TMA descriptors re-encoded per call by flash_attention_hopper.LaunchDescriptor). A repeat
call is a dict lookup, the output allocation and one direct launch, with no autotuner, argument
binding or checks (inputs requiring grad with grad mode on are still refused).
`_forward(config=...)` makes no plan; in the interpreter a plan launches through `_attn_fwd[grid]`.

Measurements behind each choice: docs/kernels/attention.md
"""
from __future__ import annotations

import contextlib
import functools
import math

import torch
import triton
import triton.language as tl

from kernels._checks import (LOG2E, check_grid_rows, check_no_grad, check_same_device, check_scale, check_tensor,
                             interpreting)
from kernels._device import cdiv
from kernels._plans import ALIGN, Launch, aligned, layout, remember

DTYPES = (torch.float16, torch.bfloat16)
MIN_HEAD_DIM, MAX_HEAD_DIM = 16, 256


# ---------------------------------------------------------------- work counted once, used by the study

def visible_pairs(seqlen_q: int, seqlen_k: int, causal: bool) -> float:
    """(query, key) pairs the FLOP count charges for one head (see the module docstring)."""
    if not causal:
        return float(seqlen_q * seqlen_k)
    if seqlen_q == seqlen_k:
        return seqlen_q * seqlen_k / 2.0
    # query i sees max(0, i + Nk - Nq + 1) keys; summed over i this is 1 + ... + Nk minus the
    # rows cut off above the first query when Nk > Nq
    cut = max(seqlen_k - seqlen_q, 0)
    return float((seqlen_k * (seqlen_k + 1) - cut * (cut + 1)) // 2)


def attention_flops(batch: int, heads_q: int, seqlen_q: int, seqlen_k: int, head_dim: int,
                    causal: bool) -> float:
    """FLOPs of one forward pass: 2 * D for q.k and 2 * D for p.v per visible pair."""
    return 4.0 * batch * heads_q * head_dim * visible_pairs(seqlen_q, seqlen_k, causal)


def attention_bytes(batch: int, heads_q: int, heads_kv: int, seqlen_q: int, seqlen_k: int,
                    head_dim: int, element_size: int) -> float:
    """Compulsory traffic: q and o (B, Hq, Nq, D) once each, k and v (B, Hkv, Nk, D) once each."""
    return float(element_size * head_dim * batch * (2 * heads_q * seqlen_q + 2 * heads_kv * seqlen_k))


# ---------------------------------------------------------------- kernel

@triton.jit
def _load_tile(src, row0, n_rows, stride_row, stride_col,
               HEAD_DIM: tl.constexpr, ROWS: tl.constexpr, BLOCK_D: tl.constexpr,
               CHECK_ROWS: tl.constexpr, USE_TMA: tl.constexpr):
    """Rows [row0, row0 + ROWS) of a (n_rows, HEAD_DIM) matrix as a (ROWS, BLOCK_D) tile, zero-padded."""
    if USE_TMA:
        tile = src.load([row0, 0])  # the descriptor zero-fills rows >= n_rows and columns >= HEAD_DIM
    else:
        rows = row0 + tl.arange(0, ROWS)
        cols = tl.arange(0, BLOCK_D)
        ptrs = src + rows.to(tl.int64)[:, None] * stride_row + cols[None, :] * stride_col
        if CHECK_ROWS:
            if BLOCK_D == HEAD_DIM:
                tile = tl.load(ptrs, mask=rows[:, None] < n_rows, other=0.0)
            else:
                tile = tl.load(ptrs, mask=(rows[:, None] < n_rows) & (cols[None, :] < HEAD_DIM), other=0.0)
        else:
            if BLOCK_D == HEAD_DIM:
                tile = tl.load(ptrs)
            else:
                tile = tl.load(ptrs, mask=cols[None, :] < HEAD_DIM, other=0.0)
    return tile


@triton.jit
def _attn_blocks(acc, l_i, m_i, q, k_src, v_src,
                 stride_kn, stride_kd, stride_vn, stride_vd,
                 lo, hi, offs_m, diag, N_K, qk_scale,
                 HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                 MASKED: tl.constexpr, CAUSAL: tl.constexpr, USE_TMA: tl.constexpr,
                 WARP_SPEC: tl.constexpr):
    """Fold key blocks [lo, hi) into the running (acc, l_i, m_i) of one query block.

    Scores live in the log2 domain: s = (q . k) * sm_scale * log2(e), p = exp2(s - m).
    MASKED blocks hide keys j > i + diag (CAUSAL; this also hides j >= N_K for every real
    query i < N_Q) or keys j >= N_K (not CAUSAL); unmasked blocks are known to be fully visible.
    """
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPEC):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = _load_tile(k_src, start_n, N_K, stride_kn, stride_kd, HEAD_DIM, BLOCK_N, BLOCK_D, MASKED, USE_TMA)
        qk = tl.dot(q, k.T)  # (BLOCK_M, BLOCK_N), fp32
        if MASKED:
            cols = start_n + offs_n
            if CAUSAL:
                visible = cols[None, :] <= offs_m[:, None] + diag
            else:
                visible = cols[None, :] < N_K
            s = tl.where(visible, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            # a row with nothing visible yet keeps m = -inf; subtract 0 so that p = 0, not NaN
            m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.math.exp2(s - m_sub[:, None])
            alpha = tl.math.exp2(m_i - m_sub)
        else:
            # qk_scale > 0, so max(qk) * scale == max(qk * scale) and one FMA per score remains
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_new[:, None])
            alpha = tl.math.exp2(m_i - m_new)
        l_ij = tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = _load_tile(v_src, start_n, N_K, stride_vn, stride_vd, HEAD_DIM, BLOCK_N, BLOCK_D, MASKED, USE_TMA)
        acc = tl.dot(p.to(v.dtype), v, acc)  # (BLOCK_M, BLOCK_D)
        l_i = l_i * alpha + l_ij
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, O,
              stride_qb, stride_qh, stride_qm, stride_qd,
              stride_kb, stride_kh, stride_kn, stride_kd,
              stride_vb, stride_vh, stride_vn, stride_vd,
              stride_ob, stride_oh, stride_om, stride_od,
              H_Q, GROUP, N_Q, N_K, qk_scale,
              NQ_BUCKET, NK_BUCKET,  # autotuning key only
              HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CAUSAL: tl.constexpr, USE_TMA: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WARP_SPEC: tl.constexpr, EVEN_K: tl.constexpr):
    # grid: (cdiv(N_Q, BLOCK_M), B * H_Q); query blocks of one head are adjacent in launch order
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m  # heaviest block of each head first
    pid_bh = tl.program_id(1)
    b = pid_bh // H_Q
    h = pid_bh % H_Q
    h_kv = h // GROUP
    start_m = pid_m * BLOCK_M

    q_base = Q + b.to(tl.int64) * stride_qb + h.to(tl.int64) * stride_qh  # (N_Q, HEAD_DIM)
    k_base = K + b.to(tl.int64) * stride_kb + h_kv.to(tl.int64) * stride_kh  # (N_K, HEAD_DIM)
    v_base = V + b.to(tl.int64) * stride_vb + h_kv.to(tl.int64) * stride_vh  # (N_K, HEAD_DIM)
    o_base = O + b.to(tl.int64) * stride_ob + h.to(tl.int64) * stride_oh  # (N_Q, HEAD_DIM)
    if USE_TMA:
        q_src = tl.make_tensor_descriptor(q_base, [N_Q, HEAD_DIM], [stride_qm, 1], [BLOCK_M, BLOCK_D])
        k_src = tl.make_tensor_descriptor(k_base, [N_K, HEAD_DIM], [stride_kn, 1], [BLOCK_N, BLOCK_D])
        v_src = tl.make_tensor_descriptor(v_base, [N_K, HEAD_DIM], [stride_vn, 1], [BLOCK_N, BLOCK_D])
        o_dst = tl.make_tensor_descriptor(o_base, [N_Q, HEAD_DIM], [stride_om, 1], [BLOCK_M, BLOCK_D])
    else:
        q_src = q_base
        k_src = k_base
        v_src = v_base
        o_dst = o_base

    # keys [0, full_hi) are visible to every query of this block; [full_hi, hi) need the mask
    diag = N_K - N_Q  # query i sees keys j <= i + diag (bottom-right alignment)
    if CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M + diag, N_K)
        full_hi = tl.maximum(tl.minimum(start_m + 1 + diag, N_K), 0) // BLOCK_N * BLOCK_N
    else:
        hi = N_K
        full_hi = N_K // BLOCK_N * BLOCK_N

    offs_m = start_m + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    q = _load_tile(q_src, start_m, N_Q, stride_qm, stride_qd, HEAD_DIM, BLOCK_M, BLOCK_D, True, USE_TMA)

    if WARP_SPEC:
        # Hopper's automatic warp specialization takes a kernel with one key loop, masked only
        # when Nk % BLOCK_N != 0; with a causal mask it gave wrong results (docs/kernels/attention.md)
        tl.static_assert(not CAUSAL, "WARP_SPEC is for attention without a causal mask")
        acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, k_src, v_src, stride_kn, stride_kd, stride_vn, stride_vd,
                                     0, hi, offs_m, diag, N_K, qk_scale,
                                     HEAD_DIM, BLOCK_N, BLOCK_D, not EVEN_K, False, USE_TMA, True)
    else:
        acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, k_src, v_src, stride_kn, stride_kd, stride_vn, stride_vd,
                                     0, full_hi, offs_m, diag, N_K, qk_scale,
                                     HEAD_DIM, BLOCK_N, BLOCK_D, False, CAUSAL, USE_TMA, False)
        acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, k_src, v_src, stride_kn, stride_kd, stride_vn, stride_vd,
                                     full_hi, hi, offs_m, diag, N_K, qk_scale,
                                     HEAD_DIM, BLOCK_N, BLOCK_D, True, CAUSAL, USE_TMA, False)

    # rows that saw no key (causal, Nq > Nk) have l_i == 0 and acc == 0: they store zeros
    inv_l = 1.0 / tl.where(l_i == 0.0, 1.0, l_i)
    out = (acc * inv_l[:, None]).to(O.dtype.element_ty)
    if USE_TMA:
        o_dst.store([start_m, 0], out)  # clipped to (N_Q, HEAD_DIM)
    else:
        cols = tl.arange(0, BLOCK_D)
        ptrs = o_dst + offs_m.to(tl.int64)[:, None] * stride_om + cols[None, :] * stride_od
        tl.store(ptrs, out, mask=(offs_m[:, None] < N_Q) & (cols[None, :] < HEAD_DIM))


# ---------------------------------------------------------------- configs

def _config(block_m, block_n, warps, stages, warp_spec=False):
    return triton.Config({"BLOCK_M": block_m, "BLOCK_N": block_n, "WARP_SPEC": warp_spec},
                         num_warps=warps, num_stages=stages)


# Hopper: a warpgroup (4 warps) issues wgmma for 64 query rows, so 8 warps cover BLOCK_M = 128.
# _prune keeps the ones that fit shared memory and registers at the head dim: 128x64 on 4 warps
# serves D <= 64 (at D = 128 it needs 255 registers and spills), 64x64 and 128x64 on two stages
# are the ones that fit D = 256.
CONFIGS = [
    _config(128, 128, 8, 3),
    _config(128, 128, 8, 2),
    _config(128, 64, 8, 3),
    _config(128, 64, 8, 2),
    _config(128, 64, 4, 3),
    _config(64, 64, 4, 3),
    # With WARP_SPEC the compiler adds a producer warpgroup for the TMA loads and splits the
    # 128 query rows between two 4-warp consumer warpgroups (12 warps in all); no causal mask
    # (module docstring; measurements in docs/kernels/attention.md)
    _config(128, 128, 4, 2, warp_spec=True),
]
INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 16, "WARP_SPEC": False, "num_warps": 4, "num_stages": 1}
SMEM_BYTES = 227 * 1024  # Hopper's largest shared-memory allocation per program


def _smem_bytes(cfg, block_d, element_size=2):
    """Shared memory a config needs: q, `stages` K and V tiles, and (warp-specialized) a q-sized staging tile."""
    block_m, block_n = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
    tiles = block_m * block_d * (2 if cfg.kwargs["WARP_SPEC"] else 1) + 2 * block_n * block_d * cfg.num_stages
    return tiles * element_size


def _fp32_per_thread(cfg, block_d):
    """fp32 values each math thread holds: the (BLOCK_M, BLOCK_D) accumulator and the
    (BLOCK_M, BLOCK_N) scores. Above ~160 the kernel runs out of its 255 registers (ptxas
    reports spills for 192: 128x64 tiles on 4 warps at D = 128)."""
    block_m, block_n = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
    math_warps = cfg.num_warps * (2 if cfg.kwargs["WARP_SPEC"] else 1)  # two consumer warpgroups
    return block_m * (block_d + block_n) / (32 * math_warps)


def _prune(configs, named_args, **kwargs):
    """Configs that fit shared memory and registers at this head dim, with query blocks no
    taller than needed."""
    block_d, use_tma = kwargs["BLOCK_D"], kwargs["USE_TMA"]
    nq = named_args["NQ_BUCKET"]
    kept = [c for c in configs
            if _smem_bytes(c, block_d) <= SMEM_BYTES and _fp32_per_thread(c, block_d) <= 160
            and (not c.kwargs["WARP_SPEC"] or (use_tma and not kwargs["CAUSAL"]))  # TMA loads, no mask
            and (c.kwargs["BLOCK_M"] <= max(nq, 64))]
    return kept or [_config(64, 32, 4, 2)]


# Autotuning's timing of each config: a few warm-up calls, then about TUNE_REP_MS of calls with
# the L2 cleared before each, short bursts like the ones rooflab's harness times a case in (21
# calls a trial). With Triton's defaults (25 ms of warm-up calls, then 100 ms) two configs that
# differ by 10% in those bursts tie, and the pick flipped between runs (docs/kernels/attention.md).
TUNE_WARMUP_MS = 5
TUNE_REP_MS = 20


def _tune_bench(kernel_call, quantiles):
    return triton.testing.do_bench(kernel_call, warmup=TUNE_WARMUP_MS, rep=TUNE_REP_MS, quantiles=quantiles)


_attn_fwd_tuned = triton.autotune(
    configs=CONFIGS,
    key=["NQ_BUCKET", "NK_BUCKET", "HEAD_DIM", "CAUSAL", "USE_TMA"],  # + the tensors' dtypes
    prune_configs_by={"early_config_prune": _prune},
    do_bench=_tune_bench,
)(triton.heuristics({"EVEN_K": lambda args: args["N_K"] % args["BLOCK_N"] == 0})(_attn_fwd))


# ---------------------------------------------------------------- wrapper

def _tma_compatible(t: torch.Tensor) -> bool:
    """Tensor descriptors need a unit last stride and 16-byte aligned base and strides."""
    size = t.element_size()
    return (t.stride(-1) == 1 and t.data_ptr() % 16 == 0
            and all((s * size) % 16 == 0 for s in t.stride()[:-1]))


def _use_tma(*tensors: torch.Tensor) -> bool:
    if interpreting():
        return all(_tma_compatible(t) for t in tensors)
    if not (tensors[0].is_cuda and torch.cuda.get_device_capability(tensors[0].device)[0] >= 9):
        return False
    return all(_tma_compatible(t) for t in tensors)


def _scratch(size: int, alignment: int, stream):
    """Global memory for the tensor descriptors the kernel builds on the device."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


# Sequence lengths share an autotuning key per power of two up to this; longer ones share the
# key of this length (a query block grid of 64+ blocks per head already fills the GPU there),
# so the costliest shapes do not each pay a round of autotuning.
BUCKET_CAP = 8192


def _bucket(n: int) -> int:
    return max(16, min(triton.next_power_of_2(n), BUCKET_CAP))


_compile_pool = None
_precompiled: set = set()


def _precompile(grid, args, meta) -> None:
    """Compile every config the autotuner is about to try, in parallel threads (Triton's
    AsyncCompileMode), once per autotuning key: autotuning then only times them. Compile
    errors are left for the autotuner, which scores such a config as never fastest."""
    global _compile_pool
    key = (args[-2], args[-1], meta["HEAD_DIM"], meta["CAUSAL"], meta["USE_TMA"], args[0].dtype)
    if key in _precompiled:
        return
    _precompiled.add(key)
    if _compile_pool is None:
        import os
        from concurrent.futures import ThreadPoolExecutor
        _compile_pool = ThreadPoolExecutor(max_workers=min(len(CONFIGS), os.cpu_count() or 1))
    with triton.AsyncCompileMode(_compile_pool, ignore_errors=True):
        _attn_fwd_tuned.warmup(*args, grid=grid, **meta)


def _check(q, k, v, causal, sm_scale):
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t, DTYPES, ndim=4)
    check_same_device(q=q, k=k, v=v)
    check_no_grad("attention", q=q, k=k, v=v)
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    (bq, hq, _, d), (bk, hk, _, dk) = q.shape, k.shape
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    if bq != bk:
        raise ValueError(f"q has batch {bq} but k/v have batch {bk}")
    if dk != d:
        raise ValueError(f"q has head dim {d} but k/v have head dim {dk}")
    if not MIN_HEAD_DIM <= d <= MAX_HEAD_DIM:
        raise ValueError(f"head dim {d} is outside the supported range [{MIN_HEAD_DIM}, {MAX_HEAD_DIM}]")
    if hk == 0 or hq % hk != 0:
        raise ValueError(f"query heads ({hq}) must be a multiple of key/value heads ({hk})")
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be a bool, got {type(causal).__name__}")
    check_scale(sm_scale, positive=True)
    check_grid_rows("batch * query heads", bq * hq)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              sm_scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * sm_scale [+ causal mask]) v for q (B, Hq, Nq, D), k/v (B, Hkv, Nk, D)."""
    return _forward(q, k, v, causal, sm_scale)


def attention_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                     sm_scale: float | None = None) -> torch.Tensor:
    """attention() through the Triton kernel whatever the device and shape (the Hopper path off),
    for comparisons between the two kernels."""
    return _forward(q, k, v, causal, sm_scale, triton_only=True)


# ---------------------------------------------------------------- dispatch

HOPPER_PATH = "gluon-hopper"    # kernels.flash_attention_hopper
TRITON_PATH = "triton"          # _attn_fwd


@functools.lru_cache(maxsize=1)
def _hopper():
    """kernels.flash_attention_hopper, imported on first use; None where Triton has no Gluon."""
    try:
        import kernels.flash_attention_hopper as hopper
    except (ImportError, AttributeError):
        return None
    return hopper


def kernel_path(q, k, v, causal: bool) -> str:
    """The kernel attention() runs for these inputs: HOPPER_PATH where the Gluon kernel supports
    them (kernels.flash_attention_hopper.supports: compute capability 9.0, fp16/bf16, D = 128 or 64,
    Nq and Nk multiples of 128 with Nq <= Nk when causal, contiguous 16-byte aligned tensors, not
    in the interpreter), else TRITON_PATH."""
    hopper = _hopper()
    return HOPPER_PATH if hopper is not None and hopper.supports(q, k, v, causal) else TRITON_PATH


_PLANS: dict = {}   # layouts of q, k, v (kernels._plans), causal, sm_scale and their types -> _Plan

# The kernel's constexpr parameters in signature order. Triton's launcher takes every parameter
# positionally, constexprs included (it skips them), so a direct launch passes these after the
# runtime arguments, with the values the first launch bound.
_CONSTEXPRS = tuple(_attn_fwd.arg_names[_attn_fwd.arg_names.index("HEAD_DIM"):])


class _Plan:
    """A checked call's launch.

    `path` is the kernel that runs it (HOPPER_PATH or TRITON_PATH), `sm_scale` the resolved
    scale. For the Triton kernel, `rest` holds its runtime arguments after O (strides, sizes,
    scale, autotuning buckets), `meta` the constexprs the layout fixes (HEAD_DIM, BLOCK_D,
    CAUSAL, USE_TMA), and `fast` (GPU only, set after the first launch) is
    (kernels._plans.Launch of the compiled kernel the autotuner ran, every argument after O in
    signature order, constexprs included). A HOPPER_PATH plan's `fast` holds the Gluon kernel's
    Launch and its arguments after the four descriptors (flash_attention_hopper.replay_args).
    """
    __slots__ = ("path", "sm_scale", "rest", "meta", "seqlen_q", "programs", "fast")

    def __init__(self, path: str, sm_scale: float, rest: tuple, meta: dict, seqlen_q: int, programs: int):
        self.path, self.sm_scale = path, sm_scale
        self.rest, self.meta, self.seqlen_q, self.programs = rest, meta, seqlen_q, programs
        self.fast = None

    def grid(self, block_m: int) -> tuple[int, int]:
        return (cdiv(self.seqlen_q, block_m), self.programs)


def _lookup(q, k, v, causal, sm_scale, triton_only):
    """(key, plan) of a call: key None when the arguments cannot form one (they are not
    tensors, or are unhashable; the checks refuse them), plan None when the call needs the
    checks (first call with this key, or inputs requiring grad with grad mode on).
    attention_triton's calls (triton_only) have keys of their own."""
    try:
        key = (layout(q), layout(k), layout(v), causal, type(causal), sm_scale, type(sm_scale), triton_only)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError, RuntimeError):
        return None, None
    if plan is not None and torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        plan = None  # requires_grad is not in the key: _check refuses the call
    return key, plan


def _plan(q, k, v, causal, sm_scale, o, allow_hopper: bool) -> _Plan:
    """The launch of a checked call with output o (non-empty, Nk > 0); `allow_hopper`: the Gluon
    kernel may take it (kernel_path; it also needs o contiguous and 16-byte aligned)."""
    batch, heads_q, seqlen_q, head_dim = q.shape
    heads_kv, seqlen_k = k.shape[1], k.shape[2]
    scale = float(sm_scale) if sm_scale is not None else 1.0 / math.sqrt(head_dim)
    rest = (*q.stride(), *k.stride(), *v.stride(), *o.stride(),
            heads_q, heads_q // heads_kv, seqlen_q, seqlen_k, scale * LOG2E,
            _bucket(seqlen_q), _bucket(seqlen_k))
    meta = dict(HEAD_DIM=head_dim, BLOCK_D=max(16, triton.next_power_of_2(head_dim)), CAUSAL=causal,
                USE_TMA=_use_tma(q, k, v, o))
    path = TRITON_PATH
    if allow_hopper and o.is_contiguous() and aligned(o):
        path = kernel_path(q, k, v, causal)
    return _Plan(path, scale, rest, meta, seqlen_q, batch * heads_q)


def _replay(plan: _Plan, q, k, v) -> torch.Tensor | None:
    """A repeat call through the plan's compiled kernel: the output, or None when the direct
    launch does not apply (another current device, an output off the 16-byte grid)."""
    launch, rest = plan.fast
    stream = launch.stream()
    if stream is None:
        return None
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # (B, Hq, Nq, D)
    if o.data_ptr() % ALIGN:
        return None
    if plan.path == HOPPER_PATH:
        launch(stream, *_hopper().launch_descriptors(q, k, v, o), *rest)
        return o
    if plan.meta["USE_TMA"]:
        # The launcher allocates the descriptors' global scratch through Triton's allocator, a
        # context variable: set it on every call, since a call may come from another thread.
        triton.set_allocator(_scratch)
    launch(stream, q, k, v, o, *rest)
    return o


def _launch_tuned(plan: _Plan, args: tuple):
    """Autotuned launch (a new autotuning key's configs compiled first, in parallel threads).

    Returns the compiled kernel that ran, and the grid and constexprs of that launch. Triton
    evaluates the grid with the launch's bound arguments, constexprs included, and the autotuner
    launches the config it chose after timing the others, so the grid's last evaluation is the
    launch that returned (the heuristics wrapper and Autotuner.run return JITFunction.run's
    CompiledKernel in Triton 3.6).
    """
    bound = {}

    def grid(meta):
        bound.update(meta)
        return plan.grid(meta["BLOCK_M"])

    _precompile(grid, args, plan.meta)
    compiled = _attn_fwd_tuned[grid](*args, **plan.meta)
    if compiled is None or not bound:
        return None, None, None
    return compiled, plan.grid(bound["BLOCK_M"]), tuple(bound[name] for name in _CONSTEXPRS)


def _forward(q, k, v, causal, sm_scale, config: dict | None = None, triton_only: bool = False) -> torch.Tensor:
    """attention() with an optional fixed config (BLOCK_M, BLOCK_N, WARP_SPEC, num_warps,
    num_stages) instead of the autotuned (GPU) or interpreter one; used by tests and probes.

    Without a config, calls go through the plan cache (see the module docstring) and take the
    Hopper path where kernel_path gives it, unless `triton_only`; with a config, every call is
    checked and launched through Triton.
    """
    key = plan = None
    if config is None:
        key, plan = _lookup(q, k, v, causal, sm_scale, triton_only)
        if plan is not None and plan.fast is not None:
            o = _replay(plan, q, k, v)
            if o is not None:
                return o
    if plan is None:
        _check(q, k, v, causal, sm_scale)
    o = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # (B, Hq, Nq, D)
    if o.numel() == 0:
        return o
    if k.shape[2] == 0:  # nothing to attend to: zeros, like the rows that see no key
        return o.zero_()
    if plan is None or ((plan.meta["USE_TMA"] or plan.path == HOPPER_PATH) and o.data_ptr() % ALIGN):
        # A planned TMA or Hopper launch needs a 16-byte aligned output (torch's allocators
        # always give one); an output off that grid gets a launch of its own, which is not kept.
        fresh = _plan(q, k, v, causal, sm_scale, o, allow_hopper=config is None and not triton_only)
        if plan is None and key is not None and config is None:
            remember(_PLANS, key, fresh)
        else:
            key = None
        plan = fresh

    if plan.path == HOPPER_PATH:
        hopper = _hopper()
        with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
            compiled = hopper.forward(q, k, v, causal, plan.sm_scale, o)
            if compiled is not None and key is not None and plan.fast is None:
                plan.fast = (Launch(compiled, hopper.grid(q)), hopper.replay_args(q, k, causal, plan.sm_scale))
        return o
    use_tma = plan.meta["USE_TMA"]
    if use_tma and not interpreting():
        triton.set_allocator(_scratch)
    args = (q, k, v, o, *plan.rest)
    with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
        if config is None and not interpreting():
            compiled, grid, constexprs = _launch_tuned(plan, args)
            if compiled is not None and key is not None and plan.fast is None and aligned(o):
                plan.fast = (Launch(compiled, grid), (*plan.rest, *constexprs))
        else:
            config = INTERPRETER_CONFIG if config is None else config
            if config.get("WARP_SPEC") and not use_tma:
                raise ValueError("WARP_SPEC needs the tensor-descriptor path (contiguous rows)")
            if config.get("WARP_SPEC") and causal:
                raise ValueError("WARP_SPEC is for attention without a causal mask")
            cfg = dict(config, EVEN_K=k.shape[2] % config["BLOCK_N"] == 0)
            _attn_fwd[plan.grid(cfg["BLOCK_M"])](*args, **plan.meta, **cfg)
    return o


def chosen_config(q: torch.Tensor, k: torch.Tensor, causal: bool) -> triton.Config | None:
    """The config autotuning picked for this case (after at least one call), for reports."""
    use_tma = _use_tma(q, k, k, q)
    key = (_bucket(q.shape[2]), _bucket(k.shape[2]), q.shape[3], causal, use_tma)
    for cached, cfg in _attn_fwd_tuned.cache.items():
        if cached[:5] == key and str(q.dtype) in cached[5:]:
            return cfg
    return None


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              sm_scale: float | None = None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Materialised attention in `dtype` with this module's conventions (GQA, bottom-right mask,
    zero rows where a query sees no key). Memory: B * Hq * Nq * Nk scores.

    Non-finite inputs: a row is NaN (in the columns concerned) exactly when the q row or a key or
    value it sees holds NaN, as in the kernel and SDPA; keys and values a row does not see never
    reach it (an inf value likewise only reaches the rows that see it). A row that sees no key
    at all (causal, Nq > Nk; or Nk == 0) is zero whatever its inputs, as the kernel writes it and
    as rooflab.studies.attention's reference takes it.
    (The kernel may also give NaN to a row whose hidden keys in its diagonal block hold NaN or inf
    in V, since 0 * NaN is NaN there; the reference does not.)
    """
    _, heads_q, seqlen_q, head_dim = q.shape
    heads_kv, seqlen_k = k.shape[1], k.shape[2]
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(head_dim)
    group = heads_q // heads_kv
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    k = k.repeat_interleave(group, dim=1)  # (B, Hq, Nk, D)
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) * scale  # (B, Hq, Nq, Nk)
    if not causal:
        if seqlen_k == 0:
            return q.new_zeros(q.shape)
        return torch.softmax(scores, dim=-1) @ v  # (B, Hq, Nq, D)
    rows = torch.arange(seqlen_q, device=q.device)[:, None]
    cols = torch.arange(seqlen_k, device=q.device)[None, :]
    hidden = cols > rows + (seqlen_k - seqlen_q)  # (Nq, Nk)
    keyless = hidden.all(dim=-1)[:, None]  # (Nq, 1): rows with no visible key
    probs = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1).masked_fill(keyless, 0.0)
    bad = ~torch.isfinite(v)
    if not bad.any():
        return probs @ v  # (B, Hq, Nq, D)
    # A NaN or inf value reaches the rows that see its key, not (through 0 * inf, 0 * NaN) every
    # row: finite values by the product, the others term by term with hidden terms dropped.
    terms = probs.unsqueeze(-1) * v.masked_fill(~bad, 0.0).unsqueeze(-3)  # (B, Hq, Nq, Nk, D)
    return probs @ v.masked_fill(bad, 0.0) + terms.masked_fill(hidden[..., None], 0.0).sum(dim=-2)
