"""Split-KV decode attention (flash-decoding): one query token per sequence against a KV cache.

    out[b, h] = softmax(q[b, h] . K[b, h // G, :n_b]^T * sm_scale) @ V[b, h // G, :n_b]

q is (B, Hq, D), the caches are (B, Hkv, Lmax, D) with any strides, n_b = seqlens[b] and
G = Hq // Hkv query heads share each KV head (grouped-query attention).

Provides `decode_attention` (S splits a sequence, chosen from the shape or forced),
`decode_attention_nosplit` (S = 1, one program per (batch, kv head): the baseline without split-KV),
`paged_cache` (a shuffled paged copy of contiguous caches), the float64 answers `reference` and
`paged_reference` (each sequence's pages gathered, then `reference`), and `planned_splits`.

Traffic: decoding reads the whole valid cache once and does almost no arithmetic per byte, so its
speed is the rate at which the cache streams from memory. `decode_traffic` is the one place the
count is computed (the decode study divides by it): the K and V bytes read, 2 * sum(n_b) * Hkv * D *
element_size, plus q and out, 2 * B * Hq * D * element_size, for paged caches too. Not counted: the
block table's int32 entries (one per token read, mostly from cache) and the split partials
(B * Hq * S * (D + 1) fp32 values, written and read back by one program per kv head).

Kernel (_decode_kernel): one launch, one program per (split, batch, kv head).
1. A program reads its chunk of its sequence's K and V once, in BLOCK_N-token tiles, for the whole
   query group: the G query heads are the M dimension of a tl.dot (padded to 16), so a KV head is
   never read twice; an online softmax keeps a running max and sum. Split s of S reads tiles
   floor(s * n / S) .. floor((s + 1) * n / S) - 1 of n = cdiv(Lmax, BLOCK_N); a program whose chunk
   starts past its sequence's length exits at once.
2. S > 1: each program writes its normalised fp32 partial and its base-2 log-sum-exp, then bumps a
   per-(batch, kv head) counter (`_counters`). The program that arrives last merges the splits
   holding keys, weighting each by exp2(lse_s - max lse), into the output in the input dtype, for all
   G rows at once (_merge_group: (G, splits, D) partials, MERGE_TILE values a step), and resets the
   counter; no second kernel is launched. S = 1: the program writes the output; there is no counter.

Lengths: seqlens[b] in 0..Lmax (None: all Lmax); a length of 0 gives zeros, and so do caches of
Lmax = 0 (as attention gives where Nk = 0). Host lengths are checked
(ValueError); lengths on the GPU are not read back (that would stall the host): the kernel clamps
them into 0..Lmax, so it never reads outside the cache. The launch depends on the cache shape and on
whether lengths and a table are passed, never on their values. With lengths, B >= 2 and a chosen
S >= 2 (`spread_by_length`), wherever the tile counts differ the kernel deals a KV head's B * S
programs out by length (_ragged_chunk: one chunk length for the launch, at most
RAGGED_SPLIT_LIMIT * S splits a sequence). Unsplit with lengths and 2 <= B <= LONGEST_FIRST_MAX_BATCH,
program b * Hkv + h serves the sequence of rank b, longest first (`longest_first`).

Paged caches (`block_table`, (B, max_pages) int32): the pool is (num_pages, page_size, Hkv, D), any
strides, token-major within a page as in vLLM's FlashAttention backend and FlashInfer's "NHD";
FlashInfer's "HND" and TensorRT-LLM's (num_pages, Hkv, page_size, D) is the same pool passed as
`pool.transpose(1, 2)`. page_size is in PAGE_SIZES (vLLM defaults to 16 tokens); Lmax = max_pages *
page_size. Token t of sequence b is slot t % page_size of page table[b, t // page_size], looked up
per token, so a tile may span pages of any order and BLOCK_N does not depend on page_size. With
PAGED_TABLE_AHEAD a tile's page indices are loaded a tile ahead, the first tile's before the length.
Read: only the pages holding a sequence's tokens, and of its table row those pages' entries and each
split's first tile's. Indices on the GPU are clamped into 0..num_pages-1 (a negative one, taken
unsigned, to the last page); host tables are checked.

Launch (`launch_shape`). P = B * Hkv, SMs = the GPU's SM count, n = cdiv(Lmax, BLOCK_N); "filled"
means P >= NO_SPLIT_FILL (0.9) * SMs. A forced num_splits (at most n), BLOCK_N, warps or stages is kept.
- S (`choose_splits`; at least 1, at most n, rounded down to a whole number of equal-tile chunks):
  filled, no lengths -> 1;
  filled, lengths -> max(cdiv(Lmax, RAGGED_CHUNK_TOKENS), min(cap, n // MIN_CHUNK_BLOCKS)), where
    w = PAGED_PROGRAMS_PER_SM * SMs // P and cap = min(w, RAGGED_FILLED_SPLITS), or, for paged
    caches with P <= PAGED_UNSPLIT_PER_SM * SMs, cap = max(w, min(PAGED_FILLED_MIN_SPLITS,
    Lmax // PAGED_CHUNK_TOKENS));
  below the fill, contiguous or paged with lengths and B >= 2 -> one wave, SMs // P;
  below the fill, other paged calls -> max(SMs // P, min(PAGED_BELOW_FILL_PER_SM * SMs // P, m)),
    m = cdiv(Lmax, PAGED_CHUNK_TOKENS) at B = 1, else n // MIN_CHUNK_BLOCKS.
- Tiles: launch_config (BLOCK_N = 8192 // pow2(D) within 16..128, 4 warps, 4 stages), then, at its
  64-token tiles (D = 65..128), the first rule that applies of:
  long_grouped_chunks (contiguous, lengths, G > 1, S > 1, chunks >= LONG_CHUNK_TOKENS) ->
    LONG_CHUNK_CONFIG, S at most one of its tiles a split;
  paged_long_unsplit (paged, S = 1, filled up to PAGED_UNSPLIT_PER_SM * SMs, Lmax >= LONG_CHUNK_TOKENS)
    -> LONG_CHUNK_CONFIG;
  full_grid (contiguous, no lengths, S = 1, P > FULL_GRID_PROGRAMS_PER_SM * SMs) -> FULL_GRID_CONFIG;
  deep_filled_grid (resident_grid, P > 2 * SMs, Lmax >= DEEP_FILLED_MIN_TOKENS) -> DEEP_FILLED_CONFIG;
  resident_grid (contiguous, no lengths, S = 1, filled up to FULL_GRID_PROGRAMS_PER_SM * SMs) and
    paged_ring (paged, indices ahead, neither paged_long_unsplit nor paged_unsplit_filled: unsplit
    with lengths past PAGED_UNSPLIT_PER_SM * SMs, which keeps launch_config's) -> resident_stages'
    ring (2..4 stages, the deepest at which all cdiv(P * S, SMs) programs an SM fit its shared
    memory) and resident_registers' cap (paged_ring always, resident_grid where it binds).

Measurements behind each choice: docs/kernels/decode.md ("The split rule", "Launch shape rules",
"Paged cache", "Ragged lengths", "The merge", "The workspace and the wrapper's plan cache").
"""
from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl

from kernels._checks import (LOG2E, check_grid_rows, check_no_grad, check_same_device, check_scale,
                             check_tensor, interpreting)
from kernels._device import INTERPRETER_PER_SM, cdiv, per_sm, pow2, sm_count
from kernels._plans import ALIGN, Launch, aligned, current_stream, layout, new_output, on_device, remember

DTYPES = (torch.float16, torch.bfloat16)
MAX_HEAD_DIM = 256
PAGE_SIZES = (16, 32, 64, 128, 256)   # tokens a page of a paged cache holds
# The launch rules' constants (module docstring, "Launch"). The measurements behind each one are in
# docs/kernels/decode.md, under the section named beside it.
MIN_CHUNK_BLOCKS = 2         # paged: more splits than the one-wave rule's give each at least this many
                             # BLOCK_N tiles ("The split rule: paged caches")
NO_SPLIT_FILL = 0.9          # B * Hkv programs on at least this share of the SMs need no split
                             # ("The split rule: one wave of programs, and the fill")
PAGED_PROGRAMS_PER_SM = 4    # paged calls with lengths: split a grid that fills the SMs once until each SM has
                             # about this many programs; without lengths a filled grid is not split
                             # ("The split rule: calls with lengths")
PAGED_BELOW_FILL_PER_SM = 2  # paged, below the fill: at most this many programs an SM, each with a deeper
                             # ring (resident_stages; "The split rule: paged caches")
