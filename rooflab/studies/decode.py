"""Decode attention: one query token per sequence against a KV cache (B, Hkv, Lmax, D).

Traffic: the K and V bytes that must be read, 2 * sum(seqlens) * Hkv * D * element_size
(kernels.flash_decoding.decode_traffic); the metric is that count over the median time, against the
measured read-only ceiling. FLOPs: 4 * Hq * D * sum(seqlens) (q.K and p.V, two per
multiply-add). With ragged lengths a peer that reads the whole cache under a mask is charged
for the valid prefix only, so its TB/s is what a user gets, not what its loads move.

`ours_paged` runs decode_attention on a paged copy of the case's cache (kernels.flash_decoding
.paged_cache: PAGE_SIZE-token pages in a shuffled pool, with a block table), built before
timing and checked against the same reference as every other row. It reads the same K and V
bytes, so its traffic is the contiguous case's (the table's int32 entries are not counted), and
it is given the lengths where `ours` is (ragged cases), so the two calls differ in the cache's
layout only, and where the last page is part-filled, which a paged call needs them for.
"""
from __future__ import annotations

import warnings

import torch

from rooflab.bench import TOLERANCE, Ceiling, Unsupported, error_metrics, is_fault, is_oom

STUDY = "decode"
LENGTH_SEED = 20240607     # ragged lengths: one fixed generator, so every run and impl sees the same
INPUT_SEED = 0             # q, k_cache, v_cache
PAGE_SIZE = 64             # ours_paged: tokens a page (one BLOCK_N tile at D = 128)
PAGE_SEED = 1              # ours_paged: the pool's page order


def shapes(grid: list[dict]) -> list[dict]:
    keys = ("batch", "heads_q", "heads_kv", "cache_len", "head_dim")
    return [{**{k: int(entry[k]) for k in keys}, "ragged": bool(entry.get("ragged", False))} for entry in grid]


def seqlens_for(shape: dict) -> torch.Tensor:
    """(B,) int32 lengths on the CPU: all cache_len, or ragged draws in 1..cache_len.

    Ragged: uniform draws from a fixed generator; with two or more sequences the first is
    1 token long and the second is full, so both extremes are always present.
    """
    batch, cache_len = shape["batch"], shape["cache_len"]
    if not shape.get("ragged", False):
        return torch.full((batch,), cache_len, dtype=torch.int32)
    gen = torch.Generator().manual_seed(LENGTH_SEED)
    lengths = torch.randint(1, cache_len + 1, (batch,), generator=gen, dtype=torch.int32)
    if batch >= 2:
        lengths[0], lengths[1] = 1, cache_len
    return lengths


def make_inputs(shape: dict, dtype: torch.dtype, device: str) -> dict:
    b, hq, hkv, n, d = (shape[k] for k in ("batch", "heads_q", "heads_kv", "cache_len", "head_dim"))
    gen = torch.Generator(device=device).manual_seed(INPUT_SEED)
    q = torch.randn(b, hq, d, generator=gen, device=device, dtype=dtype)             # (B, Hq, D)
    k_cache = torch.randn(b, hkv, n, d, generator=gen, device=device, dtype=dtype)   # (B, Hkv, Lmax, D)
    v_cache = torch.randn(b, hkv, n, d, generator=gen, device=device, dtype=dtype)
    seqlens = seqlens_for(shape).to(device)                                          # (B,)
    return {"q": q, "k_cache": k_cache, "v_cache": v_cache, "seqlens": seqlens,
            "ragged": bool(shape.get("ragged", False))}


def reference(inputs: dict) -> torch.Tensor:
    """float64, one sequence on its valid prefix at a time (bounded memory at B=64, L=128k)."""
    from kernels.flash_decoding import reference as decode_reference
    return decode_reference(inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["seqlens"])


def check(out, ref, inputs):
    """Each (sequence, query head) output row against its own norm (error_metrics per_row): a
    one-token sequence's output is a V row, a long one's an average of many, much smaller, so
    the whole tensor's norm would hide an error in the long sequences of a ragged batch."""
    return error_metrics(out, ref, per_row=True)


def tolerance(dtype: str) -> float:
    return TOLERANCE[dtype]


def work(shape: dict, dtype: str) -> tuple[float, float]:
    from kernels.flash_decoding import decode_traffic
    element = torch.tensor([], dtype=getattr(torch, dtype)).element_size()
    total = int(seqlens_for(shape).sum())
    kv_bytes, _ = decode_traffic(total, shape["batch"], shape["heads_q"], shape["heads_kv"],
                                 shape["head_dim"], element)
    return float(kv_bytes), 4.0 * shape["heads_q"] * shape["head_dim"] * total


def input_bytes(shape: dict, dtype: str) -> int:
    """Size of the K and V caches at full length: what `decode.max_cache_gib` bounds."""
    element = torch.tensor([], dtype=getattr(torch, dtype)).element_size()
    return 2 * shape["batch"] * shape["heads_kv"] * shape["cache_len"] * shape["head_dim"] * element


