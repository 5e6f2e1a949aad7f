"""A fresh run against a committed one: which timings reproduce, which moved, which are new or gone.

Rows are matched on (study, impl, dtype, timing, the study's shape columns); only `ok` rows
count on either side. A pair reproduces when the two 95% intervals of the median overlap or
the medians differ by at most `tolerance`. Kernel time (KERNEL_TIMINGS: `cupti` device time in the
sweeps, `cudagraph` replay of the e2e decode step, which has no host launches in it) is compared
where both runs have it, beside the `events` rows (each timing its own line); a kernel-time row on
one side only is left out, since the case's `events` row already says whether it is new or missing.
The e2e study compares its block totals (part == "total") only. `host` rows (a call's host time,
which measures the host's CPU, not the GPU) are left out.

`kernel_time` marks the line that speaks for the kernel: the kernel-time line where the case has
one, else its `events` line. `summary` judges reproduction on those lines; the plain-call lines of
cases that also have kernel time (host time included, which moves with the host) are counted
apart, as `calls_*`. Pure pandas/numpy/matplotlib.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rooflab.schema import HOST_TIMING, SHAPE_COLUMNS

KERNEL_TIMINGS = ("cupti", "cudagraph")   # timings without host time in them
VERDICTS = ("reproduced", "faster", "slower", "new", "missing")
KEYS = ("study", "impl", "dtype", "timing")
# Every shape column of every study, each once, in schema order.
ALL_SHAPE_COLUMNS = tuple(dict.fromkeys(c for cols in SHAPE_COLUMNS.values() for c in cols))
MEASURES = ("committed_ms", "fresh_ms", "ratio", "committed_low", "committed_high", "fresh_low", "fresh_high")
COLUMNS = KEYS + ("shape",) + ALL_SHAPE_COLUMNS + MEASURES + ("verdict", "kernel_time")
SUMMARY_COLUMNS = ("study", "compared", "compared_at_least_min", "reproduced_at_least_min", "share_reproduced",
                   "faster", "slower", "new", "missing", "calls_at_least_min", "calls_share_reproduced")
BOOL_SHAPES = ("causal", "ragged")
_SHORT = {"batch": "B", "heads_q": "Hq", "heads_kv": "Hkv", "seqlen_q": "Nq", "seqlen_k": "Nk", "head_dim": "D",
          "cache_len": "L", "seqlen": "S", "width": "W", "heads": "H"}


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def shape_value(column: str, value):
    """A shape cell as a plain Python value: int for sizes, bool for causal/ragged, str for the rest."""
    if _missing(value):
        return None
    if hasattr(value, "item"):
        value = value.item()
    if column in BOOL_SHAPES:
        if isinstance(value, str):
            return value.strip().lower() in ("true", "1", "yes")
        return bool(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    return value


def shape_dict(row, study: str) -> dict:
    """The study's shape columns of one row, as plain Python values."""
    return {c: shape_value(c, row.get(c) if hasattr(row, "get") else row[c]) for c in SHAPE_COLUMNS[study]}


def shape_label(shape: dict, study: str) -> str:
    """'8192x4096' (softmax), 'B=4 Hq=32 Hkv=8 Nq=1024 Nk=8192 D=128 causal', 'prefill S=2048 L=0 W=4096 H=32 total'."""
    if study == "softmax":
        return f"{shape.get('rows')}x{shape.get('cols')}"
    parts = []
    for column, value in shape.items():
        if value is None:
            continue
        if column == "causal":
            parts.append("causal" if value else "non-causal")
        elif column == "ragged":
            parts.append("ragged" if value else "")
        elif column in _SHORT:
            parts.append(f"{_SHORT[column]}={value}")
        else:
            parts.append(str(value))
    return " ".join(p for p in parts if p)