PAGED_FILLED_MIN_SPLITS = 2  # paged calls with lengths on a grid filled with up to PAGED_UNSPLIT_PER_SM
                             # programs an SM: at least this many splits, where chunks keep PAGED_CHUNK_TOKENS
                             # or more ("The split rule: calls with lengths")
PAGED_UNSPLIT_PER_SM = 2     # ... and past this many programs an SM the contiguous call's split count, and
                             # unsplit its launch too (paged_unsplit_filled; "Paged launches")
RAGGED_CHUNK_TOKENS = 4096   # calls with lengths on a filled grid: chunks no longer than this
                             # ("The split rule: calls with lengths")
RAGGED_FILLED_SPLITS = 2     # contiguous calls with lengths on a filled grid: at most this many splits
                             # besides RAGGED_CHUNK_TOKENS' ("The split rule: calls with lengths")
FULL_GRID_CONFIG = (128, 4, 2)   # (BLOCK_N, num_warps, num_stages) of full_grid launches: unsplit, without
                             # lengths, more than FULL_GRID_PROGRAMS_PER_SM programs an SM ("full_grid")
FULL_GRID_PROGRAMS_PER_SM = 4    # ... up to this many an SM, 64-token tiles at the deepest ring at which all
                             # are resident (resident_grid; "resident_grid and resident_stages")
DEEP_FILLED_CONFIG = (128, 8, 2)  # (BLOCK_N, num_warps, num_stages) of resident_grid launches of more than
                             # two programs an SM whose cache holds at least DEEP_FILLED_MIN_TOKENS: fewer,
                             # deeper programs (deep_filled_grid; "deep_filled_grid")
DEEP_FILLED_MIN_TOKENS = 4096
PAGED_CHUNK_TOKENS = 2048    # paged, one sequence (B = 1): one wave of programs, more only to keep chunks
                             # this short ("The split rule: paged caches")
LONG_CHUNK_TOKENS = 8192     # split launches with lengths, G > 1 and chunks this long take LONG_CHUNK_CONFIG, and
                             # unsplit paged launches of caches this long on a filled grid of up to
                             # PAGED_UNSPLIT_PER_SM programs an SM (paged_long_unsplit)
LONG_CHUNK_CONFIG = (128, 8, 3)   # (BLOCK_N, num_warps, num_stages) for them (long_grouped_chunks,
                             # paged_long_unsplit: no register cap; "long_grouped_chunks", "Paged launches")
MERGE_TILE = 2048            # grouped merge: partial values (G rows x splits x D) loaded per step; its tile
                             # sets the kernel's registers ("The merge: MERGE_TILE")
PAGED_TABLE_AHEAD = True     # paged: each tile's page indices loaded a tile ahead, the first tile's before
                             # the length (resident_stages; "Paged cache: page indices a tile ahead")
RAGGED_SPLIT_LIMIT = 4       # calls with lengths, B >= 2, S >= 2, whose lengths differ: chunks dealt out by
                             # length on the device (_ragged_chunk), a sequence taking at most this many
                             # times S splits (the partials' slots a row; "Ragged lengths: chunks dealt out
                             # by length")
LONGEST_FIRST_MAX_BATCH = 64  # unsplit launches with lengths, 2 <= B <= this: program b * Hkv + h serves the
                             # sequence of rank b by decreasing length (longest_first); each program ranks
                             # all B lengths, B^2 comparisons, so larger batches (not measured) keep grid
                             # order ("Ragged lengths: longest first")
