"""Selections shared by the figures and the paper, so both show the same numbers.

Speedups are ratios of median times of rows measured in the same run on the same GPU,
shape and dtype, each case in the timing that judges it (`judged`); an `incorrect` row never
yields a speedup. The comparisons themselves are derived once (rooflab.report.derive). Each speedup carries an interval from the 95% confidence intervals of
both medians and an outcome for ours: a `tie` when the two intervals overlap or the
medians are within TIE_WITHIN of each other, else a `win` (ours faster) or a `loss`. The best peer of a case is its fastest correct implementation that is
neither ours nor a seed's design (torch, torch.compile, Liger, the SDPA backends, eager);
the seeds' designs (seed_*) are compared with separately, never mixed into the best peer.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rooflab.schema import BOUND_IMPLS, SHAPE_COLUMNS

# Timings (rooflab.schema.TIMINGS): a kernel study judges a case on its kernel alone where the harness
# measured that (CUPTI device time of the same L2-flushed calls), else on plain calls timed with CUDA
# events; only the end-to-end study replays whole steps as CUDA graphs.
PLAIN_TIMING = "events"
KERNEL_TIMING = "cupti"
E2E_GRAPH_TIMING = "cudagraph"
METRIC = {"softmax": "tbps", "attention": "tflops", "decode": "tbps", "e2e": None}
UNIT = {"tbps": "TB/s", "tflops": "TFLOP/s", "median_ms": "ms"}
WIN, TIE, LOSS = "win", "tie", "loss"
OUTCOMES = (WIN, TIE, LOSS)
TIE_WITHIN = 0.02        # medians this close are a tie even where the intervals do not overlap
BASELINE = {"softmax": "torch"}          # the everyday call each study is also compared with
SHORT = {"rows": "rows", "cols": "cols", "batch": "B", "heads_q": "Hq", "heads_kv": "Hkv", "seqlen_q": "Nq",
         "seqlen_k": "Nk", "head_dim": "D", "cache_len": "L", "phase": "", "seqlen": "S", "width": "width",
         "heads": "H", "part": ""}


def is_ours(impl: str) -> bool:
    return impl == "ours" or impl.startswith("ours_")


def is_seed(impl: str) -> bool:
    """A design transcribed from one of the seed articles (seed_rowwise, seed_attention, ...)."""
    return impl.startswith("seed_")


def is_bound(impl: str) -> bool:
    """A bound timed beside the implementations (rooflab.schema.BOUND_IMPLS: softmax's `copy` of the same
    bytes), never a peer."""
    return impl in BOUND_IMPLS


def is_peer(impl: str) -> bool:
    """An implementation of the field that ours is judged against: neither ours, a seed's design nor a bound."""
    return not is_ours(impl) and not is_seed(impl) and not is_bound(impl)


def shape_label(row, study: str) -> str:
    """'rows=8192 cols=4096', 'B=4 Hq=32 Hkv=32 Nq=4096 Nk=4096 D=128 causal', ..."""
    parts = []
    for col in SHAPE_COLUMNS[study]:
        value = row[col]
        if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
            continue
        if col in ("causal", "ragged"):
            parts.append(col if bool(value) else ("non-causal" if col == "causal" else ""))
        elif SHORT[col]:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            parts.append(f"{SHORT[col]}={value}")
        else:
            parts.append(str(value))
    return " ".join(p for p in parts if p)


# The GPU the paper is about when config/config.yaml's `report: lead_gpu` is `auto` and this
# machine measured nothing: the one whose committed results the paper was written from.
DEFAULT_LEAD = "nvidia-h200"


def primary_gpu(results: pd.DataFrame, fresh_slug: str | None = None, lead: str | None = "auto",
                gpus=None) -> str | None:
    """The GPU the per-study figures and the paper lead with, never decided by how many rows a folder has:
    `lead` (config `report: lead_gpu`) when it names a GPU read (one with rows, or one of `gpus`, the
    folders read); with `auto` (or a GPU not read) the GPU measured on this machine (`fresh_slug`), else
    DEFAULT_LEAD, else the alphabetically first, each among the GPUs with rows (among `gpus` when none has)."""
    measured = sorted(set(results["gpu"].dropna())) if not results.empty else []
    folders = sorted(set(gpus or ()) | set(measured))
    if lead and lead != "auto" and lead in folders:
        return lead
    present = measured or folders
    if not present:
        return None
    for choice in (fresh_slug, DEFAULT_LEAD):
        if choice and choice in present:
            return choice
    return present[0]