def number(value) -> float:
    """float(value), NaN for what is not a number (None, empty, text)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return number


def _keyed(frame: pd.DataFrame) -> dict:
    """key -> row (a dict) over the ok, timed rows of a frame; the last row wins on a repeated key."""
    out: dict = {}
    if frame is None or frame.empty:
        return out
    ok = frame[(frame["status"] == "ok") & pd.to_numeric(frame["median_ms"], errors="coerce").notna()]
    for row in ok.to_dict(orient="records"):
        study = row["study"]
        if study not in SHAPE_COLUMNS:
            continue
        if study == "e2e" and row.get("part") != "total":
            continue
        shape = shape_dict(row, study)
        key = (study, row["impl"], row["dtype"], row["timing"], tuple(shape.items()))
        out[key] = {**row, "_shape": shape}
    return out


def overlap(low_a, high_a, low_b, high_b) -> bool:
    """Two intervals share a point; False when either is incomplete."""
    values = [number(v) for v in (low_a, high_a, low_b, high_b)]
    if any(math.isnan(v) for v in values):
        return False
    return values[0] <= values[3] and values[2] <= values[1]


def verdict(committed_ms, fresh_ms, committed_low, committed_high, fresh_low, fresh_high,
            tolerance: float = 0.05) -> str:
    """reproduced / faster / slower for one pair of medians and their intervals."""
    ratio = fresh_ms / committed_ms
    if overlap(committed_low, committed_high, fresh_low, fresh_high) or abs(ratio - 1.0) <= tolerance:
        return "reproduced"
    return "faster" if fresh_ms < committed_ms else "slower"


def compare(committed: pd.DataFrame, fresh: pd.DataFrame, tolerance: float = 0.05) -> pd.DataFrame:
    """One line per matched or unmatched case-timing; columns COLUMNS (see the module docstring)."""
    old, new = _keyed(committed), _keyed(fresh)
    kernel_cases = ({k[:3] + k[4:] for k in old if k[3] in KERNEL_TIMINGS}
                    & {k[:3] + k[4:] for k in new if k[3] in KERNEL_TIMINGS})
    lines = []
    for key in list(old) + [k for k in new if k not in old]:
        a, b = old.get(key), new.get(key)
        study, impl, dtype, timing, _ = key
        if timing == HOST_TIMING:
            continue
        if timing in KERNEL_TIMINGS and key[:3] + key[4:] not in kernel_cases:
            continue  # kernel time on one side only: the events line speaks for the case
        row = a if a is not None else b
        line = {"study": study, "impl": impl, "dtype": dtype, "timing": timing,
                "shape": shape_label(row["_shape"], study), **{c: None for c in ALL_SHAPE_COLUMNS},
                **row["_shape"]}
        c_ms = number(a["median_ms"]) if a is not None else float("nan")
        f_ms = number(b["median_ms"]) if b is not None else float("nan")
        line.update(committed_ms=c_ms, fresh_ms=f_ms,
                    ratio=f_ms / c_ms if a is not None and b is not None and c_ms > 0 else float("nan"),
                    committed_low=number(a["ci_low_ms"]) if a is not None else float("nan"),
                    committed_high=number(a["ci_high_ms"]) if a is not None else float("nan"),
                    fresh_low=number(b["ci_low_ms"]) if b is not None else float("nan"),
                    fresh_high=number(b["ci_high_ms"]) if b is not None else float("nan"))
        line["kernel_time"] = timing in KERNEL_TIMINGS or key[:3] + key[4:] not in kernel_cases
        if a is None:
            line["verdict"] = "new"
        elif b is None:
            line["verdict"] = "missing"
        else:
            line["verdict"] = verdict(c_ms, f_ms, line["committed_low"], line["committed_high"],
                                      line["fresh_low"], line["fresh_high"], tolerance)
        lines.append(line)
    return pd.DataFrame(lines, columns=list(COLUMNS))


def run_identity(env: dict) -> dict:
    """What names a run in a reproduction record: its commit, GPU (UUID), time, profile and measuring
    code (rooflab.measuring_code), from the run's env.json (absent fields are None)."""
    config = env.get("config") if isinstance(env.get("config"), dict) else {}
    return {"git_commit": env.get("git_commit"), "gpu": env.get("gpu"), "gpu_uuid": env.get("gpu_uuid"),
            "time": env.get("time"), "profile": config.get("profile"), "measuring_code": env.get("measuring_code")}