MAX_REGISTERS = 255          # registers a thread may hold on sm_80-sm_90 (resident_registers' ceiling)
PAGED_RING_RESERVE = 8 << 10  # paged: shared memory a program holds besides its ring of K and V tiles
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
def _attend_tile(q, k_ptrs, v_ptrs, mask_n, mask_d, m_i, l_i, acc, qk_scale, UPCAST_DOT: tl.constexpr):
    """One BLOCK_N-token tile of the online softmax: load K and V at k_ptrs / v_ptrs (tokens where
    mask_n), update the running max m_i and sum l_i (log2 units) and the (BLOCK_G, BLOCK_D) accumulator
    acc of q's query rows; returns the new (m_i, l_i, acc)."""
    k = tl.load(k_ptrs, mask=mask_n[:, None] & mask_d[None, :], other=0.0)
    s = _mma(q, tl.trans(k), UPCAST_DOT) * qk_scale                               # (BLOCK_G, BLOCK_N)
    s = tl.where(mask_n[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(v_ptrs, mask=mask_n[:, None] & mask_d[None, :], other=0.0)
    acc = acc * alpha[:, None] + _mma(p.to(v.dtype), v, UPCAST_DOT)              # (BLOCK_G, BLOCK_D)
    return m_new, l_i, acc


@triton.jit
def _merge_group(Part, Lse, Out, row0, n_valid, num_splits, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                 BLOCK_MG: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    """Out[r] = sum_s exp2(lse_s) * Part[r, s] / sum_s exp2(lse_s) over the first n_valid splits, for the
    GROUP rows r = row0.. at once: (BLOCK_MG, BLOCK_S, BLOCK_D) partials a step, read from L2."""
    offs_g = tl.arange(0, BLOCK_MG)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < HEAD_DIM
    rows = row0 + offs_g                                                                  # (BLOCK_MG,)
    l_ptrs = Lse + rows[:, None] * num_splits + offs_s[None, :]                           # (BLOCK_MG, BLOCK_S)
    p_ptrs = (Part + ((rows[:, None] * num_splits + offs_s[None, :]) * HEAD_DIM)[:, :, None]
              + offs_d[None, None, :])                                                    # (BLOCK_MG, BLOCK_S, BLOCK_D)
    m_i = tl.full([BLOCK_MG], float("-inf"), tl.float32)   # running max of each row's lse
    l_i = tl.zeros([BLOCK_MG], tl.float32)
    acc = tl.zeros([BLOCK_MG, BLOCK_D], tl.float32)
    for s0 in range(0, n_valid, BLOCK_S):
        mask_gs = mask_g[:, None] & ((s0 + offs_s) < n_valid)[None, :]
        # .cg: read the other programs' partials from L2, never from this SM's L1.
        lse = tl.load(l_ptrs, mask=mask_gs, other=float("-inf"), cache_modifier=".cg")
        part = tl.load(p_ptrs, mask=mask_gs[:, :, None] & mask_d[None, None, :], other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m_i, tl.max(lse, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)    # padded rows see no split
        alpha = tl.math.exp2(m_i - m_safe)
        w = tl.math.exp2(lse - m_safe[:, None])                   # (BLOCK_MG, BLOCK_S), 0 off the mask
        l_i = l_i * alpha + tl.sum(w, 1)
        acc = acc * alpha[:, None] + tl.sum(w[:, :, None] * part, 1)
        m_i = m_new
        l_ptrs += BLOCK_S
        p_ptrs += BLOCK_S * HEAD_DIM
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_safe[:, None]).to(Out.dtype.element_ty),
             mask=mask_g[:, None] & mask_d[None, :])


@triton.jit
def _ragged_chunk(lens, tiles, mask_b, batch, j, num_splits, part_splits, BLOCK_N: tl.constexpr,
                  BLOCK_B: tl.constexpr):
    """Program j of a KV head's B * S (num_splits = S) when the sequences' lengths differ: every
    sequence takes chunks of one length c (whole tiles), the shortest for which the B sequences need
    at most B * S programs, one at least each (a sequence of n tiles takes max(1, cdiv(n, c))
    splits, at most part_splits); program j serves the sequence and split that j falls on in that
    order. Returns (b, split, start, end, seqlen, splits of b); a program past the last split gets
    b = 0, split = -1 and an empty chunk. `lens` and `tiles` are the (BLOCK_B,) clamped lengths and
    their tile counts, 0 past the batch."""
    target = batch * num_splits
    total = tl.sum(tiles, 0)
    lo = tl.maximum(tl.maximum(tl.cdiv(total, target), tl.cdiv(tl.max(tiles, 0), part_splits)), 1)
    # A chunk of hi tiles needs at most total / hi + B <= target programs, since S >= 2.
    hi = tl.maximum(lo, tl.cdiv(total, target - batch))
    while lo < hi:
        mid = (lo + hi) // 2
        fits = tl.sum(tl.where(mask_b, tl.maximum(tl.cdiv(tiles, mid), 1), 0), 0) <= target
        hi = tl.where(fits, mid, hi)
        lo = tl.where(fits, lo, mid + 1)
    per_seq = tl.where(mask_b, tl.maximum(tl.cdiv(tiles, lo), 1), 0)              # (BLOCK_B,) splits
    after = tl.cumsum(per_seq, 0)                                # programs up to and including b
    b = tl.sum((after <= j).to(tl.int32), 0)                     # the first sequence whose range holds j
    mine = tl.arange(0, BLOCK_B) == b
    n_split = tl.sum(tl.where(mine, per_seq, 0), 0)
    split = j - tl.sum(tl.where(mine, after - per_seq, 0), 0)
    n_tiles = tl.sum(tl.where(mine, tiles, 0), 0)
    seqlen = tl.sum(tl.where(mine, lens, 0), 0)
    idle = b >= batch                                             # past the last sequence's splits
    n_safe = tl.maximum(n_split, 1)
    start = tl.where(idle, 0, ((split * n_tiles) // n_safe) * BLOCK_N)
    end = tl.where(idle, 0, tl.minimum((((split + 1) * n_tiles) // n_safe) * BLOCK_N, seqlen))
    return tl.where(idle, 0, b), tl.where(idle, -1, split), start, end, seqlen, n_split


@triton.jit
def _clamped(lens, cache_len):
    """Lengths as loaded (any integer dtype) clamped into 0..cache_len, then int32: clamped first,
    so that a 64-bit length past int32's range does not wrap."""
    return tl.minimum(tl.maximum(lens, 0), cache_len).to(tl.int32)


@triton.jit
def _rank_by_length(Lens, stride_l, batch, cache_len, rank, BLOCK_B: tl.constexpr):
    """The sequence of rank `rank` among the B clamped lengths, longest first, ties by index: the
    block scheduler starts programs in grid order, so the longest sequences start first and no long
    one is left to run alone at the end of the launch."""
    offs = tl.arange(0, BLOCK_B)
    valid = offs < batch
    lens = tl.where(valid, _clamped(tl.load(Lens + offs * stride_l, mask=valid, other=0), cache_len), -1)
    # ahead[i, j]: sequence j comes before sequence i
    ahead = (lens[None, :] > lens[:, None]) | ((lens[None, :] == lens[:, None]) & (offs[None, :] < offs[:, None]))
    ranks = tl.sum((ahead & valid[None, :]).to(tl.int32), 1)
    return tl.sum(tl.where((ranks == rank) & valid, offs, 0), 0)


@triton.jit
def _write_zeros(Out, b, h, seqlen, split, heads_kv, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                 BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr):
    """A split whose chunk holds no keys: split 0 of a length-0 sequence writes its zero output (no
    split of such a sequence has keys to merge); every other one writes nothing."""
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    rows = b.to(tl.int64) * (heads_kv * GROUP) + h * GROUP + offs_g
    zero = tl.zeros([BLOCK_G, BLOCK_D], tl.float32).to(Out.dtype.element_ty)
    tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :], zero,
             mask=(offs_g < GROUP)[:, None] & (offs_d < HEAD_DIM)[None, :] & (seqlen == 0) & (split == 0))


@triton.jit
def _page_of(tokens, PAGE_SIZE: tl.constexpr):
    """The table column of each token (t // PAGE_SIZE). Tokens are never negative, so the division
    is unsigned: a shift, where the signed one also rounds negatives toward zero.

    The paged tile loop (_attend_chunk) also takes the slot and clamps a device table's entries into
    the pool unsigned, and loads the table unmasked, tokens past the chunk taking its last page's
    entry (their K and V loads are masked): a thread's rows of one page then share one table load
    and one page product. Instruction counts, spills and timings: docs/kernels/decode.md, "Paged
    cache: page lookup"."""
    return (tokens.to(tl.uint32) // PAGE_SIZE).to(tl.int32)


@triton.jit
def _chunk_operands(Q, Table, b, heads, start, limit, offs_n, offs_d, out_mask, stride_qb, stride_qh, stride_qd,
                    stride_tb, stride_tp, PAGE_SIZE: tl.constexpr, TABLE_AHEAD: tl.constexpr):
    """(table row, page indices, q) of a chunk of sequence b from token `start`: b's row of the block
    table, the page indices of the chunk's first tile (TABLE_AHEAD; tokens below `limit`) and the
    (BLOCK_G, BLOCK_D) query rows `heads` of b."""
    b64 = b.to(tl.int64)
    table_row = Table + b64 * stride_tb
    page = offs_n * 0
    if TABLE_AHEAD:
        first = start + offs_n
        page = tl.load(table_row + _page_of(first, PAGE_SIZE) * stride_tp, mask=first < limit, other=0)
    q = tl.load(Q + b64 * stride_qb + heads[:, None] * stride_qh + offs_d[None, :] * stride_qd, mask=out_mask,
                other=0.0)
    return table_row, page, q


@triton.jit
def _attend_chunk(K, V, Out, Part, Lse, Count, stride_kb, stride_kh, stride_kn, stride_kd, stride_vb, stride_vh,
                  stride_vn, stride_vd, stride_tp, heads_kv, num_pages, part_splits, qk_scale, b, h, split,
                  start, end, seqlen, n_valid, q, table_row, page_next,
                  GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr, SPLIT: tl.constexpr, UPCAST_DOT: tl.constexpr,
                  BLOCK_MG: tl.constexpr, PAGE_SIZE: tl.constexpr, TABLE_AHEAD: tl.constexpr):
    """_decode_kernel's program from its chunk on: tokens start..end of sequence b, KV head h (seqlen
    tokens long, n_valid splits holding keys), q its (BLOCK_G, BLOCK_D) query rows, page_next the first
    tile's page indices (paged, TABLE_AHEAD)."""
    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < HEAD_DIM
    out_mask = mask_g[:, None] & mask_d[None, :]
    b64 = b.to(tl.int64)
    heads = h * GROUP + offs_g                                   # this KV head's query heads
    rows = b64 * (heads_kv * GROUP) + heads                      # their rows in (B * Hq)

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
    last_col = end                                             # paged: the chunk's last page's column
    if PAGE_SIZE > 0:
        last_col = _page_of(end - 1, PAGE_SIZE)                  # (the loop runs only when start < end)
    for n0 in range(start, end, BLOCK_N):
        mask_n = (n0 + offs_n) < end
        if PAGE_SIZE > 0:   # token t lives in slot t % PAGE_SIZE of page Table[b, t // PAGE_SIZE]
            tokens = n0 + offs_n
            # tokens past the chunk take its last page's entry: no masked table loads (their K and V are)
            if TABLE_AHEAD:   # this tile's indices were loaded a tile ago; load the next tile's
                page = page_next
                page_next = tl.load(table_row + tl.minimum(_page_of(tokens + BLOCK_N, PAGE_SIZE), last_col)
                                    * stride_tp)
            else:
                page = tl.load(table_row + tl.minimum(_page_of(tokens, PAGE_SIZE), last_col) * stride_tp)
            # never outside the pool: a negative index wraps to a large unsigned one, clamped with the rest
            page = tl.minimum(page.to(tl.uint32), num_pages - 1).to(tl.int64)
            slot = (tokens.to(tl.uint32) % PAGE_SIZE).to(tl.int32)
            k_ptrs = (K + h64 * stride_kh + (page * stride_kb + slot * stride_kn)[:, None]
                      + offs_d[None, :] * stride_kd)                              # (BLOCK_N, BLOCK_D)
            v_ptrs = (V + h64 * stride_vh + (page * stride_vb + slot * stride_vn)[:, None]
                      + offs_d[None, :] * stride_vd)
        m_i, l_i, acc = _attend_tile(q, k_ptrs, v_ptrs, mask_n, mask_d, m_i, l_i, acc, qk_scale, UPCAST_DOT)
        if PAGE_SIZE == 0:
            k_ptrs += k_step
            v_ptrs += v_step

    if SPLIT:
        # start < end (_decode_kernel), so every row saw at least one key and l_i > 0.
        tl.store(Part + (rows * part_splits + split)[:, None] * HEAD_DIM + offs_d[None, :],
                 acc / l_i[:, None], mask=out_mask)
        tl.store(Lse + rows * part_splits + split, m_i + tl.math.log2(l_i), mask=mask_g)
        # Every thread's stores precede the counter bump (barrier), and the release/acquire
        # atomic makes them visible to the program that arrives last.
        tl.debug_barrier()
        bh = b * heads_kv + h
        arrived = tl.atomic_add(Count + bh, 1, sem="acq_rel", scope="gpu")
        if arrived == n_valid - 1:
            _merge_group(Part, Lse, Out, b64 * (heads_kv * GROUP) + h * GROUP, n_valid, part_splits,
                         GROUP, HEAD_DIM, BLOCK_MG, BLOCK_S, BLOCK_D)   # all G rows at once
            tl.store(Count + bh, 0)                              # every other program has arrived: reset
    else:
        l_safe = tl.where(l_i > 0, l_i, 1.0)                     # length 0: acc is 0, out is 0
        tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :],
                 (acc / l_safe[:, None]).to(Out.dtype.element_ty), mask=out_mask)


@triton.jit(do_not_specialize=["n_blocks", "num_splits", "batch", "part_splits"])
def _decode_kernel(
    Q, K, V, Lens, Table, Out, Part, Lse, Count,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_tb, stride_tp, stride_l, heads_kv, cache_len, num_pages, n_blocks, num_splits, qk_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
    HAS_LENS: tl.constexpr, SPLIT: tl.constexpr, UPCAST_DOT: tl.constexpr,
    BLOCK_MG: tl.constexpr, PAGE_SIZE: tl.constexpr, TABLE_AHEAD: tl.constexpr,
    batch, part_splits, SPREAD: tl.constexpr, BLOCK_B: tl.constexpr, LONGEST_FIRST: tl.constexpr,
):
    # Out (B, Hq, D) contiguous; when SPLIT: Part (B, Hq, P, D) fp32, Lse (B, Hq, P) fp32 and
    # Count (B * Hkv,) int32 zeros, all contiguous. Contiguous caches (PAGE_SIZE 0): K and V
    # (B, Hkv, Lmax, D) with strides (b, h, n, d). Paged (PAGE_SIZE > 0): K and V
    # (num_pages, PAGE_SIZE, Hkv, D) with strides passed as (page, h, slot, d), Table
    # (B, max_pages) int32 with strides (stride_tb, stride_tp), and cache_len = max_pages * PAGE_SIZE.
    # Lens (B,) any integer dtype, stride stride_l.
    # Balanced chunks: split s reads the BLOCK_N tiles floor(s * n_blocks / S) up to (not
    # including) floor((s + 1) * n_blocks / S), n_blocks = cdiv(cache_len, BLOCK_N), 1 <= S <= n_blocks.
    # SPREAD (lengths passed, B >= 2, S >= 2): where the lengths' tile counts differ, the same B * S
    # programs of a KV head are dealt out by length instead (_ragged_chunk). Part and Lse hold
    # P = part_splits slots a row (S, or more under SPREAD). LONGEST_FIRST (lengths, S = 1): program
    # b * Hkv + h serves the sequence of rank b by decreasing length instead of sequence b.
    split = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // heads_kv
    h = bh % heads_kv
    if LONGEST_FIRST:   # unsplit with lengths: the sequence of rank b, longest first (longest_first)
        b = _rank_by_length(Lens, stride_l, batch, cache_len, b, BLOCK_B)
    start = ((split * n_blocks) // num_splits) * BLOCK_N

    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < HEAD_DIM
    out_mask = mask_g[:, None] & mask_d[None, :]
    heads = h * GROUP + offs_g                                   # this KV head's query heads
    # The first tile's page indices and q, before (not after) the length is known.
    table_row, page_next, q = _chunk_operands(Q, Table, b, heads, start, cache_len, offs_n, offs_d, out_mask,
                                              stride_qb, stride_qh, stride_qd, stride_tb, stride_tp,
                                              PAGE_SIZE, TABLE_AHEAD)
    seqlen = cache_len
    if HAS_LENS:
        seqlen = _clamped(tl.load(Lens + b * stride_l), cache_len)
    end = tl.minimum((((split + 1) * n_blocks) // num_splits) * BLOCK_N, seqlen)
    # Splits holding keys: those whose first tile lies before the last tile with keys.
    n_valid = tl.cdiv(tl.cdiv(seqlen, BLOCK_N) * num_splits, n_blocks)
    if SPREAD:
        offs_b = tl.arange(0, BLOCK_B)
        mask_b = offs_b < batch
        lens = _clamped(tl.load(Lens + offs_b * stride_l, mask=mask_b, other=0), cache_len)
        tiles = tl.cdiv(lens, BLOCK_N)                                                 # (BLOCK_B,)
        most = tl.max(tiles, 0)
        if tl.min(tl.where(mask_b, tiles, most), 0) != most:   # lengths differ: deal chunks by length
            rb, rsplit, rstart, rend, rlen, rvalid = _ragged_chunk(
                lens, tiles, mask_b, batch, b * num_splits + split, num_splits, part_splits, BLOCK_N, BLOCK_B)
            rtable, rpage, rq = _chunk_operands(Q, Table, rb, heads, rstart, rend, offs_n, offs_d, out_mask,
                                                stride_qb, stride_qh, stride_qd, stride_tb, stride_tp,
                                                PAGE_SIZE, TABLE_AHEAD)
            if SPLIT:
                if rstart >= rend:   # no keys in this chunk (a program past the last split: rsplit = -1)
                    _write_zeros(Out, rb, h, rlen, rsplit, heads_kv, GROUP, HEAD_DIM, BLOCK_G, BLOCK_D)
                    return
            _attend_chunk(K, V, Out, Part, Lse, Count, stride_kb, stride_kh, stride_kn, stride_kd, stride_vb,
                          stride_vh, stride_vn, stride_vd, stride_tp, heads_kv, num_pages, part_splits, qk_scale,
                          rb, h, rsplit, rstart, rend, rlen, rvalid, rq, rtable, rpage,
                          GROUP, HEAD_DIM, BLOCK_G, BLOCK_N, BLOCK_D, BLOCK_S, SPLIT, UPCAST_DOT, BLOCK_MG, PAGE_SIZE,
                          TABLE_AHEAD)
            return
    if SPLIT:
        if start >= end:   # this chunk lies past the sequence: nothing to read or merge
            _write_zeros(Out, b, h, seqlen, split, heads_kv, GROUP, HEAD_DIM, BLOCK_G, BLOCK_D)
            return
    _attend_chunk(K, V, Out, Part, Lse, Count, stride_kb, stride_kh, stride_kn, stride_kd, stride_vb,
                  stride_vh, stride_vn, stride_vd, stride_tp, heads_kv, num_pages, part_splits, qk_scale,
                  b, h, split, start, end, seqlen, n_valid, q, table_row, page_next,
                  GROUP, HEAD_DIM, BLOCK_G, BLOCK_N, BLOCK_D, BLOCK_S, SPLIT, UPCAST_DOT, BLOCK_MG, PAGE_SIZE,
                  TABLE_AHEAD)


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

    64 x 4 warps x 4 stages at D = 65..128. Split launches with lengths of grouped heads over long
    chunks take LONG_CHUNK_CONFIG instead (long_grouped_chunks); launch_shape's other rules may
    replace it too. Measurements: docs/kernels/decode.md, "Launch shape rules: launch_config".
    """
    block_d = max(16, pow2(head_dim))
    block_n = max(16, min(128, 8192 // block_d))
    return block_n, 4, 4


def long_grouped_chunks(group: int, splits: int, chunk_len: int, block_n: int, lengths: bool) -> bool:
    """True for a split launch of a contiguous cache, given the sequence lengths, whose programs each
    stream chunks of at least LONG_CHUNK_TOKENS tokens of Lmax for a query group of G > 1 heads, at the
    64-token tiles of D = 65..128: such launches take LONG_CHUNK_CONFIG's wider tiles. Calls without
    lengths keep launch_config's. Measurements: docs/kernels/decode.md, "long_grouped_chunks".
    """
    return lengths and group > 1 and splits > 1 and chunk_len >= LONG_CHUNK_TOKENS and block_n == 64


def choose_splits(batch: int, heads_kv: int, cache_len: int, block_n: int, num_sms: int,
                  paged: bool = False, lengths: bool = False) -> int:
    """S, the number of splits of each sequence: the one-wave rule for contiguous caches
    (paged=False), the paged rule below for paged caches. `lengths`: the call passes seqlens, whose
    values the plan does not read. A count of s splits is reduced to the number of chunks of
    cdiv(n_blocks, s) whole tiles that cover the cache (`_whole_chunks`: 10 tiles in 6 splits are 5
    chunks of 2), so no split is left without a tile; decode_attention then cuts the cache into S
    balanced chunks (`launch_shape`).

    With P = batch * heads_kv programs and n_blocks = cdiv(cache_len, block_n):
    - P >= NO_SPLIT_FILL * num_sms (a filled grid), no lengths: 1.
    - Filled grid with lengths: min(cap, n_blocks // MIN_CHUNK_BLOCKS), at least 1 and at least
      cdiv(cache_len, RAGGED_CHUNK_TOKENS); cap = min(w, RAGGED_FILLED_SPLITS) with
      w = PAGED_PROGRAMS_PER_SM * num_sms // P (at least 1), or, paged with P <= PAGED_UNSPLIT_PER_SM
      * num_sms, max(w, min(PAGED_FILLED_MIN_SPLITS, cache_len // PAGED_CHUNK_TOKENS)).
    - Below the fill, contiguous or paged with lengths and batch >= 2: one wave, num_sms // P.
    - Below the fill, other paged calls (more programs in flight behind the page lookups): the
      larger of one wave and min(PAGED_BELOW_FILL_PER_SM * num_sms // P, m), where m is
      cdiv(cache_len, PAGED_CHUNK_TOKENS) for one sequence (more splits only as far as chunks of
      PAGED_CHUNK_TOKENS need) and n_blocks // MIN_CHUNK_BLOCKS otherwise.
    Wherever a split call's lengths differ, the kernel deals its programs out by length
    (_ragged_chunk, RAGGED_SPLIT_LIMIT).

    Measurements: docs/kernels/decode.md, "The split rule".
    """
    n_blocks = cdiv(cache_len, block_n)
    programs = batch * heads_kv
    # Whole waves: B * Hkv * S never exceeds PAGED_PROGRAMS_PER_SM * SMs, since one program past
    # it is a wave of its own (H200, page 64, B=1 Hkv=32 L=131072: S=16 497 us, S=17 699), except
    # a paged call with lengths, whose short sequences' chunks exit at once (PAGED_FILLED_MIN_SPLITS).
    wanted = max(1, PAGED_PROGRAMS_PER_SM * num_sms // programs)
    if programs >= NO_SPLIT_FILL * num_sms:
        if not lengths:     # every sequence as long as the cache (or the table's pages): one program each
            return 1
        cap = min(wanted, RAGGED_FILLED_SPLITS)
        if paged and programs <= PAGED_UNSPLIT_PER_SM * num_sms:   # at least PAGED_FILLED_MIN_SPLITS chunks
            cap = max(wanted, min(PAGED_FILLED_MIN_SPLITS, cache_len // PAGED_CHUNK_TOKENS))   # of 2048+ tokens
        splits = max(1, min(cap, n_blocks // MIN_CHUNK_BLOCKS))
        if lengths:
            splits = max(splits, cdiv(cache_len, RAGGED_CHUNK_TOKENS))
        return _whole_chunks(n_blocks, splits)
    wave = max(1, num_sms // programs)   # one wave of programs (module docstring), at most one per tile
    if not paged or (lengths and batch >= 2):   # paged with lengths: chunks dealt out by length, as contiguous
        return _whole_chunks(n_blocks, wave)
    # Paged: up to PAGED_BELOW_FILL_PER_SM programs an SM, but one sequence (no lengths to balance)
    # only for chunks of at most PAGED_CHUNK_TOKENS, and more sequences only down to chunks of
    # MIN_CHUNK_BLOCKS tiles.
    below = max(1, PAGED_BELOW_FILL_PER_SM * num_sms // programs)
    more = cdiv(cache_len, PAGED_CHUNK_TOKENS) if batch == 1 else n_blocks // MIN_CHUNK_BLOCKS
    return _whole_chunks(n_blocks, max(wave, min(below, more)))


def _whole_chunks(n_blocks: int, splits: int) -> int:
    """Chunks of cdiv(n_blocks, splits) tiles that cover n_blocks tiles (at most `splits`)."""
    return cdiv(n_blocks, cdiv(n_blocks, max(1, min(splits, n_blocks))))


def merge_rows(group: int) -> int:
    """Rows of the grouped merge's tile (BLOCK_MG): G padded to a power of two, at least 2."""
    return max(2, pow2(group))


def merge_step(group: int, head_dim: int) -> int:
    """Splits the grouped merge reads per step: MERGE_TILE values of G rows x D, 2..32 splits."""
    return max(2, min(32, MERGE_TILE // (merge_rows(group) * max(16, pow2(head_dim)))))


def planned_splits(batch: int, heads_kv: int, cache_len: int, head_dim: int, element_size: int, num_sms: int,
                   group: int = 1, paged: bool = False, lengths: bool = False) -> int:
    """S that decode_attention launches for this shape."""
    return launch_shape(batch, heads_kv, group, cache_len, head_dim, element_size, num_sms, paged, lengths)[0]


def _check_inputs(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table=None):
    """Shape, dtype and device checks of a call (the values of host lengths and tables: _to_device)."""
    check_tensor("q", q, DTYPES, ndim=3)
    dims = "(B, Hkv, Lmax, D)" if block_table is None else "(num_pages, page_size, Hkv, D)"
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(cache, torch.Tensor) or cache.dtype != q.dtype:
            kind = cache.dtype if isinstance(cache, torch.Tensor) else type(cache).__name__
            raise ValueError(f"{name} must be a tensor of q's dtype ({q.dtype}), got {kind}")
        if cache.dim() != 4:
            raise ValueError(f"{name} must have 4 dimensions {dims}, got shape {tuple(cache.shape)}")
        check_tensor(name, cache, DTYPES)
    if k_cache.device != q.device or v_cache.device != q.device:
        check_same_device(q=q, k_cache=k_cache, v_cache=v_cache)
    check_no_grad("decode_attention", q=q, k_cache=k_cache, v_cache=v_cache)
    batch, heads_q, head_dim = q.shape
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} differ in shape")
    if block_table is None:
        kb, heads_kv, cache_len, kd = k_cache.shape
        if kb != batch:
            raise ValueError(f"q has batch {batch} but the caches have batch {kb}")
    else:
        heads_kv, cache_len, kd = k_cache.shape[2], _check_table(block_table, k_cache, batch, q.device), k_cache.shape[3]
    if kd != head_dim:
        raise ValueError(f"q has head_dim {head_dim} but the caches have head_dim {kd}")
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be 1..{MAX_HEAD_DIM}, got {head_dim}")
    if heads_kv == 0 or heads_q % heads_kv != 0:
        raise ValueError(f"heads_q ({heads_q}) must be a positive multiple of heads_kv ({heads_kv})")
    check_grid_rows("batch * kv heads", batch * heads_kv)
    check_scale(sm_scale, positive=False)
    if num_splits is not None and (isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 1):
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


def _check_table(block_table, k_cache, batch: int, device: torch.device) -> int:
    """Checks of a paged call's block table and page size; returns the tokens a table row holds."""
    if not isinstance(block_table, torch.Tensor) or block_table.dtype != torch.int32:
        kind = block_table.dtype if isinstance(block_table, torch.Tensor) else type(block_table).__name__
        raise ValueError(f"block_table must be an int32 tensor, got {kind}")
    if block_table.dim() != 2 or block_table.shape[0] != batch:
        raise ValueError(f"block_table must have shape ({batch}, max_pages), got {tuple(block_table.shape)}")
    if block_table.device.type != "cpu" and block_table.device != device:
        raise ValueError(f"block_table is on {block_table.device} but q is on {device}")
    num_pages, page_size = k_cache.shape[:2]
    if page_size not in PAGE_SIZES:
        raise ValueError(f"page_size (k_cache.shape[1]) must be a power of two in "
                         f"{PAGE_SIZES[0]}..{PAGE_SIZES[-1]}, got {page_size}")
    if num_pages == 0:
        raise ValueError("the paged caches hold no pages")
    return block_table.shape[1] * page_size


def _to_device(seqlens, block_table, device: torch.device, cache_len: int, num_pages: int):
    """Host lengths and tables are checked (their values, on every call) and copied to `device`.

    Lengths must lie in 0..cache_len (any stride: the kernel takes it); the entries of a host table
    that hold a sequence's tokens must be page indices in 0..num_pages - 1
    (with lengths on the GPU: every entry). Values already on the GPU are not read back (that would
    stall the host): the kernel clamps them.
    """
    host_lens = seqlens is not None and seqlens.device.type == "cpu"
    if host_lens and seqlens.numel() and (int(seqlens.min()) < 0 or int(seqlens.max()) > cache_len):
        what = "(Lmax)" if block_table is None else "(max_pages * page_size, what the block table holds)"
        raise ValueError(f"seqlens must lie in 0..{cache_len} {what}, got "
                         f"{int(seqlens.min())}..{int(seqlens.max())}")
    if block_table is not None and block_table.device.type == "cpu":
        max_pages = block_table.shape[1]
        if seqlens is None or host_lens:
            lengths = torch.full((block_table.shape[0],), cache_len) if seqlens is None else seqlens.long()
            page_size = cache_len // max_pages
            used = torch.arange(max_pages) * page_size < lengths[:, None]                 # (B, max_pages)
            pages = block_table[used]
        else:
            pages = block_table
        if pages.numel() and (int(pages.min()) < 0 or int(pages.max()) >= num_pages):
            raise ValueError(f"block_table holds page indices outside 0..{num_pages - 1} "
                             f"(got {int(pages.min())}..{int(pages.max())})")
        block_table = _copy_checked(block_table, device)
    if host_lens:
        seqlens = _copy_checked(seqlens, device)
    return seqlens, block_table


def _copy_checked(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor whose values were just checked, copied to `device` without waiting for the GPU.
    From pinned memory such a copy reads the host buffer when the stream reaches it, after the caller
    may have rewritten it: a pinned tensor is cloned first into pageable memory, which the copy stages
    before it returns."""
    if device.type == "cuda" and t.is_pinned():
        t = t.clone()
    return t.to(device, non_blocking=True)


_PLANS: dict = {}   # layouts of q, the caches, seqlens, block_table and the options -> _DecodePlan


class _DecodePlan:
    """A checked call's launch: grid, scratch shapes and every non-tensor kernel argument.

    `strides` are q's and the caches' strides as the kernel takes them, `rest` the arguments
    after the block table's strides; `fast` (GPU only, set after the first launch when the
    lengths and table are None or already on the GPU) is the compiled kernel (kernels._plans.Launch).
    """
    __slots__ = ("grid", "out_shape", "part_shape", "counters", "cache_len", "num_pages", "strides",
                 "rest", "options", "fast", "like", "views")

    def __init__(self, grid, out_shape, part_shape=None, counters=0, cache_len=0, num_pages=1,
                 strides=(), rest=(), options=None, like=False):
        self.grid, self.out_shape, self.part_shape, self.counters = grid, out_shape, part_shape, counters
        self.cache_len, self.num_pages, self.strides, self.rest = cache_len, num_pages, strides, rest
        self.options, self.fast = options or {}, None
        self.like = like        # q is contiguous: the output is kernels._plans.new_output's
        self.views = None       # (workspace, partials, lse): views of a stream's shared workspace


def launch_shape(batch: int, heads_kv: int, group: int, cache_len: int, head_dim: int, element_size: int,
                 num_sms: int, paged: bool, lengths: bool, num_splits: int | None = None,
                 block_n: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
                 smem: int = INTERPRETER_PER_SM["smem"], table_ahead: bool | None = None) -> tuple[int, int, int, int]:
    """(S, BLOCK_N, num_warps, num_stages) of a launch; split s reads tiles
    floor(s * n_blocks / S) .. floor((s + 1) * n_blocks / S) - 1 of n_blocks = cdiv(cache_len, BLOCK_N).

    S: choose_splits (the one-wave rule for contiguous caches, its paged rule for paged caches); a
    forced num_splits is kept exactly, up to one tile per split. Unless tiles, warps or stages are
    forced: contiguous long grouped chunks with lengths take LONG_CHUNK_CONFIG; unsplit contiguous launches
    without lengths on a filled grid take, up to FULL_GRID_PROGRAMS_PER_SM programs an SM, the
    launch_config tiles at resident_stages' ring for `smem` bytes of shared memory per SM (all
    programs resident; DEEP_FILLED_CONFIG instead at more than two an SM over long caches,
    deep_filled_grid), and FULL_GRID_CONFIG beyond; paged launches with the page indices a tile
    ahead (table_ahead, None meaning PAGED_TABLE_AHEAD) take resident_stages' ring too, but for
    unsplit ones with lengths past PAGED_UNSPLIT_PER_SM programs an SM (the contiguous call's launch)
    and unsplit ones up to that many over long caches (LONG_CHUNK_CONFIG, paged_long_unsplit;
    paged_ring).

    Measurements: docs/kernels/decode.md, "Launch shape rules".
    """
    chosen = block_n is None and num_warps is None and num_stages is None
    cfg_n, cfg_w, cfg_s = launch_config(head_dim, element_size)
    block_n, num_warps, num_stages = block_n or cfg_n, num_warps or cfg_w, num_stages or cfg_s
    n_blocks = cdiv(cache_len, block_n)
    if num_splits is not None:
        splits = num_splits
    else:
        splits = choose_splits(batch, heads_kv, cache_len, block_n, num_sms, paged=paged, lengths=lengths)
    splits = max(1, min(splits, n_blocks))
    if chosen and not paged and long_grouped_chunks(group, splits, (n_blocks // splits) * block_n, block_n, lengths):
        block_n, num_warps, num_stages = LONG_CHUNK_CONFIG
        splits = min(splits, cdiv(cache_len, block_n))
    ring = chosen and paged_ring(batch * heads_kv, splits, num_sms, paged, lengths, cache_len, block_n, table_ahead)
    if chosen and paged_long_unsplit(batch * heads_kv, splits, num_sms, paged, cache_len, block_n):
        block_n, num_warps, num_stages = LONG_CHUNK_CONFIG
    if chosen and full_grid(batch * heads_kv, splits, num_sms, paged, lengths, block_n):
        block_n, num_warps, num_stages = FULL_GRID_CONFIG
    if chosen and deep_filled_grid(batch * heads_kv, splits, num_sms, paged, lengths, block_n, cache_len):
        block_n, num_warps, num_stages = DEEP_FILLED_CONFIG
    if ring or chosen and resident_grid(batch * heads_kv, splits, num_sms, paged, lengths, block_n):
        num_stages = resident_stages(batch * heads_kv * splits, num_sms, smem, block_n, head_dim, element_size)
    return splits, block_n, num_warps, num_stages


def paged_unsplit_filled(programs: int, splits: int, num_sms: int, paged: bool, lengths: bool) -> bool:
    """True for an unsplit paged launch with lengths of more than PAGED_UNSPLIT_PER_SM programs an SM: it
    takes the contiguous call's launch (launch_config's tiles and ring, longest first, no register cap)
    rather than resident_stages' ring, which is 2 stages deep there."""
    return paged and lengths and splits == 1 and programs > PAGED_UNSPLIT_PER_SM * num_sms


def paged_long_unsplit(programs: int, splits: int, num_sms: int, paged: bool, cache_len: int,
                       block_n: int) -> bool:
    """True for an unsplit paged launch on a filled grid (NO_SPLIT_FILL) of up to PAGED_UNSPLIT_PER_SM
    programs an SM over a cache of at least LONG_CHUNK_TOKENS, at the 64-token tiles of D = 65..128: it
    takes LONG_CHUNK_CONFIG (fewer, wider tiles in flight behind each page lookup), without
    resident_stages' ring or a register cap."""
    return (paged and splits == 1 and block_n == 64 and cache_len >= LONG_CHUNK_TOKENS
            and NO_SPLIT_FILL * num_sms <= programs <= PAGED_UNSPLIT_PER_SM * num_sms)


def paged_ring(programs: int, splits: int, num_sms: int, paged: bool, lengths: bool, cache_len: int,
               block_n: int, table_ahead: bool | None = None) -> bool:
    """True for a paged launch whose page indices come a tile ahead (table_ahead, None meaning
    PAGED_TABLE_AHEAD), at launch_config's `block_n`, but for paged_unsplit_filled's and
    paged_long_unsplit's: it takes resident_stages' ring and resident_registers' cap."""
    ahead = PAGED_TABLE_AHEAD if table_ahead is None else table_ahead
    return (paged and ahead and not paged_unsplit_filled(programs, splits, num_sms, paged, lengths)
            and not paged_long_unsplit(programs, splits, num_sms, paged, cache_len, block_n))


def full_grid(programs: int, splits: int, num_sms: int, paged: bool, lengths: bool, block_n: int) -> bool:
    """True for an unsplit contiguous launch without lengths, at 64-token tiles, of more than
    FULL_GRID_PROGRAMS_PER_SM programs an SM: it takes FULL_GRID_CONFIG."""
    return not (paged or lengths) and splits == 1 and block_n == 64 and programs > FULL_GRID_PROGRAMS_PER_SM * num_sms


def deep_filled_grid(programs: int, splits: int, num_sms: int, paged: bool, lengths: bool, block_n: int,
                     cache_len: int) -> bool:
    """True for a resident_grid launch of more than two programs an SM (where resident_stages' ring of
    64-token tiles is 2 stages deep) over a cache of at least DEEP_FILLED_MIN_TOKENS: it takes
    DEEP_FILLED_CONFIG, fewer and deeper programs, and no register cap (_plan: resident_grid is False
    at its 128-token tiles)."""
    return (resident_grid(programs, splits, num_sms, paged, lengths, block_n) and programs > 2 * num_sms
            and cache_len >= DEEP_FILLED_MIN_TOKENS)


def resident_grid(programs: int, splits: int, num_sms: int, paged: bool, lengths: bool, block_n: int) -> bool:
    """True for an unsplit contiguous launch without lengths, at 64-token tiles, of NO_SPLIT_FILL x SMs
    to FULL_GRID_PROGRAMS_PER_SM x SMs programs: the deepest ring at which all are resident
    (resident_stages), registers capped so that they are where a cap binds (resident_registers, _plan)."""
    return (not (paged or lengths) and splits == 1 and block_n == 64
            and NO_SPLIT_FILL * num_sms <= programs <= FULL_GRID_PROGRAMS_PER_SM * num_sms)


def resident_stages(programs: int, num_sms: int, smem: int, block_n: int, head_dim: int, element_size: int) -> int:
    """num_stages of a paged launch whose page indices are loaded a tile ahead, or of an unsplit
    contiguous one on a grid of up to FULL_GRID_PROGRAMS_PER_SM programs an SM (resident_grid): the
    deepest ring of K and V tiles, 2 to 4 (num_stages - 1 tiles in shared memory), at which all the
    launch's programs are resident at once, `smem` bytes of shared memory per SM shared by
    cdiv(programs, SMs) of them. H200 (228 KB an SM, 32 KB of K and V a tile at D = 128): 4 stages
    up to 2 programs per SM, 3 at 3, 2 from 4 on. Measurements: docs/kernels/decode.md, "Paged
    cache: page indices a tile ahead" and "resident_grid and resident_stages"."""
    tile = 2 * block_n * max(16, pow2(head_dim)) * element_size
    resident = cdiv(programs, num_sms)
    return max(2, min(4, 1 + (smem // resident - PAGED_RING_RESERVE) // tile))


def resident_registers(programs: int, num_sms: int, num_warps: int, regs: int) -> int:
    """maxnreg of a paged launch whose page indices are loaded a tile ahead, or of a resident_grid
    launch where it binds (contiguous: 128 registers at 64/4/2 with or without it, so there it only
    guards other builds): the registers a thread
    may use with all the launch's programs of num_warps warps resident, cdiv(programs, SMs) of them
    an SM (at most PAGED_PROGRAMS_PER_SM), on an SM of `regs` registers; a multiple of 8, at most 255.
    At G = 1 the loop otherwise compiles to 156 registers, three programs an SM, and the paged rule's
    four an SM take two waves; capped at 128 it spills 2-4 (docs/kernels/decode.md, "Paged cache:
    registers")."""
    resident = max(1, min(cdiv(programs, num_sms), PAGED_PROGRAMS_PER_SM))
    return min(MAX_REGISTERS, regs // (resident * num_warps * 32) // 8 * 8)


def spread_by_length(batch: int, splits: int, lengths: bool, forced: bool) -> bool:
    """True when a launch deals its chunks out by length wherever the lengths differ (_ragged_chunk):
    lengths passed, B >= 2 and S >= 2 chosen by the rule (a forced num_splits is kept exactly)."""
    return lengths and not forced and batch >= 2 and splits >= 2


def longest_first(batch: int, splits: int, lengths: bool) -> bool:
    """True when an unsplit launch with lengths takes its sequences longest first (_rank_by_length):
    lengths passed, S = 1 and 2 <= B <= LONGEST_FIRST_MAX_BATCH."""
    return lengths and splits == 1 and 2 <= batch <= LONGEST_FIRST_MAX_BATCH


def _plan(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table, block_n, num_warps, num_stages,
          table_ahead=None, maxnreg=None, spread=None):
    """Validate a call and choose its launch (splits, tiles, warps): a _DecodePlan."""
    _check_inputs(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table)
    batch, heads_q, head_dim = q.shape
    if block_table is None:
        _, heads_kv, cache_len, _ = k_cache.shape
        num_pages, page_size = 1, 0
        k_strides, v_strides = k_cache.stride(), v_cache.stride()                 # (b, h, n, d)
    else:
        num_pages, page_size, heads_kv, _ = k_cache.shape
        cache_len = block_table.shape[1] * page_size
        (kp, kn, kh, kd), (vp, vn, vh, vd) = k_cache.stride(), v_cache.stride()
        k_strides, v_strides = (kp, kh, kn, kd), (vp, vh, vn, vd)                 # (page, h, slot, d)
    if batch == 0 or heads_q == 0 or cache_len == 0:     # nothing to launch; Lmax = 0: zeros, as length 0 gives
        return _DecodePlan(None, (batch, heads_q, head_dim), cache_len=cache_len, num_pages=num_pages)
    group = heads_q // heads_kv
    chosen = block_n is None and num_warps is None and num_stages is None
    ahead = page_size > 0 and (PAGED_TABLE_AHEAD if table_ahead is None else table_ahead)
    num_sms = sm_count(q.device)
    splits, block_n, num_warps, num_stages = launch_shape(
        batch, heads_kv, group, cache_len, head_dim, q.element_size(), num_sms,
        block_table is not None, seqlens is not None, num_splits, block_n, num_warps, num_stages,
        per_sm(q.device, "smem"), ahead)
    resident = resident_grid(batch * heads_kv, splits, num_sms, page_size > 0, seqlens is not None, block_n)
    ring = paged_ring(batch * heads_kv, splits, num_sms, page_size > 0, seqlens is not None, cache_len,
                      launch_config(head_dim, q.element_size())[0], ahead)
    if maxnreg is None and chosen and (ring or resident):
        cap = resident_registers(splits * batch * heads_kv, num_sms, num_warps, per_sm(q.device, "regs"))
        # a contiguous launch takes only a cap that binds: an explicit 255 changes ptxas's allocation
        # (sm_90, 64/4/4: 160 registers against 128 without; probes/decode_resources.py)
        maxnreg = cap if ring or cap < MAX_REGISTERS else None
    scale = (head_dim ** -0.5 if sm_scale is None else float(sm_scale)) * LOG2E
    n_blocks = cdiv(cache_len, block_n)
    if spread is None:   # the rule's choice; True / False (probes) force it, still only where it applies
        spread = num_splits is None
    spread = bool(spread) and spread_by_length(batch, splits, seqlens is not None, False)
    part_splits = min(n_blocks, RAGGED_SPLIT_LIMIT * splits) if spread else splits
    ranked = longest_first(batch, splits, seqlens is not None)
    rest = (heads_kv, cache_len, num_pages, n_blocks, splits, scale,
            group, head_dim, max(16, pow2(group)), block_n, max(16, pow2(head_dim)),
            merge_step(group, head_dim) if splits > 1 else 2,   # S = 1 merges nothing: one kernel for all
            seqlens is not None, splits > 1,
            # Triton's CPU interpreter multiplies bf16 tiles as raw uint16 bits; give it fp32.
            q.dtype == torch.bfloat16 and interpreting(), merge_rows(group), page_size,
            ahead, batch, part_splits, spread, max(16, pow2(batch)) if spread or ranked else 16, ranked)
    return _DecodePlan((splits, batch * heads_kv), (batch, heads_q, head_dim),
                       (batch, heads_q, part_splits) if splits > 1 else None, batch * heads_kv, cache_len, num_pages,
                       (*q.stride(), *k_strides, *v_strides), rest,
                       dict(num_warps=num_warps, num_stages=num_stages,
                            **({} if maxnreg is None else {"maxnreg": maxnreg})), like=q.is_contiguous())


def _decode(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table=None,
            block_n=None, num_warps=None, num_stages=None, table_ahead=None, maxnreg=None, spread=None):
    """Shared launcher; num_splits=None chooses S (launch_shape), 1 writes the output directly.

    Plan cache (kernels._plans): the first call with a given layout of q, the caches, the
    lengths and the block table (shapes, strides, dtypes, devices, data pointer offsets) and
    the same options is validated and planned; a repeat call looks the plan up, allocates the
    output and launches, on a GPU the compiled kernel directly (the split partials are views of
    the stream's workspace, `_scratch`), every tensor passed as its address (kernels._plans).
    Lengths and tables on the host are still checked and copied on every call (their values
    are not part of the key).
    """
    try:
        key = (layout(q), layout(k_cache), layout(v_cache),
               None if seqlens is None else layout(seqlens),
               None if block_table is None else layout(block_table),
               sm_scale, type(sm_scale), num_splits, type(num_splits), block_n, num_warps, num_stages,
               table_ahead, maxnreg, spread)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError, RuntimeError):   # not tensors, unhashable options: checked below
        key, plan = None, None
    if plan is not None and torch.is_grad_enabled() and (
            q.requires_grad or k_cache.requires_grad or v_cache.requires_grad):
        plan = None                                 # checked (and refused) below
    if plan is not None and plan.fast is not None:
        stream = plan.fast.stream()
        if stream is not None:
            out = new_output(q, plan.like)                                         # (B, Hq, D)
            part, lse, count = _scratch(plan, out, stream)
            # addresses, not tensors: Triton's launcher then asks the driver about none of the nine
            o_ptr, p_ptr, l_ptr, c_ptr = out.data_ptr(), part.data_ptr(), lse.data_ptr(), count.data_ptr()
            if not (o_ptr % ALIGN or p_ptr % ALIGN or l_ptr % ALIGN or c_ptr % ALIGN):
                q_ptr = q.data_ptr()
                plan.fast(stream, q_ptr, k_cache.data_ptr(), v_cache.data_ptr(),
                          q_ptr if seqlens is None else seqlens.data_ptr(),
                          q_ptr if block_table is None else block_table.data_ptr(), o_ptr, p_ptr, l_ptr, c_ptr,
                          *plan.strides, *(block_table.stride() if block_table is not None else (0, 0)),
                          1 if seqlens is None else seqlens.stride(0), *plan.rest)
                return out
    if plan is None:
        plan = _plan(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table,
                     block_n, num_warps, num_stages, table_ahead, maxnreg, spread)
        if key is not None:
            remember(_PLANS, key, plan)
    out = new_output(q, plan.like)                                                 # (B, Hq, D)
    lens, table = _to_device(seqlens, block_table, q.device, plan.cache_len, plan.num_pages)
    if plan.grid is None:                                               # B = 0, Hq = 0 or Lmax = 0
        return out.zero_()
    with on_device(q):                        # Triton launches on the current device
        stream = 0 if interpreting() else current_stream()
        part, lse, count = _scratch(plan, out, stream)
        compiled = _decode_kernel[plan.grid](
            q, k_cache, v_cache, q if lens is None else lens, q if table is None else table,
            out, part, lse, count, *plan.strides, *(table.stride() if table is not None else (0, 0)),
            1 if lens is None else lens.stride(0), *plan.rest, **plan.options)
        if (plan.fast is None and key is not None and not interpreting() and lens is seqlens
                and table is block_table and aligned(out, part, lse, count)):
            plan.fast = Launch(compiled, plan.grid)                    # records the device it ran on
    return out


_WORKSPACE: dict = {}   # (device, stream handle) -> fp32 buffer the split partials of that stream share


def _scratch(plan: _DecodePlan, out: torch.Tensor, stream: int):
    """Split partials (B, Hq, S, D) and log-sum-exps (B, Hq, S) in fp32, and the arrival counters.

    Without splits the kernel reads none of them, and `out` stands in for each. On a GPU, outside
    a CUDA graph capture, the partials are views of one workspace per device and stream, grown to
    the largest launch seen: launches on a stream run one after another and each writes its
    partials before reading them, so they can share it, and a repeat call allocates nothing
    (the views are kept in the plan). In the interpreter and inside a capture (where a graph
    needs buffers of its own pool) each call allocates its own. Host time of a repeat call:
    docs/kernels/decode.md, "The workspace and the wrapper's plan cache".
    """
    if plan.part_shape is None:
        return out, out, out
    counters = _counters(out.device, plan.counters, stream)
    part_shape = (*plan.part_shape, plan.out_shape[2])
    if interpreting() or (out.is_cuda and torch.cuda.is_current_stream_capturing()):
        part = torch.empty(part_shape, device=out.device, dtype=torch.float32)
        lse = torch.empty(plan.part_shape, device=out.device, dtype=torch.float32)
        return part, lse, counters
    key = (out.device, stream)
    buf = _WORKSPACE.get(key)
    if plan.views is None or plan.views[0] is not buf:
        n_part = math.prod(part_shape)
        lse_at = cdiv(n_part, 4) * 4                          # the log-sum-exps start 16-byte aligned
        need = lse_at + math.prod(plan.part_shape)
        if buf is None or buf.numel() < need:
            buf = torch.empty(pow2(need), device=out.device, dtype=torch.float32)   # room to grow
            _WORKSPACE[key] = buf
        plan.views = (buf, buf[:n_part].view(part_shape), buf[lse_at:need].view(plan.part_shape))
    return plan.views[1], plan.views[2], counters


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     seqlens: torch.Tensor | None = None, sm_scale: float | None = None,
                     num_splits: int | None = None, block_table: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of one query token per sequence over its KV cache, split across the SMs.

    q (B, Hq, D); k_cache, v_cache (B, Hkv, Lmax, D), Hq a multiple of Hkv, any strides;
    fp16 or bf16, D <= 256. seqlens (B,) integer lengths in 0..Lmax (None: all Lmax; 0 gives
    zeros). sm_scale defaults to 1/sqrt(D). num_splits forces the number of KV splits (at most
    one per BLOCK_N tile; splits read balanced runs of whole tiles); None chooses it from the shape.
    Returns (B, Hq, D) in q's dtype.

    Paged caches: with block_table (B, max_pages) int32, k_cache and v_cache are pools of
    pages (num_pages, page_size, Hkv, D) with any strides, page_size a power of two in
    16..256, and token t of sequence b is slot t % page_size of page block_table[b, t // page_size];
    Lmax is max_pages * page_size. See the module docstring.
    """
    return _decode(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table)


def decode_attention_nosplit(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                             seqlens: torch.Tensor | None = None, sm_scale: float | None = None) -> torch.Tensor:
    """Same computation with one program per (batch, kv head): the baseline without split-KV."""
    return _decode(q, k_cache, v_cache, seqlens, sm_scale, 1)


def paged_cache(k_cache: torch.Tensor, v_cache: torch.Tensor, page_size: int,
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A paged copy of contiguous caches (B, Hkv, Lmax, D): (k_pages, v_pages, block_table).

    Each sequence's Lmax tokens fill cdiv(Lmax, page_size) pages (the last one padded with
    zeros); the B * max_pages pages sit in the pool (num_pages, page_size, Hkv, D) in an order
    shuffled by `seed`, so no sequence's pages are adjacent by construction. block_table is
    (B, max_pages) int32 on the caches' device.
    """
    batch, heads_kv, cache_len, head_dim = k_cache.shape
    max_pages = cdiv(cache_len, page_size)
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(batch * max_pages, generator=gen)                       # pool slot of each page
    pools = []
    for cache in (k_cache, v_cache):
        pool = torch.zeros(batch * max_pages, page_size, heads_kv, head_dim, dtype=cache.dtype,
                           device=cache.device)                                     # (num_pages, P, Hkv, D)
        padded = torch.zeros(max_pages * page_size, heads_kv, head_dim, dtype=cache.dtype, device=cache.device)
        for b in range(batch):
            padded[:cache_len] = cache[b].transpose(0, 1)                           # (Lmax, Hkv, D)
            pool[order[b * max_pages:(b + 1) * max_pages].to(cache.device)] = \
                padded.view(max_pages, page_size, heads_kv, head_dim)
        pools.append(pool)
    table = order.view(batch, max_pages).to(device=k_cache.device, dtype=torch.int32)
    return pools[0], pools[1], table


def paged_reference(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor, block_table: torch.Tensor,
                    seqlens: torch.Tensor | None = None, sm_scale: float | None = None,
                    dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Decode attention over paged caches in `dtype`: each sequence's pages gathered, then `reference`."""
    batch, _, head_dim = q.shape
    page_size = k_pages.shape[1]
    full = block_table.shape[1] * page_size
    lengths = [full] * batch if seqlens is None else [int(n) for n in seqlens.tolist()]
    out = torch.zeros(batch, q.shape[1], head_dim, device=q.device, dtype=dtype)
    for b, n in enumerate(lengths):
        pages = block_table[b, :cdiv(n, page_size)].long().to(k_pages.device)
        k = k_pages[pages].flatten(0, 1)[:n].transpose(0, 1)[None]              # (1, Hkv, n, D)
        v = v_pages[pages].flatten(0, 1)[:n].transpose(0, 1)[None]
        if n:
            out[b] = reference(q[b:b + 1], k, v, None, sm_scale, dtype)[0]
    return out


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
