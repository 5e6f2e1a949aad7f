"""Numbers as the paper prints them (plain text; the dialects escape it)."""
from __future__ import annotations

import math

import pandas as pd

DASH = "–"
DTYPE_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
# Display labels of implementation names (the names themselves stay as config, studies and CSVs spell them):
# our softmax strategies forced one at a time read as what each program does.
IMPL_LABELS = {
    "ours_rows": "ours, rows: several rows a program", "ours_row": "ours, row: one row a program",
    "ours_looped": "ours, looped: one row a program in tiles", "ours_split": "ours, split: row segments",
    "ours_nosplit": "ours without split-KV", "ours_triton": "ours, Triton kernel only",
    "torch_compile": "torch.compile", "sdpa_flash": "FlashAttention-2",
    "sdpa_cudnn": "cuDNN", "sdpa_efficient": "memory-efficient SDPA", "eager": "eager PyTorch",
    "seed_rowwise": "seed design: fused row-wise", "seed_multipass": "seed design: multi-pass",
    "seed_attention": "seed design: fused attention", "ours_softmax": "eager + our softmax",
    "ours_attention": "our attention", "sdpa": "SDPA", "copy": "copy of the same bytes (bound)",
}


def label(impl: str) -> str:
    """An implementation's display label (its name where it has none)."""
    return IMPL_LABELS.get(impl, impl)


def missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def num(value, sig: int = 3) -> str:
    if missing(value):
        return DASH
    value = float(value)
    if value != 0 and abs(value) >= 10 ** sig:
        return f"{value:.0f}"
    return f"{value:.{sig}g}"


def ratio(value) -> str:
    return DASH if missing(value) else f"{float(value):.2f}x"


def pct(value) -> str:
    if missing(value):
        return DASH
    p = float(value) * 100
    return f"{p:.0f}%" if abs(p) >= 10 else f"{p:.1f}%"


def sci(value) -> str:
    return DASH if missing(value) else f"{float(value):.2g}"


def megabytes(value) -> str:
    return DASH if missing(value) else f"{num(float(value) / 1e6)} MB"


def dt(dtype: str) -> str:
    return DTYPE_SHORT.get(dtype, dtype)


def span(low: str, high: str) -> str:
    """'0.52x' when both ends print the same, else '0.52x–0.61x'."""
    return low if low == high else f"{low}–{high}"


def listing(words) -> str:
    """'a', 'a and b', 'a, b and c'."""
    words = [str(w) for w in words]
    return " and ".join(words) if len(words) < 3 else ", ".join(words[:-1]) + " and " + words[-1]
