"""kernels.flash_decoding in Triton's CPU interpreter against a float64 reference, and the decode study's plumbing."""
import math

import pytest
import torch
import triton
import triton.language as tl

import kernels
from kernels import flash_decoding as decode
from kernels._device import cdiv
from kernels.flash_decoding import choose_splits, decode_attention, decode_attention_nosplit, decode_traffic, reference
from rooflab.bench import TOLERANCE, error_metrics
from rooflab.studies import decode as study


def _inputs(batch, heads_q, heads_kv, cache_len, head_dim, dtype, scale=1.0):
    q = (torch.randn(batch, heads_q, head_dim) * scale).to(dtype)     # (B, Hq, D)
    k = torch.randn(batch, heads_kv, cache_len, head_dim).to(dtype)   # (B, Hkv, L, D)
    v = torch.randn(batch, heads_kv, cache_len, head_dim).to(dtype)
    return q, k, v


def _ragged(batch, cache_len):
    """Lengths with both extremes: 1 and cache_len, then random ones."""
    lens = torch.randint(1, cache_len + 1, (batch,), dtype=torch.int32)
    lens[0] = 1
    if batch > 1:
        lens[1] = cache_len
    return lens


def _rest(plan, name):
    """The plan's launch argument `name` (a parameter of _decode_kernel from heads_kv on)."""
    names = decode._decode_kernel.arg_names
    return plan.rest[names.index(name) - names.index("heads_kv")]


def _assert_close(out, ref, dtype):
    """Every (sequence, head) output row within the study's relative tolerance of its own norm:
    a whole-tensor norm is dominated by the short sequences (a one-token sequence's output is a V
    row, a long one's an average of many), so a wrong long sequence would hide in it. A row whose
    reference is all zero (a sequence of length 0) must be zero."""
    assert out.dtype == dtype
    assert torch.isfinite(out).all(), "unwritten or non-finite outputs"
    empty = ref.flatten(0, -2).norm(dim=-1) == 0
    assert not out.flatten(0, -2)[empty].any(), "non-zero output for a sequence of length 0"
    worst = error_metrics(out, ref, per_row=True)[1]
    assert worst < TOLERANCE[str(dtype).removeprefix("torch.")], worst


def _case_past_lengths_poisoned(heads_q, heads_kv, cache_len, head_dim, dtype, lens, page_size, seed):
    """(q, k, v, block table or None, float64 reference): the cache past each length is NaN (K) and
    inf (V), so a read there shows; with page_size, k and v are a shuffled paged pool of it."""
    q, k, v = _inputs(len(lens), heads_q, heads_kv, cache_len, head_dim, dtype)
    for b, n in enumerate(lens.tolist()):
        k[b, :, n:] = float("nan")
        v[b, :, n:] = float("inf")
    ref = reference(q, k, v, lens)
    table = None
    if page_size:
        k, v, table = decode.paged_cache(k, v, page_size, seed=seed)
    return q, k, v, table, ref


def _assert_each_sequence(out, ref, lengths, dtype):
    """Sequence by sequence: zeros for a length 0, else close to the reference."""
    for b, n in enumerate(lengths):
        if n == 0:
            assert torch.equal(out[b], torch.zeros_like(out[b]))
        else:
            _assert_close(out[b], ref[b], dtype)


CASES = [  # batch, heads_q, heads_kv, cache_len, head_dim, ragged, num_splits, dtype
    (3, 4, 4, 37, 64, True, None, torch.float16),      # GQA 1, odd length
    (3, 8, 2, 301, 128, True, 3, torch.bfloat16),      # GQA 4, three splits
    (2, 16, 2, 130, 80, True, 2, torch.float16),       # GQA 8, D = 80 padded to 128
    (2, 8, 1, 301, 64, False, 5, torch.float16),       # GQA 8, uneven last split
    (1, 2, 2, 1, 64, False, None, torch.bfloat16),     # a one-token cache
    (4, 4, 2, 200, 64, True, 1, torch.bfloat16),       # one split: no combine kernel
    (2, 4, 1, 300, 16, True, 64, torch.float16),       # more splits asked than tiles: clamped
]


@pytest.mark.parametrize("batch,heads_q,heads_kv,cache_len,head_dim,ragged,num_splits,dtype", CASES)
def test_matches_reference(poison, batch, heads_q, heads_kv, cache_len, head_dim, ragged, num_splits, dtype):
    q, k, v = _inputs(batch, heads_q, heads_kv, cache_len, head_dim, dtype)
    lens = _ragged(batch, cache_len) if ragged else None
    out = decode_attention(q, k, v, lens, num_splits=num_splits)
    _assert_close(out, reference(q, k, v, lens), dtype)


def test_split_counts_agree(poison):
    q, k, v = _inputs(3, 8, 2, 301, 64, torch.float16)
    lens = torch.tensor([1, 301, 170], dtype=torch.int32)
    ref = reference(q, k, v, lens)
    outs = [decode_attention(q, k, v, lens, num_splits=s) for s in (1, 2, 3, 4)]
    for out in outs:
        _assert_close(out, ref, torch.float16)
    for out in outs[1:]:
        assert (out.float() - outs[0].float()).abs().max() < 2e-3


def test_nosplit_matches_reference(poison):
    q, k, v = _inputs(2, 8, 2, 150, 64, torch.bfloat16)
    lens = torch.tensor([150, 1], dtype=torch.int64)
    _assert_close(decode_attention_nosplit(q, k, v, lens), reference(q, k, v, lens), torch.bfloat16)


def test_public_api_is_exported():
    assert kernels.decode_attention is decode_attention


def test_strided_caches_and_query(poison):
    batch, heads_q, heads_kv, cache_len, head_dim = 2, 4, 2, 45, 64
    # K: a window of a longer cache; V: stored token-major (B, L, Hkv, D); q: every other column block.
    k_big = torch.randn(batch, heads_kv, cache_len + 19, head_dim).half()
    k = k_big[:, :, 7:7 + cache_len]
    v = torch.randn(batch, cache_len, heads_kv, head_dim).half().transpose(1, 2)
    q = torch.randn(batch, heads_q, 2 * head_dim).half()[..., ::2]
    assert not (k.is_contiguous() or v.is_contiguous() or q.is_contiguous())
    lens = torch.tensor([45, 13], dtype=torch.int32)
    ref = reference(q, k, v, lens)
    for splits in (None, 1, 2):
        _assert_close(decode_attention(q, k, v, lens, num_splits=splits), ref, torch.float16)


@pytest.mark.parametrize("dtype,heads_q,heads_kv,lengths,split_counts,block_n", [
    (torch.float16, 4, 1, [1, 100, 57], (None, 1, 3), None),
    (torch.bfloat16, 8, 2, [0, 100, 37], (None, 3, 7), 16),      # length 0: zeros; 16-token tiles
])
def test_cache_past_length_is_never_read(poison, dtype, heads_q, heads_kv, lengths, split_counts, block_n):
    q, k, v = _inputs(3, heads_q, heads_kv, 100, 64, dtype)
    lens = torch.tensor(lengths, dtype=torch.int32)
    for b, n in enumerate(lengths):
        k[b, :, n:] = float("nan")
        v[b, :, n:] = float("-inf") if b % 2 else float("inf")
    ref = reference(q, k, v, lens)
    for splits in split_counts:
        _assert_each_sequence(decode._decode(q, k, v, lens, None, splits, None, block_n, None, None), ref,
                              lengths, dtype)


def test_caches_of_no_tokens_give_zeros(poison):
    """Lmax = 0: every sequence has length 0, so every output row is zero (attention's Nk = 0 likewise)."""
    q, k, v = _inputs(3, 4, 2, 40, 64, torch.float16)
    for lens in (None, torch.zeros(3, dtype=torch.int32)):
        out = decode_attention(q, k[:, :, :0], v[:, :, :0], lens)
        assert out.shape == q.shape and torch.equal(out, torch.zeros_like(out))