# Bytes below which a softmax call is launch-bound: the softmax summary and figures split their
# shapes there (plain calls against kernel time below it; the peers' contest above it).
LAUNCH_BOUND_BYTES = 8e6
HOST_BOUND = 1.5          # a plain call this many times its kernel time (CUPTI) times the host, not the kernel


def judged(frame: pd.DataFrame, study: str) -> pd.DataFrame:
    """Each case's rows in the timing that measures its kernel: the kernel's device time from CUPTI
    (KERNEL_TIMING) where the case has such rows (the harness records them for small or short cases,
    where a plain call measures the host as much as the kernel), else CUDA events (PLAIN_TIMING).
    Pass the result to comparisons(..., timing=None)."""
    keys = ["gpu", "dtype", *SHAPE_COLUMNS[study]]
    if frame.empty:
        return frame
    key = frame[keys].astype(str).agg("|".join, axis=1)
    kernel = key.isin(set(key[frame["timing"] == KERNEL_TIMING]))
    return frame[(kernel & (frame["timing"] == KERNEL_TIMING)) | (~kernel & (frame["timing"] == PLAIN_TIMING))]


def interval(row) -> tuple[float, float]:
    """A row's 95% confidence interval of its median time (ci_low_ms, ci_high_ms); the median itself
    where the row has none (a published or older row)."""
    median = float(row["median_ms"])
    low, high = row.get("ci_low_ms"), row.get("ci_high_ms")
    return (float(low) if pd.notna(low) else median, float(high) if pd.notna(high) else median)


def outcome(ratio: float, low: float, high: float, tie_within: float = TIE_WITHIN) -> str:
    """win / tie / loss for ours from other time / our time and that ratio's interval: a tie when the
    interval holds 1 (the two rows' intervals overlap) or the ratio is within `tie_within` of 1."""
    if low <= 1 <= high or abs(ratio - 1) <= tie_within:
        return TIE
    return WIN if ratio > 1 else LOSS


def versus(mine, other) -> tuple[float, float, float, str]:
    """(other / ours, low, high, outcome): the ratio of the two median times, its interval from both
    rows' confidence intervals (other's low end over our high end, other's high end over our low end)
    and the outcome for ours."""
    ratio = float(other["median_ms"]) / float(mine["median_ms"])
    (m_low, m_high), (o_low, o_high) = interval(mine), interval(other)
    low, high = o_low / m_high, o_high / m_low
    return ratio, low, high, outcome(ratio, low, high)


def counts(outcomes) -> dict[str, int]:
    """{'win': n, 'tie': n, 'loss': n} over a column of outcomes (missing ones skipped)."""
    values = [o for o in outcomes if isinstance(o, str)]
    return {o: values.count(o) for o in OUTCOMES}


def geomean(values) -> float | None:
    values = [float(v) for v in values if v is not None and pd.notna(v) and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


BOOTSTRAP_DRAWS = 2000
RESAMPLING_KEY = 20240601   # fixed, so the same data give the same interval (and the same paper) every time


def bootstrap_geomean(values, level: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """(geometric mean, low, high): the interval from resampling the shapes with replacement."""
    logs = np.log([float(v) for v in values if v is not None and pd.notna(v) and v > 0])
    if not len(logs):
        return None, None, None
    draws = np.random.default_rng(RESAMPLING_KEY).choice(logs, size=(BOOTSTRAP_DRAWS, len(logs))).mean(axis=1)
    tail = (1 - level) / 2 * 100
    return float(np.exp(logs.mean())), float(np.exp(np.percentile(draws, tail))), \
        float(np.exp(np.percentile(draws, 100 - tail)))