def provenance(committed_env: dict, fresh_env: dict, tolerance: float, min_ms: float, code_id=None) -> dict:
    """The sidecar of reproduction.csv: which two runs it compares and by which rule. A run whose
    env.json has no `measuring_code` gets `code_id(its commit)` (rooflab.measuring_code.from_commit),
    when given; otherwise it stays unknown."""
    committed, fresh = run_identity(committed_env), run_identity(fresh_env)
    for run in (committed, fresh):
        if not run["measuring_code"] and code_id:
            run["measuring_code"] = code_id(run["git_commit"])
    return {"committed": committed, "fresh": fresh, "tolerance": tolerance, "min_ms": min_ms,
            "same_gpu": bool(committed["gpu_uuid"]) and committed["gpu_uuid"] == fresh["gpu_uuid"],
            "same_commit": bool(committed["git_commit"]) and committed["git_commit"] == fresh["git_commit"],
            "same_measuring_code": (committed["measuring_code"] == fresh["measuring_code"]
                                    if committed["measuring_code"] and fresh["measuring_code"] else None)}


def summary(frame: pd.DataFrame, min_ms: float = 0.020) -> pd.DataFrame:
    """Per study, on kernel-time lines: how many pairs were compared, how many of those at least `min_ms`
    (committed) reproduced and their share; faster / slower count every compared pair, new / missing every
    unmatched line. `calls_*`: the same share over the plain-call lines of cases that have kernel time."""
    rows = []
    for study in sorted(set(frame["study"])) if not frame.empty else []:
        part = frame[frame["study"] == study]
        kernel = part["kernel_time"].astype(bool)
        both = part[kernel & part["verdict"].isin(("reproduced", "faster", "slower"))]
        large = both[pd.to_numeric(both["committed_ms"], errors="coerce") >= min_ms]
        reproduced = int((large["verdict"] == "reproduced").sum())
        calls = part[~kernel & part["verdict"].isin(("reproduced", "faster", "slower"))]
        calls = calls[pd.to_numeric(calls["committed_ms"], errors="coerce") >= min_ms]
        rows.append({"study": study, "compared": len(both), "compared_at_least_min": len(large),
                     "reproduced_at_least_min": reproduced,
                     "share_reproduced": reproduced / len(large) if len(large) else float("nan"),
                     **{v: int((part[kernel]["verdict"] == v).sum()) for v in ("faster", "slower", "new", "missing")},
                     "calls_at_least_min": len(calls),
                     "calls_share_reproduced": float((calls["verdict"] == "reproduced").mean()) if len(calls)
                     else float("nan")})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


MARKERS = {"softmax": "o", "attention": "s", "decode": "^", "e2e": "D"}


def draw(frame: pd.DataFrame, ax, tolerance: float = 0.05) -> None:
    """Fresh against committed kernel time (median), log-log, one marker per study, y = x and a +-tolerance band."""
    both = frame[frame["kernel_time"].astype(bool) & frame["verdict"].isin(("reproduced", "faster", "slower"))] \
        if not frame.empty else frame
    both = both[(pd.to_numeric(both["committed_ms"], errors="coerce") > 0)
                & (pd.to_numeric(both["fresh_ms"], errors="coerce") > 0)] if not both.empty else both
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("committed run, median time (ms)")
    ax.set_ylabel("fresh run, median time (ms)")
    if both.empty:
        ax.text(0.5, 0.5, "no case measured in both runs", transform=ax.transAxes, ha="center", va="center")
        return
    values = np.concatenate([both["committed_ms"].to_numpy(float), both["fresh_ms"].to_numpy(float)])
    lo, hi = values.min() / 1.5, values.max() * 1.5
    line = np.geomspace(lo, hi, 100)
    ax.fill_between(line, line * (1 - tolerance), line * (1 + tolerance), color="0.85",
                    label=f"\u00b1{tolerance:.0%}", zorder=0)
    ax.plot(line, line, color="0.3", linewidth=0.8, label="y = x", zorder=1)
    for study, part in both.groupby("study", sort=True):
        ax.scatter(part["committed_ms"], part["fresh_ms"], marker=MARKERS.get(study, "x"), s=14,
                   label=study, zorder=2, alpha=0.8)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.legend(loc="upper left", fontsize="small")