def test_length_zero_gives_zeros(poison):
    q, k, v = _inputs(3, 4, 2, 40, 64, torch.float16)
    lens = torch.tensor([0, 40, 5], dtype=torch.int32)
    ref = reference(q, k, v, lens)
    for splits in (1, 3):
        out = decode_attention(q, k, v, lens, num_splits=splits)
        assert torch.equal(out[0], torch.zeros_like(out[0]))
        _assert_close(out[1:], ref[1:], torch.float16)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_large_logits_and_custom_scale(poison, dtype):
    # Logits in the hundreds: exp would overflow without the running max.
    q, k, v = _inputs(2, 4, 4, 77, 64, dtype, scale=30.0)
    ref = reference(q, k, v, sm_scale=0.5)
    for splits in (1, 3):
        _assert_close(decode_attention(q, k, v, sm_scale=0.5, num_splits=splits), ref, dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_keys_at_minus_infinity_inside_the_lengths(poison, dtype):
    """A key of -inf entries scores -inf (weight 0) against a positive query; a sequence whose every
    key is so gives NaN, as the float64 reference does (no finite score to normalise by)."""
    q, k, v = _inputs(2, 4, 2, 40, 32, dtype)
    q = q.abs() + 0.1                                   # every q.k with a -inf key is -inf
    k[0, :, 5] = float("-inf")
    k[0, :, 17] = float("-inf")
    k[1, 1] = float("-inf")                             # KV head 1 of sequence 1: every key
    lens = torch.tensor([40, 23], dtype=torch.int32)
    ref = reference(q, k, v, lens)
    assert torch.isnan(ref[1, 2:]).all() and torch.isfinite(ref[0]).all() and torch.isfinite(ref[1, :2]).all()
    for splits in (1, 3):
        out = decode_attention(q, k, v, lens, num_splits=splits)
        assert torch.isnan(out[1, 2:]).all(), splits
        _assert_close(out[0], ref[0], dtype)
        _assert_close(out[1, :2], ref[1, :2], dtype)


def test_reference_chunks_heads_under_a_budget():
    q, k, v = _inputs(2, 8, 4, 33, 16, torch.float32)
    lens = torch.tensor([33, 9])
    whole = reference(q, k, v, lens)
    assert torch.allclose(reference(q, k, v, lens, budget_bytes=1), whole)
    # Against a direct GQA computation of the same thing.
    expected = torch.empty_like(whole)
    for b, n in enumerate(lens.tolist()):
        kk = k[b, :, :n].double().repeat_interleave(2, dim=0)
        vv = v[b, :, :n].double().repeat_interleave(2, dim=0)
        p = torch.softmax(torch.einsum("hd,hnd->hn", q[b].double(), kk) / math.sqrt(16), dim=-1)
        expected[b] = torch.einsum("hn,hnd->hd", p, vv)
    assert torch.allclose(whole, expected)


@pytest.mark.parametrize("batch,heads_kv,cache_len", [(1, 32, 4096), (1, 32, 131072), (8, 32, 4096),
                                                      (64, 32, 1024), (4, 8, 16384), (16, 8, 8192), (1, 1, 37),
                                                      (1, 8, 1024), (2, 8, 100)])
def test_choose_splits(batch, heads_kv, cache_len):
    block_n, sms = 64, 132
    splits = choose_splits(batch, heads_kv, cache_len, block_n, sms)
    assert 1 <= splits <= cdiv(cache_len, block_n)                 # every split holds keys
    if batch * heads_kv >= decode.NO_SPLIT_FILL * sms:             # the unsplit grid fills the GPU
        assert splits == 1
    else:                          # at most one wave, and no fewer than half of it (whole tiles per chunk)
        wanted = min(sms // (batch * heads_kv), cdiv(cache_len, block_n))
        assert batch * heads_kv * splits <= sms and 2 * splits > wanted


@pytest.mark.parametrize("batch,heads_kv,cache_len,expected", [(1, 8, 1024, 16), (1, 8, 131072, 16), (4, 8, 4096, 4),
                                                               (1, 32, 1024, 4), (16, 8, 4096, 1), (1, 32, 96, 2)])
def test_choose_splits_one_wave_where_measured(batch, heads_kv, cache_len, expected):
    """The H200 measurements behind the rule (docs/kernels/decode.md): one wave of programs."""
    assert choose_splits(batch, heads_kv, cache_len, 64, 132) == expected


@pytest.mark.parametrize("batch,heads_kv,cache_len,splits", [(16, 8, 8192, 4), (32, 8, 8192, 2), (64, 8, 4096, 2),
                                                           (16, 32, 1024, 1), (4, 32, 16384, 4), (1, 8, 131072, 33), (1, 8, 4096, 16),
                                                           (1, 8, 1024, 16), (1, 32, 1024, 4), (4, 8, 1024, 8),
                                                           (1, 32, 131072, 8), (4, 8, 32768, 8), (1, 32, 4096, 4),
                                                           (1, 8, 16384, 16), (1, 8, 32768, 16), (1, 32, 16384, 8)])
def test_choose_splits_paged(batch, heads_kv, cache_len, splits):
    """Paged caches with lengths want about PAGED_PROGRAMS_PER_SM programs per SM on a filled grid, and
    at least PAGED_FILLED_MIN_SPLITS splits (without them, every sequence equally long, one program a
    sequence), and at most
    PAGED_BELOW_FILL_PER_SM below it (at least one wave), with chunks of at least MIN_CHUNK_BLOCKS
    tiles unless one wave needs shorter ones; one sequence (B = 1) takes one wave unless chunks would
    exceed PAGED_CHUNK_TOKENS: the H200 measurements in docs/kernels/decode.md."""
    block_n, sms = 64, 132
    filled = batch * heads_kv >= decode.NO_SPLIT_FILL * sms
    with_lengths = choose_splits(batch, heads_kv, cache_len, block_n, sms, paged=True, lengths=True)
    paged = choose_splits(batch, heads_kv, cache_len, block_n, sms, paged=True)
    assert paged == (1 if filled else splits)
    if filled and batch * heads_kv > decode.PAGED_UNSPLIT_PER_SM * sms:    # the contiguous call's count
        assert with_lengths == choose_splits(batch, heads_kv, cache_len, block_n, sms, lengths=True)
        paged = with_lengths
    elif filled:
        assert with_lengths == max(splits, cdiv(cache_len, decode.RAGGED_CHUNK_TOKENS))
        paged = with_lengths
    elif batch >= 2:              # below the fill, lengths dealt out by length: the one-wave count
        assert with_lengths == choose_splits(batch, heads_kv, cache_len, block_n, sms)
    wave = choose_splits(batch, heads_kv, cache_len, block_n, sms)
    assert paged >= wave
    assert batch * heads_kv * paged <= max(sms, decode.PAGED_PROGRAMS_PER_SM * sms,   # whole waves, or
                                           batch * heads_kv * decode.PAGED_FILLED_MIN_SPLITS)   # the least split
    if filled and batch * heads_kv * decode.PAGED_FILLED_MIN_SPLITS > decode.PAGED_PROGRAMS_PER_SM * sms:
        assert cache_len // paged >= decode.PAGED_CHUNK_TOKENS or paged == 1    # ... of long chunks only
    if batch * heads_kv < decode.NO_SPLIT_FILL * sms:
        assert batch * heads_kv * paged <= max(batch * heads_kv * wave, decode.PAGED_BELOW_FILL_PER_SM * sms)
    if paged > wave:              # the shortest of the balanced chunks holds MIN_CHUNK_BLOCKS tiles
        assert cdiv(cache_len, block_n) // paged >= decode.MIN_CHUNK_BLOCKS
    if batch == 1:                # one sequence: more than one wave only as far as chunks of PAGED_CHUNK_TOKENS need
        assert paged <= max(wave, cdiv(cache_len, decode.PAGED_CHUNK_TOKENS))


@pytest.mark.parametrize("batch,heads_kv,cache_len,splits", [(16, 8, 32768, 8), (64, 8, 32768, 8), (32, 8, 16384, 4),
                                                            (16, 8, 4096, 2), (16, 8, 1024, 2), (64, 8, 4096, 1),
                                                            (1, 8, 1024, 16)])
def test_choose_splits_with_lengths(batch, heads_kv, cache_len, splits):
    """Given lengths, a grid that fills the SMs once takes up to RAGGED_FILLED_SPLITS splits (ragged work
    spread over programs), and chunks of at most RAGGED_CHUNK_TOKENS; below the fill the one-wave rule holds."""
    assert choose_splits(batch, heads_kv, cache_len, 64, 132, lengths=True) == splits
    assert choose_splits(batch, heads_kv, cache_len, 64, 132) == (1 if batch * heads_kv >= 119 else splits)


@pytest.mark.parametrize("group,splits,chunk,block_n,lengths,wide", [
    (4, 4, 32768, 64, True, True), (4, 16, 8192, 64, True, True), (2, 4, 8192, 64, True, True),
    (4, 4, 32768, 64, False, False), (4, 16, 8192, 64, False, False), (4, 16, 1024, 64, True, False),
    (1, 4, 32768, 64, True, False), (4, 1, 131072, 64, True, False), (4, 4, 32768, 128, True, False)])
def test_long_grouped_chunks(group, splits, chunk, block_n, lengths, wide):
    """Only split launches with lengths of grouped heads with chunks of at least LONG_CHUNK_TOKENS at 64-token
    tiles widen."""
    assert decode.long_grouped_chunks(group, splits, chunk, block_n, lengths) is wide


def test_long_grouped_chunks_plan(monkeypatch):
    """The plan of such a call launches LONG_CHUNK_CONFIG with the same split count, chunks whole tiles of it;
    the same cache without lengths, and options passed by the caller, keep the 64-token tiles."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 132)
    q = torch.zeros(4, 32, 128, dtype=torch.float16)
    k = torch.zeros(4, 8, 32768, 128, dtype=torch.float16).expand(4, 8, 32768, 128)
    lens = torch.tensor([32768, 20000, 9000, 1], dtype=torch.int32)
    plan = decode._plan(q, k, k, lens, None, None, None, None, None, None)
    block_n, warps, stages = decode.LONG_CHUNK_CONFIG
    assert plan.grid[1] == 32 and plan.options == dict(num_warps=warps, num_stages=stages)
    assert (_rest(plan, "n_blocks"), _rest(plan, "num_splits")) == (32768 // block_n, 4)    # 4 chunks of 8192 tokens
    assert _rest(plan, "BLOCK_N") == block_n
    uniform = decode._plan(q, k, k, None, None, None, None, None, None, None)
    assert uniform.grid == (4, 32) and _rest(uniform, "BLOCK_N") == 64
    assert uniform.options == dict(num_warps=4, num_stages=4) and _rest(uniform, "num_splits") == 4
    forced = decode._plan(q, k, k, lens, None, None, None, 64, None, None)
    assert _rest(forced, "BLOCK_N") == 64 and forced.options == dict(num_warps=4, num_stages=4)


@pytest.mark.parametrize("batch,heads_kv,cache_len,splits", [(4, 8, 32768, 4), (4, 8, 4096, 4), (2, 8, 1024, 8),
                                                            (1, 8, 32768, 16), (4, 8, 96, 2)])
def test_choose_splits_with_lengths_below_the_fill(batch, heads_kv, cache_len, splits):
    """Given lengths, sequences below the fill take the one-wave count, as without them (whole tiles a chunk,
    at most one chunk a tile): where the lengths differ the kernel deals those programs out by length."""
    assert choose_splits(batch, heads_kv, cache_len, 64, 132, lengths=True) == splits
    assert splits == choose_splits(batch, heads_kv, cache_len, 64, 132) == min(132 // (batch * heads_kv),
                                                                               cdiv(cache_len, 64))
    if batch >= 2:                # paged too (ragged B=4 Hkv=8 L=4096 on the H200: S=4 14.2 us, S=8 15.0)
        assert choose_splits(batch, heads_kv, cache_len, 64, 132, paged=True, lengths=True) == splits


def test_full_grid_plan(monkeypatch):
    """An unsplit contiguous launch without lengths of more than FULL_GRID_PROGRAMS_PER_SM programs an
    SM takes FULL_GRID_CONFIG; up to that many an SM, with lengths, split, paged, at other tiles (D = 256)
    or with tiles forced it does not."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 132)
    block_n, warps, stages = decode.FULL_GRID_CONFIG
    assert decode.launch_shape(64, 32, 1, 4096, 128, 2, 132, False, False) == (1, block_n, warps, stages)
    assert decode.launch_shape(67, 8, 4, 1024, 128, 2, 132, False, False) == (1, block_n, warps, stages)
    assert decode.launch_shape(64, 8, 4, 1024, 128, 2, 132, False, False) == (1, 64, 4, 2)      # 4 an SM
    assert decode.launch_shape(16, 8, 4, 1024, 128, 2, 132, False, False) == (1, 64, 4, 4)      # 1 an SM
    assert decode.launch_shape(64, 32, 1, 4096, 128, 2, 132, False, False, 1) == (1, block_n, warps, stages)
    assert decode.launch_shape(64, 32, 1, 4096, 128, 2, 132, False, True)[1:] == (64, 4, 4)     # lengths
    assert decode.launch_shape(8, 8, 4, 4096, 128, 2, 132, False, False) == (2, 64, 4, 4)        # split
    assert decode.launch_shape(64, 32, 1, 4096, 128, 2, 132, False, False, 2)[1:] == (64, 4, 4)
    assert decode.launch_shape(64, 32, 1, 4096, 256, 2, 132, False, False)[1:] == (32, 4, 4)     # D = 256
    assert decode.launch_shape(64, 32, 1, 4096, 128, 2, 132, False, False, block_n=64)[1:] == (64, 4, 4)
    assert decode.launch_shape(64, 32, 1, 4096, 128, 2, 132, True, False)[1] == 64                # paged
    q = torch.zeros(64, 32, 128, dtype=torch.float16)
    k = torch.zeros(1, 1, 1, 128, dtype=torch.float16).expand(64, 32, 4096, 128)
    plan = decode._plan(q, k, k, None, None, None, None, None, None, None)
    assert plan.grid == (1, 2048) and plan.options == dict(num_warps=warps, num_stages=stages)
    assert _rest(plan, "BLOCK_N") == block_n
    assert (_rest(plan, "n_blocks"), _rest(plan, "num_splits")) == (4096 // block_n, 1)


@pytest.mark.parametrize("dtype", decode.DTYPES)
def test_full_grid_config_matches_reference(fresh_plans, poison, monkeypatch, dtype):
    """FULL_GRID_CONFIG's tiles (5 programs an SM on an SM count of 4), 301 tokens: a partial last tile."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 4)
    assert decode.launch_shape(10, 2, 4, 301, 128, 2, 4, False, False)[1:] == decode.FULL_GRID_CONFIG
    q, k, v = _inputs(10, 8, 2, 301, 128, dtype)
    _assert_close(decode_attention(q, k, v), reference(q, k, v), dtype)


def test_resident_grid_plan(monkeypatch):
    """An unsplit contiguous launch without lengths of 0.9 to FULL_GRID_PROGRAMS_PER_SM programs an SM
    keeps 64-token tiles at the ring where all its programs are resident, its registers capped to match
    where the cap binds: 2 stages and 128 registers at four an SM, 3 and 168 at three, 4 and no cap at
    one or two. Lengths, paged caches,
    other tiles and forced settings leave it alone."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 132)
    monkeypatch.setattr(decode, "per_sm", lambda device, what: {"smem": 233472, "regs": 65536}[what])
    for programs, stages, regs in ((512, 2, 128), (396, 3, 168), (264, 4, None), (128, 4, None)):
        batch, heads_kv = programs // 8, 8
        assert decode.launch_shape(batch, heads_kv, 4, 1024, 128, 2, 132, False, False, smem=233472) \
            == (1, 64, 4, stages)
        q = torch.zeros(batch, 32, 128, dtype=torch.float16)
        k = torch.zeros(1, 1, 1, 128, dtype=torch.float16).expand(batch, heads_kv, 1024, 128)
        plan = decode._plan(q, k, k, None, None, None, None, None, None, None)
        assert plan.options == dict(num_warps=4, num_stages=stages, **({} if regs is None else {"maxnreg": regs}))
    lens = torch.full((64,), 1024)
    assert decode.launch_shape(64, 8, 4, 1024, 128, 2, 132, False, True, smem=233472)[1:] == (64, 4, 4)
    assert decode.launch_shape(64, 8, 4, 1024, 256, 2, 132, False, False, smem=233472)[1:] == (32, 4, 4)
    assert decode.launch_shape(64, 8, 4, 1024, 128, 2, 132, False, False, None, None, None, 3,
                               smem=233472)[1:] == (64, 4, 3)
    q = torch.zeros(64, 32, 128, dtype=torch.float16)
    k = torch.zeros(1, 1, 1, 128, dtype=torch.float16).expand(64, 8, 1024, 128)
    assert "maxnreg" not in decode._plan(q, k, k, lens, None, None, None, None, None, None).options
    assert "maxnreg" not in decode._plan(q, k, k, None, None, None, None, 64, 4, 2).options


def test_deep_filled_grid_plan(monkeypatch):
    """A resident_grid launch of more than two programs an SM over at least DEEP_FILLED_MIN_TOKENS takes
    DEEP_FILLED_CONFIG without a register cap; two an SM or fewer, shorter caches, lengths, paged caches
    and forced settings keep the resident ring."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 132)
    monkeypatch.setattr(decode, "per_sm", lambda device, what: {"smem": 233472, "regs": 65536}[what])
    long = decode.DEEP_FILLED_MIN_TOKENS
    for programs in (512, 396, 265):
        assert decode.launch_shape(programs, 1, 4, long, 128, 2, 132, False, False, smem=233472) \
            == (1, *decode.DEEP_FILLED_CONFIG)
    assert decode.launch_shape(264, 1, 4, long, 128, 2, 132, False, False, smem=233472) == (1, 64, 4, 4)
    assert decode.launch_shape(512, 1, 4, long - 1, 128, 2, 132, False, False, smem=233472) == (1, 64, 4, 2)
    assert decode.launch_shape(512, 1, 4, long, 128, 2, 132, False, True, smem=233472)[1:] == (64, 4, 4)
    assert decode.launch_shape(512, 1, 4, long, 128, 2, 132, True, False, smem=233472)[1] == 64
    assert decode.launch_shape(512, 1, 4, long, 128, 2, 132, False, False, None, 64, smem=233472)[1:] == (64, 4, 4)
    q = torch.zeros(64, 32, 128, dtype=torch.float16)
    k = torch.zeros(1, 1, 1, 128, dtype=torch.float16).expand(64, 8, long, 128)
    plan = decode._plan(q, k, k, None, None, None, None, None, None, None)
    block_n, warps, stages = decode.DEEP_FILLED_CONFIG
    assert plan.options == dict(num_warps=warps, num_stages=stages)
    assert (_rest(plan, "BLOCK_N"), _rest(plan, "n_blocks")) == (block_n, long // block_n)


@pytest.mark.parametrize("dtype", decode.DTYPES)
def test_deep_filled_grid_matches_reference(fresh_plans, poison, monkeypatch, dtype):
    """DEEP_FILLED_CONFIG's tiles (4 programs an SM on an SM count of 4), 301 tokens with the threshold
    lowered: a partial last tile."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 4)
    monkeypatch.setattr(decode, "DEEP_FILLED_MIN_TOKENS", 256)
    assert decode.launch_shape(8, 2, 4, 301, 128, 2, 4, False, False, smem=233472) \
        == (1, *decode.DEEP_FILLED_CONFIG)
    q, k, v = _inputs(8, 8, 2, 301, 128, dtype)
    _assert_close(decode_attention(q, k, v), reference(q, k, v), dtype)


@pytest.mark.parametrize("dtype", decode.DTYPES)
def test_resident_grid_matches_reference(fresh_plans, poison, monkeypatch, dtype):
    """The resident ring (4 programs an SM on an SM count of 4: 2 stages), 301 tokens: a partial last tile."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 4)
    assert decode.launch_shape(8, 2, 4, 301, 128, 2, 4, False, False, smem=233472) == (1, 64, 4, 2)
    q, k, v = _inputs(8, 8, 2, 301, 128, dtype)
    _assert_close(decode_attention(q, k, v), reference(q, k, v), dtype)


def test_decode_traffic():
    kv, qo = decode_traffic(3000, 2, 8, 2, 128, 2)
    assert kv == 2 * 3000 * 2 * 128 * 2
    assert qo == 2 * 2 * 8 * 128 * 2


BAD = [
    (lambda q, k, v: decode_attention(q.float(), k.float(), v.float()), "dtype"),
    (lambda q, k, v: decode_attention(q, k.bfloat16(), v), "q.s dtype"),
    (lambda q, k, v: decode_attention(q[0], k, v), "3 dimensions"),
    (lambda q, k, v: decode_attention(q, k[0], v), "4 dimensions"),
    (lambda q, k, v: decode_attention(q[:, :3], k, v), "multiple"),
    (lambda q, k, v: decode_attention(q[:1], k, v), "batch"),
    (lambda q, k, v: decode_attention(q[..., :8], k, v), "head_dim"),
    (lambda q, k, v: decode_attention(q, k, v[:, :, :5]), "differ in shape"),
    (lambda q, k, v: decode_attention(q, k, v, torch.tensor([3, 4.0])), "integer"),
    (lambda q, k, v: decode_attention(q, k, v, [3, 4]), "integer"),
    (lambda q, k, v: decode_attention(q, k, v, torch.tensor([3])), "shape"),
    (lambda q, k, v: decode_attention(q, k, v, torch.tensor([3, 17])), "0..16"),
    (lambda q, k, v: decode_attention(q, k, v, torch.tensor([-1, 4])), "0..16"),
    (lambda q, k, v: decode_attention(q, k, v, num_splits=0), "num_splits"),
    (lambda q, k, v: decode_attention(q, k, v, sm_scale=float("nan")), "sm_scale"),
    (lambda q, k, v: decode_attention(q, k, v, sm_scale=1e300), "fits fp32"),        # scale * log2(e) overflows fp32
    (lambda q, k, v: decode_attention(q, k, v, sm_scale=10 ** 400), "sm_scale"),     # past float's range
    (lambda q, k, v: decode_attention(q, k, v, sm_scale=True), "sm_scale"),
    (lambda q, k, v: decode_attention(q, k, v, num_splits=True), "num_splits"),
    (lambda q, k, v: decode_attention("q", k, v), "torch.Tensor"),
    (lambda q, k, v: decode_attention(q.to_sparse(), k, v), "sparse_coo tensor"),
    (lambda q, k, v: decode_attention(q, k.to_sparse(), v), "k_cache is a sparse_coo"),
    (lambda q, k, v: decode_attention(torch._neg_view(q), k, v), "lazily negated"),
    (lambda q, k, v: decode_attention(q, torch._neg_view(k), v), "k_cache is a lazily negated"),
    (lambda q, k, v: decode_attention(q.new_zeros(8192, 8, 32), k.new_zeros(8192, 8, 16, 32),
                                      v.new_zeros(8192, 8, 16, 32)), "batch \\* kv heads = 65536"),
]


@pytest.mark.parametrize("call,needle", BAD)
def test_bad_input_raises_value_error(call, needle):
    q, k, v = _inputs(2, 4, 2, 16, 32, torch.float16)
    with pytest.raises(ValueError, match=needle):
        call(q, k, v)


def test_head_dim_over_256_raises():
    q, k, v = _inputs(1, 1, 1, 2, 272, torch.float16)
    with pytest.raises(ValueError, match="head_dim must be"):
        decode_attention(q, k, v)


# ---- the study module ----

def test_study_shapes_and_lengths():
    grid = [{"batch": 4, "heads_q": 8, "heads_kv": 2, "cache_len": 50, "head_dim": 64, "ragged": True},
            {"batch": 1, "heads_q": 2, "heads_kv": 2, "cache_len": 9, "head_dim": 32, "ragged": False}]
    ragged, full = study.shapes(grid)
    lens = study.seqlens_for(ragged)
    assert torch.equal(lens, study.seqlens_for(ragged))             # deterministic
    assert lens.min() == 1 and lens.max() == 50 and lens.dtype == torch.int32
    assert study.seqlens_for(full).tolist() == [9]
    nbytes, flops = study.work(ragged, "float16")
    assert nbytes == 2 * int(lens.sum()) * 2 * 64 * 2
    assert flops == 4 * 8 * 64 * int(lens.sum())
    ceiling = study.ceiling("float16", {"read_tbps": 4.35, "datasheet_bandwidth_tbps": 4.8})
    assert (ceiling.metric, ceiling.measured, ceiling.datasheet) == ("tbps", 4.35, 4.8)


@pytest.mark.parametrize("ragged", [True, False])
def test_study_roundtrip_on_cpu(ragged):
    shape = study.shapes([{"batch": 3, "heads_q": 4, "heads_kv": 2, "cache_len": 70, "head_dim": 32,
                           "ragged": ragged}])[0]
    inputs = study.make_inputs(shape, torch.bfloat16, "cpu")
    assert torch.equal(inputs["seqlens"], study.seqlens_for(shape))
    ref = study.reference(inputs)
    factories = study.impls()
    assert {"ours", "ours_nosplit", "ours_paged", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"} <= factories.keys()
    for name in ("ours", "ours_nosplit", "ours_paged"):
        max_abs, rel = study.check(factories[name](inputs)(), ref, inputs)
        assert rel <= study.tolerance("bfloat16"), (name, rel)
    # A wrong answer is caught: the full-cache result differs when lengths are ragged.
    if ragged:
        wrong = decode_attention(inputs["q"], inputs["k_cache"], inputs["v_cache"])
        assert study.check(wrong, ref, inputs)[1] > study.tolerance("bfloat16")


def test_study_check_catches_a_wrong_long_sequence_beside_a_one_token_one():
    """Ragged lengths put a one-token sequence first, whose output (a V row) dwarfs a long one's
    (an average of many): 30% off on the long sequence is within bf16's tolerance of the whole
    tensor's norm, not of its own rows'."""
    shape = study.shapes([{"batch": 3, "heads_q": 4, "heads_kv": 2, "cache_len": 301, "head_dim": 32,
                           "ragged": True}])[0]
    inputs = study.make_inputs(shape, torch.bfloat16, "cpu")
    ref = study.reference(inputs)
    assert inputs["seqlens"][0] == 1 and inputs["seqlens"][1] == 301
    wrong = ref.clone()
    wrong[1] *= 0.7
    whole = float((wrong - ref).norm() / ref.norm())
    assert whole < study.tolerance("bfloat16")                     # hidden in the whole tensor
    assert study.check(wrong.to(torch.bfloat16), ref, inputs)[1] > study.tolerance("bfloat16")


@pytest.mark.parametrize("cache_len,ragged,passed", [(128, False, False), (128, True, True), (70, False, True)])
def test_study_paged_call_gets_the_lengths_where_ours_does(monkeypatch, cache_len, ragged, passed):
    """ours_paged passes lengths where ours does (ragged), and where the last page is part-filled
    (without lengths a paged sequence holds all its pages); its result matches the reference."""
    import kernels
    shape = study.shapes([{"batch": 2, "heads_q": 4, "heads_kv": 2, "cache_len": cache_len, "head_dim": 32,
                           "ragged": ragged}])[0]
    inputs = study.make_inputs(shape, torch.float16, "cpu")
    seen, call = [], kernels.decode_attention

    def recording(q, k, v, seqlens=None, **kwargs):
        seen.append(seqlens)
        return call(q, k, v, seqlens, **kwargs)
    monkeypatch.setattr(kernels, "decode_attention", recording)
    out = study.impls()["ours_paged"](inputs)()
    assert seen == [inputs["seqlens"] if passed else None]
    assert study.check(out, study.reference(inputs), inputs)[1] <= study.tolerance("float16")


def _dealt(lengths, block_n, splits, part_splits):
    """What _ragged_chunk computes, in Python: {b: [(start, end), ...]} and the programs left idle."""
    tiles = [cdiv(n, block_n) for n in lengths]
    target = len(lengths) * splits
    chunk = next(c for c in range(max(1, cdiv(max(tiles), part_splits)), max(tiles) + 2)
                 if sum(max(1, cdiv(t, c)) for t in tiles) <= target)
    dealt = {}
    for b, (n, t) in enumerate(zip(lengths, tiles)):
        count = max(1, cdiv(t, chunk))
        dealt[b] = [((s * t // count) * block_n, min(((s + 1) * t // count) * block_n, n)) for s in range(count)]
    return dealt, target - sum(len(c) for c in dealt.values())


@pytest.mark.parametrize("lengths", [[1, 300, 120, 7], [300, 300, 300, 299], [0, 300, 0, 64], [300, 1, 1, 1, 1, 1]])
def test_dealing_chunks_by_length_covers_each_sequence(lengths):
    """The B * S programs of a KV head cover every sequence's tokens exactly once in whole tiles, each
    sequence at most part_splits times and at least once, with no chunk longer than the one-wave split's."""
    for splits in (2, 3, 8):
        dealt, idle = _dealt(lengths, 16, splits, 4 * splits)
        assert idle >= 0
        for b, chunks in dealt.items():
            assert chunks[0][0] == 0 and chunks[-1][1] == lengths[b] and 1 <= len(chunks) <= 4 * splits
            assert all(e0 == s1 for (_, e0), (s1, _) in zip(chunks, chunks[1:]))        # contiguous, no overlap
            assert all(s % 16 == 0 and (s < e or lengths[b] == 0) for s, e in chunks)  # whole tiles, not empty
        longest = max(e - s for c in dealt.values() for s, e in c)
        assert longest <= cdiv(cdiv(max(lengths), 16), splits) * 16


@triton.jit
def _deal_kernel(Lens, Out, batch, num_splits, part_splits, BLOCK_N: tl.constexpr, BLOCK_B: tl.constexpr):
    """Program j stores what decode._ragged_chunk gives it: (b, split, start, end)."""
    j = tl.program_id(0)
    offs = tl.arange(0, BLOCK_B)
    mask_b = offs < batch
    lens = tl.load(Lens + offs, mask=mask_b, other=0)
    b, split, start, end, _, _ = decode._ragged_chunk(lens, tl.cdiv(lens, BLOCK_N), mask_b, batch, j, num_splits,
                                                      part_splits, BLOCK_N, BLOCK_B)
    tl.store(Out + j * 4 + tl.arange(0, 4), tl.where(tl.arange(0, 4) == 0, b, tl.where(
        tl.arange(0, 4) == 1, split, tl.where(tl.arange(0, 4) == 2, start, end))))


@pytest.mark.parametrize("lengths", [[1, 300, 120, 7], [300, 300, 300, 299], [0, 300, 0, 64], [300, 1, 1, 1, 1, 1]])
@pytest.mark.parametrize("splits", [2, 3, 8])
def test_the_kernels_dealing_is_the_model_above(lengths, splits):
    """decode._ragged_chunk itself, run in the interpreter for each of the B * S programs, deals the
    chunks `_dealt` describes (the properties checked on the model above), idle programs split -1."""
    batch = len(lengths)
    out = torch.full((batch * splits, 4), -7, dtype=torch.int32)
    _deal_kernel[(batch * splits,)](torch.tensor(lengths, dtype=torch.int32), out, batch, splits, 4 * splits,
                                    BLOCK_N=16, BLOCK_B=triton.next_power_of_2(batch))
    dealt, idle = _dealt(lengths, 16, splits, 4 * splits)
    got = {}
    for b, split, start, end in out.tolist():
        if split >= 0:
            assert split == len(got.setdefault(b, []))              # a sequence's splits in program order
            got[b].append((start, end))
    assert got == dealt and sum(1 for row in out.tolist() if row[1] == -1) == idle


SPREAD_CASES = [  # batch, heads_q, heads_kv, cache_len, head_dim, lengths, page_size, dtype
    (4, 4, 1, 300, 64, [1, 300, 120, 7], None, torch.float16),           # G = 4
    (5, 8, 8, 200, 40, [0, 200, 3, 64, 199], None, torch.bfloat16),       # G = 1, length 0, odd D
    (6, 6, 2, 256, 32, [256, 1, 1, 1, 1, 1], 16, torch.float16),          # paged: one long, programs left idle
    (3, 8, 2, 512, 64, [512, 511, 0], 32, torch.bfloat16),               # paged, tile counts differ by one
    (17, 4, 2, 700, 16, None, None, torch.float16),                       # B not a power of two, ragged
]


@pytest.mark.parametrize("batch,heads_q,heads_kv,cache_len,head_dim,lengths,page_size,dtype", SPREAD_CASES)
def test_chunks_dealt_by_length_match_reference(poison, batch, heads_q, heads_kv, cache_len, head_dim, lengths,
                                                page_size, dtype):
    """Where the lengths differ, a call with lengths deals its programs out by length (spread): the output
    matches the float64 reference, a length-0 sequence gives zeros, the cache past each length (NaN and
    infinities) is never read, and the merge counters are left zero; the same call with every sequence
    split alike gives the same answer."""
    lens = _ragged(batch, cache_len) if lengths is None else torch.tensor(lengths, dtype=torch.int32)
    q, k, v, table, ref = _case_past_lengths_poisoned(heads_q, heads_kv, cache_len, head_dim, dtype, lens, page_size, 3)
    plan = decode._plan(q, k, v, lens, None, None, table, None, None, None)
    assert _rest(plan, "SPREAD") is True and _rest(plan, "num_splits") >= 2
    spread = decode._decode(q, k, v, lens, None, None, table)
    alike = decode._decode(q, k, v, lens, None, None, table, spread=False)
    assert int(decode._COUNTERS[(q.device, 0)].abs().sum()) == 0
    for out in (spread, alike):
        _assert_each_sequence(out, ref, lens.tolist(), dtype)


@pytest.mark.parametrize("page_size", [0, 64])
@pytest.mark.parametrize("dtype", decode.DTYPES)
def test_longest_first_matches_reference(poison, page_size, dtype):
    """An unsplit call with lengths takes its sequences longest first (ties by index, a length 0 last):
    every sequence's output is written, matches the float64 reference, and the cache past each length
    (NaN and infinities) is never read."""
    lengths = [3, 301, 0, 301, 150, 1, 77]
    lens = torch.tensor(lengths, dtype=torch.int32)
    q, k, v, table, ref = _case_past_lengths_poisoned(8, 2, 301, 64, dtype, lens, page_size, 5)
    plan = decode._plan(q, k, v, lens, None, 1, table, None, None, None)
    assert plan.grid == (1, 14) and _rest(plan, "LONGEST_FIRST") is True and _rest(plan, "BLOCK_B") == 16
    _assert_each_sequence(decode_attention(q, k, v, lens, num_splits=1, block_table=table), ref, lengths, dtype)


def test_longest_first_plan(monkeypatch):
    """Only unsplit calls with lengths of 2..LONGEST_FIRST_MAX_BATCH sequences rank them; past that
    batch grid order is kept, and the answer is the same."""
    assert decode.longest_first(2, 1, True) and decode.longest_first(decode.LONGEST_FIRST_MAX_BATCH, 1, True)
    assert not decode.longest_first(1, 1, True)                                  # one sequence
    assert not decode.longest_first(decode.LONGEST_FIRST_MAX_BATCH + 1, 1, True)  # B^2 ranking
    assert not decode.longest_first(8, 2, True)                                  # split: dealt by length
    assert not decode.longest_first(8, 1, False)                                 # all Lmax long
    q, k, v = _inputs(5, 4, 2, 90, 64, torch.float16)
    lens = torch.tensor([10, 90, 45, 90, 2], dtype=torch.int32)
    ref = reference(q, k, v, lens)
    assert _rest(decode._plan(q, k, v, lens, None, 1, None, None, None, None), "LONGEST_FIRST") is True
    assert _rest(decode._plan(q, k, v, None, None, 1, None, None, None, None), "LONGEST_FIRST") is False
    monkeypatch.setattr(decode, "LONGEST_FIRST_MAX_BATCH", 4)
    plan = decode._plan(q, k, v, lens, None, 1, None, None, None, None)
    assert _rest(plan, "LONGEST_FIRST") is False and _rest(plan, "BLOCK_B") == 16
    _assert_close(decode._decode(q, k, v, lens, None, 1), ref, torch.float16)


def test_spread_plan():
    """Chunks are dealt by length only for calls with lengths, B >= 2 and a chosen S >= 2; the partials then
    hold RAGGED_SPLIT_LIMIT times S slots a row (at most one a tile)."""
    assert decode.spread_by_length(4, 4, True, False)
    assert not decode.spread_by_length(1, 16, True, False)       # one sequence: nothing to balance
    assert not decode.spread_by_length(64, 1, True, False)       # S = 1
    assert not decode.spread_by_length(4, 4, False, False)       # no lengths: all Lmax long
    assert not decode.spread_by_length(4, 4, True, True)         # a forced num_splits is kept exactly
    q, k, v = _inputs(4, 8, 2, 4096, 64, torch.float16)
    plan = decode._plan(q, k, v, torch.full((4,), 4096), None, None, None, None, None, None)
    splits = _rest(plan, "num_splits")
    slots = min(decode.RAGGED_SPLIT_LIMIT * splits, cdiv(4096, _rest(plan, "BLOCK_N")))
    assert _rest(plan, "SPREAD") is True and plan.part_shape == (4, 8, slots) == (4, 8, _rest(plan, "part_splits"))
    assert slots > splits
    plain = decode._plan(q, k, v, None, None, None, None, None, None, None)
    assert _rest(plain, "SPREAD") is False and plain.part_shape == (4, 8, splits) == (4, 8, _rest(plain, "part_splits"))


@pytest.mark.parametrize("num_splits,paged", [(None, False), (1, False), (3, False), (None, True)])
def test_strided_lengths(poison, num_splits, paged):
    """Lengths that are a strided view (every other element of a longer tensor) are read as their values,
    split or not, dealt by length or not, contiguous or paged; a repeat call too."""
    q, k, v = _inputs(3, 4, 2, 300, 32, torch.float16)
    lens = torch.tensor([5, 0, 300, 7, 120, 9], dtype=torch.int32)[::2]                # 5, 300, 120
    ref = reference(q, k, v, lens)
    table = None
    if paged:
        k, v, table = decode.paged_cache(k, v, 16, seed=2)
    for _ in range(2):
        _assert_close(decode_attention(q, k, v, lens, num_splits=num_splits, block_table=table), ref,
                      torch.float16)


def test_split_counters_are_left_zero_for_the_next_call():
    q, k, v = (torch.randn(2, 8, 64, dtype=torch.float16), torch.randn(2, 2, 300, 64, dtype=torch.float16),
               torch.randn(2, 2, 300, 64, dtype=torch.float16))
    lens = torch.tensor([300, 1])
    first = decode_attention(q, k, v, lens, num_splits=4)
    assert int(decode._COUNTERS[(q.device, 0)].abs().sum()) == 0
    second = decode_attention(q, k, v, lens, num_splits=4)
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    expected = reference(q, k, v, lens).to(torch.float16)
    torch.testing.assert_close(second, expected, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_inputs_requiring_grad_raise(which):
    args = list(_inputs(2, 4, 2, 16, 32, torch.float16))
    args[which] = args[which].clone().requires_grad_()
    with pytest.raises(ValueError, match="decode_attention has no backward: .*torch.no_grad"):
        decode_attention(*args)
    with pytest.raises(ValueError, match="has no backward"):
        decode_attention_nosplit(*args)
    with torch.no_grad():
        out = decode_attention(*args)
    assert out.grad_fn is None
    _assert_close(out, reference(*(t.detach() for t in args)), torch.float16)


# ---- the plan cache (kernels._plans) ----

@pytest.fixture
def fresh_plans(monkeypatch):
    monkeypatch.setattr(decode, "_PLANS", {})


def test_repeat_call_does_not_revalidate(fresh_plans, poison, monkeypatch):
    calls = []
    original = decode._check_inputs
    monkeypatch.setattr(decode, "_check_inputs", lambda *a: calls.append(1) or original(*a))
    q, k, v = _inputs(3, 8, 2, 77, 64, torch.bfloat16)
    lens = torch.tensor([1, 77, 40], dtype=torch.int32)
    outs = [decode_attention(q, k, v, lens, num_splits=3) for _ in range(3)]
    assert len(calls) == 1 and len(decode._PLANS) == 1
    for out in outs[1:]:
        torch.testing.assert_close(out, outs[0], rtol=0, atol=0)
    _assert_close(outs[-1], reference(q, k, v, lens), torch.bfloat16)
    decode_attention(q, k, v.transpose(1, 2).contiguous().transpose(1, 2), lens, num_splits=3)
    assert len(calls) == 2 and len(decode._PLANS) == 2          # other strides: a plan of its own


def test_a_plan_is_never_reused_for_a_bad_call(fresh_plans):
    q, k, v = _inputs(2, 4, 2, 16, 32, torch.float16)
    lens = torch.tensor([3, 16])
    decode_attention(q, k, v, lens)
    with pytest.raises(ValueError, match="0..16"):               # host lengths: checked every call
        decode_attention(q, k, v, torch.tensor([3, 17]))
    with pytest.raises(ValueError, match="dtype"):
        decode_attention(q.float(), k.float(), v.float(), lens)
    with pytest.raises(ValueError, match="has no backward"):
        decode_attention(q.clone().requires_grad_(), k, v, lens)
    with pytest.raises(ValueError, match="num_splits"):
        decode_attention(q, k, v, lens, num_splits=1.0)           # equal to 1, not an int
    offset = torch.randn(2 * 4 * 32 + 1).half()[1:].view(2, 4, 32)   # q 2 bytes off the 16-byte grid
    _assert_close(decode_attention(offset, k, v, lens), reference(offset, k, v, lens), torch.float16)
    assert len(decode._PLANS) == 2


def test_decode_plan_cache_is_bounded(fresh_plans, monkeypatch):
    import kernels._plans
    monkeypatch.setattr(kernels._plans, "PLAN_CACHE_SIZE", 3)
    for n in range(20, 25):
        decode_attention(*_inputs(1, 2, 1, n, 16, torch.float16))
    assert len(decode._PLANS) == 3
    assert [key[1][0][2] for key in decode._PLANS] == [22, 23, 24]    # cache lengths, oldest dropped


@pytest.fixture
def gpu_replays(monkeypatch, replay):
    """The GPU path of the plans on the CPU: `Launch` (which needs a GPU) is replaced by one that
    records its arguments and runs them through the interpreter; the list of replays' arguments.
    A repeat call passes its tensors as addresses: the stand-in maps back those of every tensor
    given to `_decode`, every output (`new_output`) and every workspace view (`_scratch`)."""
    monkeypatch.setattr(decode, "interpreting", lambda: False)
    monkeypatch.setattr(decode, "current_stream", lambda: 0)
    monkeypatch.setattr(decode, "Launch", replay.launcher(lambda grid, args: decode._decode_kernel[grid](*args)))
    monkeypatch.setattr(decode, "_WORKSPACE", {})
    replay.track_outputs(decode)
    inner, scratch = decode._decode, decode._scratch

    def tracked_decode(*args, **kwargs):
        replay.track(*(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)))
        return inner(*args, **kwargs)

    def tracked_scratch(*args):
        views = scratch(*args)
        replay.track(*views)
        return views
    monkeypatch.setattr(decode, "_decode", tracked_decode)
    monkeypatch.setattr(decode, "_scratch", tracked_scratch)
    return replay.calls


@pytest.mark.parametrize("num_splits,paged", [(1, False), (3, False), (3, True)])
def test_gpu_plans_replay_the_first_launch(fresh_plans, poison, gpu_replays, num_splits, paged):
    """The direct launch a GPU plan keeps gets the first launch's arguments with a fresh output."""
    replays = gpu_replays
    q, k, v = _inputs(3, 8, 2, 150, 64, torch.float16)
    lens = _ragged(3, 150)
    ref = reference(q, k, v, lens)
    table = None
    if paged:
        k, v, table = decode.paged_cache(k, v, 32, seed=5)
        table = table.t().contiguous().t()                              # strides (1, 3)
    first = decode_attention(q, k, v, lens, num_splits=num_splits, block_table=table)
    assert not replays
    second = decode_attention(q, k, v, lens, num_splits=num_splits, block_table=table)
    (args,) = replays
    assert args[:4] == (q, k, v, lens) and args[5] is second
    assert args[4] is (q if table is None else table)                  # no block table: q stands in
    if paged:
        assert args[20:22] == (1, 3)                                      # table strides
        assert args[decode._decode_kernel.arg_names.index("PAGE_SIZE")] == 32
    if num_splits > 1:
        assert args[6].shape == (3, 8, 2, 64) and int(args[8].abs().sum()) == 0   # 2 splits of 128 tokens
    torch.testing.assert_close(second, first, rtol=0, atol=0)
    _assert_close(second, ref, torch.float16)


def test_split_partials_share_one_workspace_per_stream(fresh_plans, poison, gpu_replays):
    """Split launches on one stream take their partials from one workspace: a repeat call allocates
    none, a larger launch grows it, and the plans of smaller ones move to the new buffer."""
    q, k, v = _inputs(3, 8, 2, 150, 64, torch.float16)
    lens = _ragged(3, 150)
    ref = reference(q, k, v, lens)
    for _ in range(2):
        _assert_close(decode_attention(q, k, v, lens, num_splits=3), ref, torch.float16)
    (buf,) = decode._WORKSPACE.values()
    part, lse = gpu_replays[-1][6:8]
    assert part.shape == (3, 8, 2, 64) and lse.shape == (3, 8, 2)      # 2 splits of 128 tokens
    assert part.data_ptr() == buf.data_ptr() and lse.data_ptr() % 16 == 0
    assert buf.data_ptr() <= lse.data_ptr() < buf.data_ptr() + buf.numel() * 4
    q2, k2, v2 = _inputs(4, 16, 4, 900, 64, torch.float16)
    _assert_close(decode_attention(q2, k2, v2, num_splits=7), reference(q2, k2, v2), torch.float16)
    (grown,) = decode._WORKSPACE.values()
    assert grown is not buf and grown.numel() >= 4 * 16 * 7 * 65
    _assert_close(decode_attention(q, k, v, lens, num_splits=3), ref, torch.float16)
    assert gpu_replays[-1][6].data_ptr() == grown.data_ptr()


# ---- paged caches (block_table) ----

PAGED_CASES = [  # batch, heads_q, heads_kv, cache_len, head_dim, page_size, ragged, num_splits, dtype
    (3, 8, 2, 301, 64, 16, True, None, torch.float16),     # GQA 4, tiles spanning 4-8 pages
    (3, 8, 2, 301, 64, 64, True, 3, torch.bfloat16),       # three splits, last page part-filled
    (2, 16, 2, 130, 80, 32, True, 2, torch.float16),       # GQA 8, D = 80 padded to 128
    (1, 4, 4, 1, 64, 16, False, None, torch.bfloat16),     # a one-token cache
    (4, 4, 1, 200, 128, 256, True, 1, torch.bfloat16),     # one page longer than every sequence
    (2, 4, 2, 513, 32, 128, True, None, torch.float16),    # 513 tokens: a 5th page with one token
]


@pytest.fixture(params=[False, True], ids=["table_per_tile", "table_ahead"])
def table_ahead(request, monkeypatch):
    """Both ways the kernel finds a tile's pages: looked up with the tile, or loaded a tile ahead."""
    monkeypatch.setattr(decode, "PAGED_TABLE_AHEAD", request.param)
    monkeypatch.setattr(decode, "_PLANS", {})
    return request.param


@pytest.mark.parametrize("programs,stages", [(1, 4), (132, 4), (264, 4), (265, 3), (396, 3), (397, 2), (528, 2),
                                             (10000, 2)])
def test_paged_ring_as_deep_as_every_program_resident_allows(programs, stages):
    # H200: 228 KB an SM, 32 KB of K and V a 64-token tile at D = 128 fp16 (and 128 tokens at D = 64)
    assert decode.resident_stages(programs, 132, 233472, 64, 128, 2) == stages
    assert decode.resident_stages(programs, 132, 233472, 128, 64, 2) == stages


def test_resident_registers_leave_room_for_the_paged_rules_programs():
    # H200, 4 warps: all programs resident, up to PAGED_PROGRAMS_PER_SM (4) an SM
    assert decode.resident_registers(512, 132, 4, 65536) == 128
    assert decode.resident_registers(2048, 132, 4, 65536) == 128
    assert decode.resident_registers(396, 132, 4, 65536) == 168       # three an SM
    assert decode.resident_registers(264, 132, 4, 65536) == 255       # two an SM: no cap that binds
    assert decode.resident_registers(512, 132, 8, 65536) == 64


def test_paged_plans_cap_registers_only_with_indices_ahead(fresh_plans, monkeypatch):
    q, k, v = _inputs(2, 8, 2, 200, 64, torch.float16)
    k_pages, v_pages, table = decode.paged_cache(k, v, 16, seed=2)
    lens = torch.tensor([200, 77], dtype=torch.int32)
    for ahead, cap in ((True, 255), (False, None)):              # 4 programs of 132 SMs: no cap binds
        monkeypatch.setattr(decode, "PAGED_TABLE_AHEAD", ahead)
        plan = decode._plan(q, k_pages, v_pages, lens, None, None, table, None, None, None)
        assert plan.options.get("maxnreg") == cap
    q, k, v = _inputs(16, 32, 32, 256, 64, torch.float16)         # 512 programs: four an SM
    k_pages, v_pages, table = decode.paged_cache(k, v, 64, seed=2)
    lens = torch.full((16,), 256, dtype=torch.int32)
    plan = decode._plan(q, k_pages, v_pages, None, None, None, table, None, None, None, True)   # no lengths
    assert plan.grid == (1, 512) and plan.options["maxnreg"] == 128
    forced = decode._plan(q, k_pages, v_pages, None, None, None, table, 64, 4, 2, True)
    assert "maxnreg" not in forced.options                   # forced launch settings stay as given
    contiguous = decode._plan(q, k, v, lens, None, None, None, None, None, None, True)
    assert "maxnreg" not in contiguous.options
    unsplit = decode._plan(q, k_pages, v_pages, lens, None, None, table, None, None, None)   # the rule: S=1
    assert unsplit.grid == (1, 512) and unsplit.options == dict(num_warps=4, num_stages=4)   # contiguous launch


def test_long_grouped_chunks_plan_matches_reference(fresh_plans, poison, monkeypatch):
    """A split call with lengths over long chunks (here on 4 SMs, LONG_CHUNK_TOKENS lowered) reads
    LONG_CHUNK_CONFIG's 128-token tiles with its chunks dealt out by length, lengths that end inside a
    tile, at 1 and at Lmax included."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 4)
    monkeypatch.setattr(decode, "LONG_CHUNK_TOKENS", 256)
    q, k, v = _inputs(2, 8, 2, 600, 128, torch.float16)
    lens = torch.tensor([600, 1], dtype=torch.int32)
    plan = decode._plan(q, k, v, lens, None, None, None, None, None, None)
    block_n, warps, stages = decode.LONG_CHUNK_CONFIG
    assert plan.options == dict(num_warps=warps, num_stages=stages) and _rest(plan, "BLOCK_N") == block_n
    assert _rest(plan, "num_splits") == 2 and _rest(plan, "SPREAD")
    for lengths in (lens, torch.tensor([333, 599], dtype=torch.int32)):
        out = decode_attention(q, k, v, lengths)
        _assert_close(out, reference(q, k, v, lengths), torch.float16)
    q1, k1, v1 = q[:1], k[:1], v[:1]                 # one sequence, no lengths: two chunks of 300 tokens
    uniform = decode._plan(q1, k1, v1, None, None, None, None, None, None, None)
    assert _rest(uniform, "BLOCK_N") == 64 and _rest(uniform, "num_splits") == 2      # 64-token tiles
    _assert_close(decode_attention(q1, k1, v1), reference(q1, k1, v1, torch.full((1,), 600, dtype=torch.int32)),
                  torch.float16)


def test_paged_long_unsplit_launch_takes_the_long_chunk_config():
    # B=16 Hkv=8 and B=4 Hkv=32 (one program an SM), no lengths, L >= LONG_CHUNK_TOKENS: 128/8/3
    assert decode.launch_shape(16, 8, 4, 32768, 128, 2, 132, True, False) == (1, *decode.LONG_CHUNK_CONFIG)
    assert decode.launch_shape(4, 32, 1, 131072, 128, 2, 132, True, False) == (1, *decode.LONG_CHUNK_CONFIG)
    assert decode.launch_shape(32, 8, 4, 8192, 128, 2, 132, True, False) == (1, *decode.LONG_CHUNK_CONFIG)
    assert decode.launch_shape(16, 8, 4, 4096, 128, 2, 132, True, False) == (1, 64, 4, 4)       # shorter
    assert decode.launch_shape(64, 8, 4, 32768, 128, 2, 132, True, False) == (1, 64, 4, 2)      # 4 an SM
    assert decode.launch_shape(16, 8, 4, 32768, 128, 2, 132, False, False)[1:] == (64, 4, 4)    # contiguous
    assert decode.launch_shape(16, 8, 4, 32768, 256, 2, 132, True, False)[1] == 32              # D = 256
    assert decode.launch_shape(16, 8, 4, 32768, 128, 2, 132, True, False, block_n=64)[1:] == (64, 4, 4)
    assert decode.launch_shape(1, 8, 4, 32768, 128, 2, 132, True, False, 1)[1:] == (64, 4, 4)       # below the fill


def test_paged_long_unsplit_plan_matches_reference(fresh_plans, poison, monkeypatch):
    """Such a launch (here on 4 SMs, LONG_CHUNK_TOKENS lowered) reads 128-token tiles across 64-token
    pages, with no register cap."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 4)
    monkeypatch.setattr(decode, "LONG_CHUNK_TOKENS", 256)
    q, k, v = _inputs(2, 8, 2, 320, 128, torch.float16)
    k_pages, v_pages, table = decode.paged_cache(k, v, 64, seed=3)
    plan = decode._plan(q, k_pages, v_pages, None, None, None, table, None, None, None)
    block_n, warps, stages = decode.LONG_CHUNK_CONFIG
    assert plan.grid == (1, 4) and plan.options == dict(num_warps=warps, num_stages=stages)
    assert _rest(plan, "BLOCK_N") == block_n
    out = decode_attention(q, k_pages, v_pages, block_table=table)
    _assert_close(out, reference(q, k, v, torch.full((2,), 320, dtype=torch.int32)), torch.float16)


def test_paged_unsplit_filled_plan_matches_reference(fresh_plans, poison, monkeypatch):
    """A paged call with lengths past PAGED_UNSPLIT_PER_SM programs an SM (here 6 on 2 SMs) runs the
    contiguous call's launch: unsplit, longest first, launch_config's ring, no register cap."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 2)
    q, k, v = _inputs(3, 8, 2, 300, 64, torch.float16)
    lens = torch.tensor([17, 300, 151], dtype=torch.int32)
    k_pages, v_pages, table = decode.paged_cache(k, v, 16, seed=5)
    plan = decode._plan(q, k_pages, v_pages, lens, None, None, table, None, None, None)
    contiguous = decode._plan(q, k, v, lens, None, None, None, None, None, None)
    assert plan.grid == contiguous.grid == (1, 6) and plan.options == contiguous.options
    assert "maxnreg" not in plan.options and _rest(plan, "LONGEST_FIRST") and _rest(plan, "TABLE_AHEAD")
    out = decode_attention(q, k_pages, v_pages, lens, block_table=table)
    _assert_close(out, reference(q, k, v, lens), torch.float16)


def test_paged_launch_takes_the_ring_only_when_indices_come_a_tile_ahead():
    # B=16 Hkv=8 L=4096 paged with lengths: S=4, 512 programs on 132 SMs, 4 an SM: 2 stages
    assert decode.launch_shape(16, 8, 4, 4096, 128, 2, 132, True, True, table_ahead=True) == (4, 64, 4, 2)
    # B=4 Hkv=8 L=32768: S=4, 128 programs, 1 an SM: 4 stages; B=1 Hkv=8 L=4096: S=16, 1 an SM: 4 stages
    assert decode.launch_shape(4, 8, 4, 32768, 128, 2, 132, True, True, table_ahead=True) == (4, 64, 4, 4)
    assert decode.launch_shape(1, 8, 4, 4096, 128, 2, 132, True, True, table_ahead=True) == (16, 64, 4, 4)
    # B=1 Hkv=8 L=131072: S=33 (two programs an SM below the fill), 264 programs: 4 stages
    assert decode.launch_shape(1, 8, 4, 131072, 128, 2, 132, True, True, table_ahead=True) == (33, 64, 4, 4)
    # B=16 Hkv=32 L=1024 unsplit, 4 programs an SM: 2 stages without lengths, the contiguous launch with
    # them (paged_unsplit_filled); B=32 Hkv=8 L=4096 (2 an SM, lengths): S=2 on a 2-stage ring
    assert decode.launch_shape(16, 32, 1, 1024, 128, 2, 132, True, False, table_ahead=True) == (1, 64, 4, 2)
    assert decode.launch_shape(16, 32, 1, 1024, 128, 2, 132, True, True, table_ahead=True) == (1, 64, 4, 4)
    assert decode.launch_shape(64, 8, 4, 4096, 128, 2, 132, True, True, table_ahead=True) == \
        decode.launch_shape(64, 8, 4, 4096, 128, 2, 132, False, True, table_ahead=True) == (1, 64, 4, 4)
    assert decode.launch_shape(32, 8, 4, 4096, 128, 2, 132, True, True, table_ahead=True) == (2, 64, 4, 2)
    assert decode.launch_shape(16, 8, 4, 4096, 128, 2, 132, True, True, table_ahead=False)[3] == 4
    assert decode.launch_shape(16, 8, 4, 4096, 128, 2, 132, True, True, num_stages=3, table_ahead=True)[3] == 3
    assert decode.launch_shape(16, 8, 4, 4096, 128, 2, 132, False, True, table_ahead=True)[3] == 4   # contiguous


@pytest.mark.parametrize("batch,heads_q,heads_kv,cache_len,head_dim,page_size,ragged,num_splits,dtype", PAGED_CASES)
def test_paged_matches_reference(poison, table_ahead, batch, heads_q, heads_kv, cache_len, head_dim, page_size, ragged,
                                 num_splits, dtype):
    q, k, v = _inputs(batch, heads_q, heads_kv, cache_len, head_dim, dtype)
    # Without lengths a paged sequence is max_pages * page_size tokens long (its last page padded).
    lens = _ragged(batch, cache_len) if ragged else torch.full((batch,), cache_len, dtype=torch.int32)
    k_pages, v_pages, table = decode.paged_cache(k, v, page_size, seed=batch)
    assert sorted(table.flatten().tolist()) == list(range(k_pages.shape[0]))   # every page once
    if table.numel() > 1:
        assert table.flatten().tolist() != sorted(table.flatten().tolist())   # pages shuffled
    ref = reference(q, k, v, lens)
    torch.testing.assert_close(decode.paged_reference(q, k_pages, v_pages, table, lens), ref, rtol=0, atol=0)
    out = decode_attention(q, k_pages, v_pages, lens, num_splits=num_splits, block_table=table)
    _assert_close(out, ref, dtype)


def test_paged_reads_only_the_pages_of_each_sequence(poison, table_ahead):
    """Slots past a sequence's length, pool pages no table names and table entries past the
    used pages are poison (NaN caches, -1 indices); the answer must not see them."""
    page = 16
    q, k, v = _inputs(3, 8, 2, 100, 64, torch.float16)
    lens = torch.tensor([1, 100, 33], dtype=torch.int32)
    k_pages, v_pages, table = decode.paged_cache(k, v, page, seed=7)
    spare = torch.full((5, page, 2, 64), float("nan"), dtype=torch.float16)     # pages nobody uses
    k_pages, v_pages = torch.cat([spare, k_pages]), torch.cat([spare, v_pages])
    table = table + 5
    for b, n in enumerate(lens.tolist()):
        used = -(-n // page)
        for p in range(table.shape[1]):
            first = max(0, n - p * page)                                      # slots past the length
            k_pages[table[b, p], first:] = float("nan")
            v_pages[table[b, p], first:] = float("inf")
        table[b, used:] = -1
    ref = reference(q, k, v, lens)
    for splits in (None, 1, 3):
        _assert_close(decode_attention(q, k_pages, v_pages, lens, num_splits=splits, block_table=table), ref,
                      torch.float16)


def test_paged_layouts_and_strides(poison, table_ahead):
    """A head-major pool (num_pages, Hkv, page, D) passed transposed, and a column-major table."""
    q, k, v = _inputs(2, 4, 2, 90, 64, torch.bfloat16)
    lens = torch.tensor([90, 41], dtype=torch.int32)
    k_pages, v_pages, table = decode.paged_cache(k, v, 32, seed=3)
    k_hnd = k_pages.transpose(1, 2).contiguous().transpose(1, 2)               # (num_pages, page, Hkv, D) view
    table_t = table.t().contiguous().t()
    assert not k_hnd.is_contiguous() and table_t.stride() == (1, 2)
    ref = reference(q, k, v, lens)
    for splits in (None, 2):
        _assert_close(decode_attention(q, k_hnd, v_pages, lens, num_splits=splits, block_table=table_t), ref,
                      torch.bfloat16)


def test_paged_repeat_calls_check_host_tables_every_time(fresh_plans):
    q, k, v = _inputs(2, 4, 2, 40, 32, torch.float16)
    k_pages, v_pages, table = decode.paged_cache(k, v, 16, seed=1)
    lens = torch.tensor([40, 17], dtype=torch.int32)
    first = decode_attention(q, k_pages, v_pages, lens, block_table=table)
    again = decode_attention(q, k_pages, v_pages, lens, block_table=table)
    assert len(decode._PLANS) == 1
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    bad = table.clone()
    bad[1, 1] = k_pages.shape[0]                                # a used page outside the pool
    with pytest.raises(ValueError, match="outside 0..5"):
        decode_attention(q, k_pages, v_pages, lens, block_table=bad)
    bad[1, 1], bad[1, 2] = table[1, 1], -1                      # unused by a 17-token sequence: fine
    torch.testing.assert_close(decode_attention(q, k_pages, v_pages, lens, block_table=bad), first,
                               rtol=0, atol=0)


@pytest.mark.parametrize("ahead", [False, True], ids=["table_per_tile", "table_ahead"])
def test_paged_kernel_clamps_device_table_entries_into_the_pool(fresh_plans, poison, monkeypatch, ahead):
    """A table already on the device is not read back (_to_device): the kernel clamps its entries,
    negative ones and those past the pool alike, to the pool's last page, and reads nothing else."""
    monkeypatch.setattr(decode, "PAGED_TABLE_AHEAD", ahead)
    monkeypatch.setattr(decode, "_to_device", lambda lens, table, device, cache_len, num_pages: (lens, table))
    q, k, v = _inputs(2, 4, 2, 64, 32, torch.float16)
    k_pages, v_pages, table = decode.paged_cache(k, v, 16, seed=3)
    last = k_pages.shape[0] - 1
    bad = table.clone()
    bad[0, 1], bad[1, 3] = -1, last + 5                         # used pages: below and past the pool
    clamped = bad.clone()
    clamped[0, 1] = clamped[1, 3] = last
    out = decode_attention(q, k_pages, v_pages, block_table=bad)
    _assert_close(out, decode.paged_reference(q, k_pages, v_pages, clamped), torch.float16)


PAGED_BAD = [
    (lambda q, kp, vp, t: decode_attention(q, kp, vp, block_table=t.long()), "int32"),
    (lambda q, kp, vp, t: decode_attention(q, kp, vp, block_table=[[0, 1]]), "int32"),
    (lambda q, kp, vp, t: decode_attention(q, kp, vp, block_table=t[:1]), r"shape \(2, max_pages\)"),
    (lambda q, kp, vp, t: decode_attention(q, kp, vp, block_table=t[0]), r"shape \(2, max_pages\)"),
    (lambda q, kp, vp, t: decode_attention(q, kp[:, :12], vp[:, :12], block_table=t), "power of two in 16..256"),
    (lambda q, kp, vp, t: decode_attention(q, kp.repeat(1, 32, 1, 1), vp.repeat(1, 32, 1, 1), block_table=t),
     "power of two"),
    (lambda q, kp, vp, t: decode_attention(q, kp[:, :8], vp[:, :8], block_table=t), "power of two"),
    (lambda q, kp, vp, t: decode_attention(q, kp, vp, torch.tensor([3, 33]), block_table=t),
     r"0..32 \(max_pages \* page_size"),
    (lambda q, kp, vp, t: decode_attention(q, kp, vp, block_table=t * 10), "outside"),
    (lambda q, kp, vp, t: decode_attention(q, kp[0], vp[0], block_table=t), r"4 dimensions \(num_pages"),
    (lambda q, kp, vp, t: decode_attention(q, kp, vp[:, :, :1], block_table=t), "differ in shape"),
    (lambda q, kp, vp, t: decode_attention(q, kp[..., :16], vp[..., :16], block_table=t), "head_dim"),
    (lambda q, kp, vp, t: decode_attention(q, kp[:0], vp[:0], block_table=t[:, :0]), "no tokens|no pages"),
]


@pytest.mark.parametrize("call,needle", PAGED_BAD)
def test_paged_bad_input_raises_value_error(call, needle):
    q, k, v = _inputs(2, 4, 2, 32, 32, torch.float16)
    k_pages, v_pages, table = decode.paged_cache(k, v, 16)
    with pytest.raises(ValueError, match=needle):
        call(q, k_pages, v_pages, table)


# ---- the plan: choose_splits over balanced chunks (one-wave rule contiguous, paged rule paged), grouped merge ----

@pytest.mark.parametrize("heads_q,heads_kv,head_dim,splits", [(8, 2, 64, 7), (16, 1, 256, 7), (6, 2, 48, 19),
                                                               (2, 2, 128, 5), (32, 1, 64, 13)])
def test_balanced_chunks_and_grouped_merge(poison, heads_q, heads_kv, head_dim, splits):
    """Forced S with 16-token tiles: 301 tokens are 19 tiles, cut into S balanced chunks (S = 7: 2-3
    tiles each, 19: one each); lengths end mid-tile, on a chunk's edge and at 1. G = 16 and 32 at
    D = 256 and 64 merge over several steps of merge_step(G, D) splits (G = 3 pads to 4 rows)."""
    q, k, v = _inputs(4, heads_q, heads_kv, 301, head_dim, torch.float16)
    lens = torch.tensor([1, 301, 48, 170], dtype=torch.int32)     # 48: three whole tiles
    ref = reference(q, k, v, lens)
    out = decode._decode(q, k, v, lens, None, splits, None, 16, None, None)
    _assert_close(out, ref, torch.float16)
    single = decode._decode(q, k, v, lens, None, 1, None, 16, None, None)        # no merge at all
    assert (out.float() - single.float()).abs().max() < 2e-3
    assert int(decode._COUNTERS[(q.device, 0)].abs().sum()) == 0            # every merge reset its counter


def test_balanced_chunks_partition_the_tiles():
    """The tiles of the splits (floor(s * n / S) .. floor((s + 1) * n / S) - 1) cover 0..n-1 once,
    none empty, lengths differing by at most one; the kernel's count of splits holding keys is the
    number whose first tile lies before the sequence's last."""
    for n_blocks in (1, 2, 7, 16, 19, 256, 2048):
        for splits in sorted({1, 2, 3, 5, 11, 16, 33, 64, n_blocks}):
            for paged in (False, True):
                s, block_n = decode.launch_shape(1, 1, 1, n_blocks * 64, 128, 2, 132, paged, False, splits)[:2]
                assert s == min(splits, n_blocks) and block_n == 64
            bounds = [i * n_blocks // s for i in range(s + 1)]
            assert bounds[0] == 0 and bounds[-1] == n_blocks
            sizes = [b - a for a, b in zip(bounds, bounds[1:])]
            assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
            for tiles in {1, n_blocks // 2 or 1, n_blocks}:                 # tiles with keys
                assert cdiv(tiles * s, n_blocks) == sum(1 for a in bounds[:-1] if a < tiles)


def test_grouped_merge_with_far_apart_splits(poison):
    """Logits in the hundreds, and one key per sequence far above the rest: most splits' weights
    exp2(lse_s - max lse) underflow to 0, none may give NaN."""
    q, k, v = _inputs(2, 8, 2, 500, 64, torch.float16, scale=20.0)
    k[0, 1, 433] = (q[0, 6] * 4).clamp(-60, 60)                 # one dominant key in the last splits
    lens = torch.tensor([500, 3], dtype=torch.int32)
    ref = reference(q, k, v, lens)
    for splits in (None, 4, 9):
        _assert_close(decode_attention(q, k, v, lens, num_splits=splits), ref, torch.float16)


def test_paged_balanced_chunks_span_pages(poison):
    """16-token tiles over 16-token pages in a shuffled pool, 7 balanced splits of 2-3 tiles."""
    q, k, v = _inputs(3, 8, 2, 301, 64, torch.float16)
    lens = torch.tensor([301, 1, 129], dtype=torch.int32)
    k_pages, v_pages, table = decode.paged_cache(k, v, 16, seed=4)
    out = decode._decode(q, k_pages, v_pages, lens, None, 7, table, 16, None, None)
    _assert_close(out, reference(q, k, v, lens), torch.float16)


def test_plan_rule_and_merge(fresh_plans, monkeypatch):
    """The plan's split counts: choose_splits' one-wave rule for a contiguous cache (also where B * Hkv
    divides the SMs badly: the wave-filling S=11 and S=5 measured slower), its paged rule for a paged one
    (16 at B=1 Hkv=8 L=16384, one sequence's one wave; 16 at B=4 and 4 at B=16
    L=1024, page 64, lengths passed); a split launch merges with merge_step(G, D) splits a step."""
    monkeypatch.setattr(decode, "sm_count", lambda device: 132)
    q, k, v = _inputs(3, 32, 8, 1024, 128, torch.float16)
    decode_attention(q, k, v)
    (plan,) = decode._PLANS.values()
    assert plan.grid == (4, 24)
    assert (_rest(plan, "n_blocks"), _rest(plan, "num_splits")) == (16, 4)    # 16 tiles over 4 splits
    assert _rest(plan, "BLOCK_S") == decode.merge_step(4, 128) == 4
    assert _rest(plan, "PAGE_SIZE") == 0 and _rest(plan, "TABLE_AHEAD") == 0   # not paged
    assert decode.planned_splits(25, 8, 4096, 128, 2, 132, 4) == 1           # 200 programs: no split
    assert decode.planned_splits(3, 8, 16384, 128, 2, 132, 4) == 5           # 132 // 24
    assert decode.planned_splits(3, 8, 1024, 128, 2, 132, 4) == 4            # 16 tiles: 4 chunks of 4
    for batch, heads_kv, cache_len in ((25, 8, 4096), (3, 8, 16384), (1, 8, 1024), (4, 8, 16384), (16, 32, 4096)):
        for lengths in (False, True):
            assert decode.planned_splits(batch, heads_kv, cache_len, 128, 2, 132, 32 // heads_kv, False,
                                         lengths) == choose_splits(batch, heads_kv, cache_len, 64, 132,
                                                                   lengths=lengths)
    for batch, cache_len, splits in ((1, 16384, 16), (4, 16384, 4), (16, 1024, 4)):
        assert decode.planned_splits(batch, 8, cache_len, 128, 2, 132, 4, True, True) == splits
        assert choose_splits(batch, 8, cache_len, 64, 132, paged=True, lengths=True) == splits
    assert decode.planned_splits(1, 8, 1024, 128, 2, 132, 4, True, True) == 16    # paged rule: 2 tiles each
    assert decode.planned_splits(1, 8, 1024, 128, 2, 132, 4) == 16                # one wave: 132 // 8


def test_study_strategy_follows_the_plan(monkeypatch):
    monkeypatch.setattr(decode, "sm_count", lambda device: 132)
    shape = {"batch": 25, "heads_q": 32, "heads_kv": 8, "cache_len": 4096, "head_dim": 128, "ragged": False}
    inputs = {"k_cache": torch.zeros(1, dtype=torch.float16), "ragged": False}
    assert study.strategy(shape, "float16", inputs) == "nosplit"             # 200 programs fill the SMs
    shape.update(batch=3, cache_len=16384)
    assert study.strategy(shape, "float16", inputs) == "split5"              # one wave: 132 // 24
    shape["batch"] = 64
    assert study.strategy(shape, "float16", inputs) == "nosplit"


def test_merge_step():
    assert decode.merge_step(4, 128) == 4 and decode.merge_step(1, 128) == 8 and decode.merge_step(32, 256) == 2


@pytest.mark.parametrize("num_splits", [1, 3, None])
def test_device_lengths_past_int32_clamp_instead_of_wrapping(fresh_plans, poison, monkeypatch, num_splits):
    """Lengths already on the GPU are not read back (_to_device, stood in for here): the kernel clamps
    them into 0..Lmax, in their own 64-bit dtype before narrowing, so 2**32 + 5 attends to all 40
    tokens (not 5) and -2**32 + 3 to none (not 3)."""
    monkeypatch.setattr(decode, "_to_device", lambda lens, table, device, cache_len, num_pages: (lens, table))
    q, k, v = _inputs(3, 4, 2, 40, 32, torch.float16)
    lens = torch.tensor([2**32 + 5, -2**32 + 3, 2**31 + 7], dtype=torch.int64)
    out = decode_attention(q, k, v, lens, num_splits=num_splits)
    _assert_close(out, reference(q, k, v, torch.tensor([40, 0, 40])), torch.float16)


def test_checked_host_values_are_copied_from_pageable_memory(monkeypatch):
    """A pinned host tensor copied without waiting is read when the stream gets to it, after the
    caller may have rewritten it: _copy_checked clones it into pageable memory first."""
    copied = []
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *args, **kwargs: copied.append(self) or self)
    lens = torch.tensor([3, 4])
    for pinned in (True, False):
        monkeypatch.setattr(torch.Tensor, "is_pinned", lambda self, pinned=pinned: pinned)
        decode._copy_checked(lens, torch.device("cuda"))
    assert copied[0] is not lens and torch.equal(copied[0], lens)      # pinned: a clone went to the device
    assert copied[1] is lens                                          # pageable: staged by the copy itself