def ceiling(dtype: str, ceilings: dict) -> Ceiling:
    return Ceiling("tbps", ceilings.get("read_tbps"), ceilings.get("datasheet_bandwidth_tbps"), "read_tbps")


def strategy(shape: dict, dtype: str, inputs: dict) -> str:
    """`nosplit` (its forced twin is ours_nosplit) or `split<S>`: what decode_attention chooses here
    (a contiguous cache: the one-wave rule's S, choose_splits, over balanced chunks, merged by the
    grouped merge)."""
    from kernels._device import sm_count
    from kernels.flash_decoding import planned_splits
    k = inputs["k_cache"]
    splits = planned_splits(shape["batch"], shape["heads_kv"], shape["cache_len"], shape["head_dim"],
                            k.element_size(), sm_count(k.device), shape["heads_q"] // shape["heads_kv"],
                            lengths=inputs["ragged"])      # ours passes seqlens exactly when ragged
    return "nosplit" if splits == 1 else f"split{splits}"


# ---- implementations: each factory takes the inputs and returns a zero-argument callable ----

def _ours(inputs):
    import kernels
    q, k, v = inputs["q"], inputs["k_cache"], inputs["v_cache"]
    lens = inputs["seqlens"] if inputs["ragged"] else None
    return lambda: kernels.decode_attention(q, k, v, lens)


def _ours_nosplit(inputs):
    from kernels.flash_decoding import decode_attention_nosplit
    q, k, v = inputs["q"], inputs["k_cache"], inputs["v_cache"]
    lens = inputs["seqlens"] if inputs["ragged"] else None
    return lambda: decode_attention_nosplit(q, k, v, lens)


def _ours_paged(inputs):
    """decode_attention over a shuffled paged copy of the cache, given the lengths where `ours` is
    (ragged cases), so the two differ in layout alone; also where the last page is part-filled (a
    paged sequence without lengths is max_pages * PAGE_SIZE tokens long)."""
    import kernels
    from kernels.flash_decoding import paged_cache
    full = inputs["k_cache"].shape[2] % PAGE_SIZE == 0                 # (B, Hkv, Lmax, D)
    q, lens = inputs["q"], inputs["seqlens"] if inputs["ragged"] or not full else None
    k_pages, v_pages, table = paged_cache(inputs["k_cache"], inputs["v_cache"], PAGE_SIZE, seed=PAGE_SEED)
    return lambda: kernels.decode_attention(q, k_pages, v_pages, lens, block_table=table)


def _sdpa(backend_name: str, masks: bool):
    """SDPA with one backend forced; GQA via enable_gqa, else KV heads expanded before timing."""
    def factory(inputs):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention as sdpa

        backend = getattr(SDPBackend, backend_name)
        q = inputs["q"].unsqueeze(2)                              # (B, Hq, 1, D)
        k, v = inputs["k_cache"], inputs["v_cache"]               # (B, Hkv, Lmax, D)
        mask = None
        if inputs["ragged"]:
            if not masks:
                raise Unsupported(f"SDPA's {backend_name} backend takes no attention mask, "
                                  "so it cannot stop at each sequence's length")
            valid = torch.arange(k.shape[2], device=k.device) < inputs["seqlens"][:, None]   # (B, Lmax)
            mask = torch.zeros(valid.shape, device=k.device, dtype=q.dtype)
            mask = mask.masked_fill_(~valid, float("-inf"))[:, None, None, :]               # (B, 1, 1, Lmax)
        group = q.shape[1] // k.shape[1]

        def call(kk, vv, gqa):
            with sdpa_kernel(backend):
                return sdpa(q, kk, vv, attn_mask=mask, enable_gqa=gqa)

        reasons = []
        attempts = [(k, v, group > 1)]
        if group > 1:
            # Backends without enable_gqa get the KV heads repeated here, outside the timed callable.
            attempts.append((None, None, False))
        for kk, vv, gqa in attempts:
            if kk is None:
                kk = k.repeat_interleave(group, dim=1)            # (B, Hq, Lmax, D)
                vv = v.repeat_interleave(group, dim=1)
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    call(kk, vv, gqa)
            except RuntimeError as exc:
                if is_oom(exc) or is_fault(exc):   # not a refusal: the device's own error
                    raise
                why = "; ".join(str(w.message) for w in caught) or str(exc)
                reasons.append(f"{'enable_gqa' if gqa else 'plain'}: {why}")
                continue
            return lambda: call(kk, vv, gqa).squeeze(2)           # (B, Hq, D)
        raise Unsupported(f"SDPA {backend_name} refuses this case: " + " | ".join(reasons))
    return factory


def impls() -> dict:
    return {
        "ours": _ours,
        "ours_nosplit": _ours_nosplit,
        "ours_paged": _ours_paged,
        "sdpa_flash": _sdpa("FLASH_ATTENTION", masks=False),
        "sdpa_cudnn": _sdpa("CUDNN_ATTENTION", masks=True),
        "sdpa_efficient": _sdpa("EFFICIENT_ATTENTION", masks=True),
    }
