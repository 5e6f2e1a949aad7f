"""Attention forward: q (B, Hq, Nq, D), k and v (B, Hkv, Nk, D) -> o (B, Hq, Nq, D).

Conventions
- Shapes: grid entries carry batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal;
  seqlen_k left out means seqlen_q, heads_kv left out means heads_q.
- Causal masks are aligned bottom-right (FlashAttention-2's convention): query i sees keys
  j <= i + Nk - Nq. torch's `is_causal=True` aligns top-left, so for Nq != Nk the SDPA peers
  get SDPA's own bottom-right bias, causal_lower_right (see `_sdpa_bottom_right`), or are unsupported.
- Work: FLOPs from kernels.flash_attention.attention_flops (4*B*Hq*Nq*Nk*D, halved for causal square
  shapes, visible pairs counted exactly otherwise); bytes = q, k, v read once and o written
  once. The metric is TFLOP/s against the measured dense matmul ceiling of the dtype.
- Correctness: the reference is float64 on a bounded subset, so that it fits at N = 32k: the
  first and last batch entries, three query heads from different key/value groups (0, Hq/2,
  Hq-1), and up to 256 query rows (the first 64, the last 64 and 128 spread between them).
  check() compares the same subset of the output. Tolerance (relative L2 error): 1e-2 for
  fp16 and 2e-2 for bf16. Every implementation rounds the probabilities to the input dtype
  before the second product (2^-11 relative for fp16, 2^-8 for bf16) and eager rounds the
  scores too, which puts correct fp16 rows near 1e-3 and correct bf16 rows near 5e-3-1e-2;
  a wrong mask or a wrong row moves the error to 1e-1 or more.
- memory_bytes(impl, shape, dtype) is the analytic footprint used to draw OOM cut-offs.
- `ours` is kernels.flash_attention.attention, which runs the Gluon Hopper kernel where it
  applies (its rows' `strategy` is then `gluon-hopper`, else the Triton config autotuning
  chose); `ours_triton` (attention_triton) runs the Triton kernel everywhere.
"""
from __future__ import annotations

import contextlib
import math
import warnings

import torch
import torch.nn.functional as F

from kernels.flash_attention import attention, attention_bytes, attention_flops, attention_triton
from rooflab.bench import Ceiling, Unsupported, error_metrics, is_fault, is_oom

STUDY = "attention"
SHAPE_KEYS = ("batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal")
TOLERANCES = {"float16": 1e-2, "bfloat16": 2e-2}
REF_EDGE_ROWS = 64      # first and last query rows always checked
REF_SPREAD_ROWS = 128   # rows spread evenly between them


def shapes(grid: list[dict]) -> list[dict]:
    out = []
    for entry in grid:
        shape = {
            "batch": int(entry["batch"]),
            "heads_q": int(entry["heads_q"]),
            "heads_kv": int(entry.get("heads_kv", entry["heads_q"])),
            "seqlen_q": int(entry["seqlen_q"]),
            "seqlen_k": int(entry.get("seqlen_k", entry["seqlen_q"])),
            "head_dim": int(entry["head_dim"]),
            "causal": bool(entry["causal"]),
        }
        if shape not in out:
            out.append(shape)
    return out


def _ref_subset(shape: dict) -> tuple[list[int], list[int], list[int]]:
    """(batch entries, query heads, query rows) the reference covers."""
    batches = sorted({0, shape["batch"] - 1})
    hq = shape["heads_q"]
    heads = sorted({0, hq // 2, hq - 1})
    n = shape["seqlen_q"]
    rows = set(range(min(REF_EDGE_ROWS, n))) | set(range(max(n - REF_EDGE_ROWS, 0), n))
    rows |= {round(i * (n - 1) / (REF_SPREAD_ROWS + 1)) for i in range(1, REF_SPREAD_ROWS + 1)}
    return batches, heads, sorted(rows)


def make_inputs(shape: dict, dtype: torch.dtype, device: str) -> dict:
    gen = torch.Generator(device=device).manual_seed(0)
    b, hq, hkv, d = shape["batch"], shape["heads_q"], shape["heads_kv"], shape["head_dim"]
    q = torch.randn(b, hq, shape["seqlen_q"], d, generator=gen, device=device, dtype=dtype)   # (B, Hq, Nq, D)
    k = torch.randn(b, hkv, shape["seqlen_k"], d, generator=gen, device=device, dtype=dtype)  # (B, Hkv, Nk, D)
    v = torch.randn(b, hkv, shape["seqlen_k"], d, generator=gen, device=device, dtype=dtype)
    batches, heads, rows = _ref_subset(shape)
    return {"q": q, "k": k, "v": v, "causal": shape["causal"], "shape": shape,
            "ref_batches": batches, "ref_heads": heads, "ref_rows": rows}


def reference(inputs: dict) -> torch.Tensor:
    """float64 attention on the subset: (len(ref_batches), len(ref_heads), len(ref_rows), D)."""
    q, k, v, shape = inputs["q"], inputs["k"], inputs["v"], inputs["shape"]
    group = shape["heads_q"] // shape["heads_kv"]
    rows = torch.tensor(inputs["ref_rows"], device=q.device)
    scale = 1.0 / math.sqrt(shape["head_dim"])
    cols = torch.arange(shape["seqlen_k"], device=q.device)
    hidden = cols[None, :] > rows[:, None] + (shape["seqlen_k"] - shape["seqlen_q"])  # (R, Nk)
    keyless = hidden.all(dim=-1)[:, None]                     # (R, 1): rows that see no key
    out = []
    for b in inputs["ref_batches"]:
        per_head = []
        for h in inputs["ref_heads"]:
            qh = q[b, h, rows].to(torch.float64)              # (R, D)
            kh = k[b, h // group].to(torch.float64)           # (Nk, D)
            vh = v[b, h // group].to(torch.float64)
            scores = (qh @ kh.T) * scale                      # (R, Nk)
            if inputs["causal"]:
                scores = scores.masked_fill(hidden, float("-inf"))
                probs = torch.softmax(scores, dim=-1).masked_fill(keyless, 0.0)  # a row that sees no key -> 0
            else:                                             # (NaN from NaN inputs stays NaN)
                probs = torch.softmax(scores, dim=-1)
            per_head.append(probs @ vh)                       # (R, D)
        out.append(torch.stack(per_head))
    return torch.stack(out)


def check(out: torch.Tensor, ref: torch.Tensor, inputs: dict) -> tuple[float, float]:
    rows = torch.tensor(inputs["ref_rows"], device=out.device)
    sub = out[inputs["ref_batches"]][:, inputs["ref_heads"]][:, :, rows]
    return error_metrics(sub, ref)


def tolerance(dtype: str) -> float:
    return TOLERANCES[dtype]


def _element_size(dtype: str) -> int:
    return torch.tensor([], dtype=getattr(torch, dtype)).element_size()


def work(shape: dict, dtype: str) -> tuple[float, float]:
    s = shape
    nbytes = attention_bytes(s["batch"], s["heads_q"], s["heads_kv"], s["seqlen_q"], s["seqlen_k"],
                             s["head_dim"], _element_size(dtype))
    flops = attention_flops(s["batch"], s["heads_q"], s["seqlen_q"], s["seqlen_k"], s["head_dim"], s["causal"])
    return nbytes, flops


def ceiling(dtype: str, ceilings: dict) -> Ceiling:
    kind = {"float16": "fp16", "bfloat16": "bf16"}[dtype]
    return Ceiling("tflops", ceilings.get(f"matmul_{kind}_tflops"), ceilings.get(f"datasheet_{kind}_tflops"),
                   f"matmul_{kind}_tflops")


def memory_bytes(impl: str, shape: dict, dtype: str) -> int:
    """Bytes an implementation holds at its peak: inputs and output, plus what it materialises.

    eager holds two (B, Hq, Nq, Nk) score matrices at once: q @ k^T and its scaled copy, then
    the scores and the probabilities softmax writes; with GQA it also copies K (then V) expanded
    to Hq heads inside the broadcast matmul. The SDPA peers that cannot take GQA natively run on
    K and V expanded in the factory. The flash-style kernels hold nothing of size Nq * Nk.
    """
    e = _element_size(dtype)
    b, hq, hkv, nq, nk, d = (shape[c] for c in SHAPE_KEYS[:6])
    io = e * d * b * (2 * hq * nq + 2 * hkv * nk)
    if impl == "eager":
        expanded = e * d * b * hq * nk if hkv != hq else 0
        return io + 2 * e * b * hq * nq * nk + expanded
    if impl in ("sdpa_efficient", "sdpa_cudnn") and hkv != hq:
        return io + 2 * e * d * b * hq * nk
    return io


# ---- implementations: each factory takes the inputs and returns a zero-argument callable ----

def strategy(shape: dict, dtype: str, inputs: dict) -> str | None:
    """The kernel `ours` ran here: `gluon-hopper` for the Gluon Hopper kernel, else the config
    autotuning picked for the Triton kernel, e.g. `128x64 w8 s3 tma` (BLOCK_M x BLOCK_N, warps,
    pipeline stages, load path); None before the first call or in the interpreter."""
    from kernels.flash_attention import HOPPER_PATH, chosen_config, kernel_path
    if kernel_path(inputs["q"], inputs["k"], inputs["v"], inputs["causal"]) == HOPPER_PATH:
        return HOPPER_PATH
    cfg = chosen_config(inputs["q"], inputs["k"], inputs["causal"])
    if cfg is None:
        return None
    kw = cfg.kwargs
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']} w{cfg.num_warps} s{cfg.num_stages}"
            + (" ws" if kw.get("WARP_SPEC") else "") + (" tma" if _tma(inputs) else ""))


def _tma(inputs) -> bool:
    from kernels.flash_attention import _use_tma
    return _use_tma(inputs["q"], inputs["k"], inputs["v"], inputs["q"])


def _ours(inputs):
    q, k, v, causal = inputs["q"], inputs["k"], inputs["v"], inputs["causal"]
    return lambda: attention(q, k, v, causal=causal)


def _ours_triton(inputs):
    """Our Triton kernel wherever `ours` would take the Gluon Hopper kernel (the same call elsewhere)."""
    q, k, v, causal = inputs["q"], inputs["k"], inputs["v"], inputs["causal"]
    return lambda: attention_triton(q, k, v, causal=causal)


def _seed(inputs):
    from kernels.seeds.attention import seed_attention
    q, k, v, shape = inputs["q"], inputs["k"], inputs["v"], inputs["shape"]
    if not inputs["causal"]:
        raise Unsupported("seed 003's kernel is causal only")
    if shape["heads_kv"] != shape["heads_q"]:
        raise Unsupported("seed 003's kernel has one key/value head per query head (no GQA)")
    if shape["seqlen_q"] != shape["seqlen_k"]:
        raise Unsupported("seed 003's kernel handles square attention only (Nq == Nk)")
    if shape["head_dim"] & (shape["head_dim"] - 1):
        raise Unsupported(f"seed 003's kernel needs a power-of-two head dim, got {shape['head_dim']}")
    return lambda: seed_attention(q, k, v, causal=True)


def _expand_kv(inputs):
    group = inputs["shape"]["heads_q"] // inputs["shape"]["heads_kv"]
    return (inputs["k"].repeat_interleave(group, dim=1).contiguous(),
            inputs["v"].repeat_interleave(group, dim=1).contiguous())


def _first_run(fn, backend_name: str):
    """Run fn once; a peer's refusal (RuntimeError and its warnings) becomes Unsupported."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
        except RuntimeError as exc:
            if is_oom(exc) or is_fault(exc):       # not a refusal: the device's own error
                raise
            reasons = "; ".join(str(w.message) for w in caught) or str(exc)
            raise Unsupported(f"{backend_name}: {reasons}"[:300]) from exc
    return fn


def _sdpa(backend_name: str):
    def factory(inputs):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q, k, v, shape = inputs["q"], inputs["k"], inputs["v"], inputs["shape"]
        causal, gqa = inputs["causal"], shape["heads_kv"] != shape["heads_q"]
        backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
                   "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION}[backend_name]
        if causal and shape["seqlen_q"] != shape["seqlen_k"]:
            return _sdpa_bottom_right(backend_name, q, k, v, inputs)

        def call(kk, vv, enable_gqa):
            def fn():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal, enable_gqa=enable_gqa)
            return fn

        if not gqa:
            return _first_run(call(k, v, False), backend_name)
        try:
            return _first_run(call(k, v, True), backend_name)
        except Unsupported:
            # this backend takes no grouped K/V: expand them here, outside the timed callable
            kk, vv = _expand_kv(inputs)
            return _first_run(call(kk, vv, False), backend_name + " (K/V expanded to Hq heads)")
    return factory


def _sdpa_bottom_right(backend_name, q, k, v, inputs):
    """Causal Nq != Nk with SDPA's own bottom-right mask, torch.nn.attention.bias.causal_lower_right,
    which each backend handles natively or refuses. A backend for which SDPA falls back to a dense
    (Nq, Nk) mask (cuDNN in torch 2.11: 2x slower than its causal kernel at Nq=1024, Nk=8192 on an
    H200) runs another kernel, so its row is `unsupported` with that reason. Backends that take no
    grouped K/V get them expanded here, outside the timed callable."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right

    backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
               "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION}[backend_name]
    bias = causal_lower_right(q.shape[2], k.shape[2])
    if k.shape[1] != q.shape[1]:
        k, v = _expand_kv(inputs)

    def fn():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    with _dense_masks() as built:
        _first_run(fn, backend_name + " (causal_lower_right)")
    if built:
        raise Unsupported(f"{backend_name}: SDPA has no bottom-right causal path for this backend "
                          f"(causal_lower_right built a dense {q.shape[2]}x{k.shape[2]} mask for it)")
    return fn


@contextlib.contextmanager
def _dense_masks():
    """Counts the dense masks torch.nn.attention.bias.CausalBias builds (its fallback when the
    backend has no bottom-right causal path of its own) while the block runs."""
    from torch.nn.attention.bias import CausalBias

    built = []
    materialize = CausalBias._materialize

    def counted(bias, *args, **kwargs):
        built.append(bias)
        return materialize(bias, *args, **kwargs)

    CausalBias._materialize = counted
    try:
        yield built
    finally:
        CausalBias._materialize = materialize


def _eager(inputs):
    """Materialised attention in the input dtype, as seed 003's baseline: scores, mask, softmax, @ v."""
    q, k, v, shape = inputs["q"], inputs["k"], inputs["v"], inputs["shape"]
    b, hq, hkv, nq, nk, d = (shape[c] for c in SHAPE_KEYS[:6])
    scale = 1.0 / math.sqrt(d)
    qg = q.view(b, hkv, hq // hkv, nq, d)            # (B, Hkv, G, Nq, D): K/V broadcast over G
    kt = k.unsqueeze(2).transpose(-1, -2)           # (B, Hkv, 1, D, Nk)
    vg = v.unsqueeze(2)                             # (B, Hkv, 1, Nk, D)
    hidden = None
    if inputs["causal"]:
        rows = torch.arange(nq, device=q.device)[:, None]
        hidden = torch.arange(nk, device=q.device)[None, :] > rows + (nk - nq)

    def fn():
        scores = (qg @ kt) * scale                   # (B, Hkv, G, Nq, Nk)
        if hidden is not None:
            scores.masked_fill_(hidden, float("-inf"))
        return (torch.softmax(scores, dim=-1) @ vg).view(b, hq, nq, d)
    return fn


def impls() -> dict:
    return {"ours": _ours, "ours_triton": _ours_triton, "seed_attention": _seed, "sdpa_flash": _sdpa("sdpa_flash"),
            "sdpa_cudnn": _sdpa("sdpa_cudnn"), "sdpa_efficient": _sdpa("sdpa_efficient"), "eager": _eager}
