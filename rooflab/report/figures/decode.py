"""Decode figures: bandwidth against cached tokens per batch with the read ceiling, and what the split buys."""
from __future__ import annotations

import pandas as pd

from rooflab.report.figures.inputs import FigureData
from rooflab.report.figures.style import (DTYPE_SHORT, EXTRA_COLORS, ceiling_lines, impl_lines, legend_below,
                                          mark_failed, ok, plain_log, pow2_axis, tie_band, top)


def _first_dtype(frame: pd.DataFrame) -> str:
    return "float16" if "float16" in set(frame["dtype"]) else sorted(set(frame["dtype"]))[0]


def _main(frame: pd.DataFrame) -> pd.DataFrame:
    """Non-ragged rows of the first dtype (fp16 when present) and the most common Hq and D."""
    frame = frame[frame["ragged"] == False]  # noqa: E712  (object column of bools)
    if frame.empty:
        return frame
    frame = frame[frame["dtype"] == _first_dtype(frame)]
    heads = frame.groupby(["heads_q", "head_dim"]).size().idxmax()
    return frame[(frame["heads_q"] == heads[0]) & (frame["head_dim"] == heads[1])]


def bandwidth(fig, data: FigureData):
    frame = _main(data.cases("decode"))
    if ok(frame).empty:
        return "no correct decode rows (non-ragged)"
    batches = sorted(set(frame["batch"]))
    kv_heads = sorted(set(frame["heads_kv"]), reverse=True)      # MHA (Hkv = Hq) first, then GQA
    _, read = data.ceiling_of(frame)
    highest = top(ok(frame)["tbps"], read)
    axes = fig.subplots(len(kv_heads), len(batches), squeeze=False, sharey=True, sharex=True)
    fig.set_size_inches(3.3 * len(batches), 2.8 * len(kv_heads) + 1.0)
    for r, hkv in enumerate(kv_heads):
        for c, b in enumerate(batches):
            ax = axes[r, c]
            part = frame[(frame["batch"] == b) & (frame["heads_kv"] == hkv)]
            impl_lines(ax, part, "cache_len", "tbps")
            mark_failed(ax, part, "cache_len", set())
            ceiling_lines(ax, read, None, "read")
            pow2_axis(ax, sorted(set(frame["cache_len"])))
            ax.set_ylim(0, highest)
            ax.set_title(f"B={b}, Hkv={hkv}", fontsize=9)
            if r == len(kv_heads) - 1:
                ax.set_xlabel("cached tokens L")
            if c == 0:
                ax.set_ylabel("TB/s (K and V read)")
    first = frame.iloc[0]
    fig.suptitle(f"decode, Hq={first['heads_q']} D={first['head_dim']}, {DTYPE_SHORT.get(first['dtype'], first['dtype'])}, "
                 f"{data.label}", fontsize=10)
    legend_below(fig, list(axes.flat), ncol=6)
    return None


def split(fig, data: FigureData):
    split = _main(data.compared("decode", "ours_nosplit").dropna(subset=["vs_best"]))
    if split.empty:
        return "no decode shape with correct rows of both ours and ours_nosplit"
    ax = fig.subplots()
    fig.set_size_inches(7, 4.2)
    kv_heads = sorted(set(split["heads_kv"]), reverse=True)
    styles = ["-", "--", ":", "-."]
    for i, (b, rows) in enumerate(split.groupby("batch")):
        for k, hkv in enumerate(kv_heads):
            part = rows[rows["heads_kv"] == hkv].sort_values("cache_len")
            if part.empty:
                continue
            ax.errorbar(part["cache_len"], part["vs_best"], yerr=[(part["vs_best"] - part["vs_best_low"]).clip(lower=0),
                                                                  (part["vs_best_high"] - part["vs_best"]).clip(lower=0)],
                        marker="o", ms=4, color=EXTRA_COLORS[i % 6], ls=styles[k % 4], capsize=1.5, lw=1,
                        label=f"B={b}, Hkv={hkv}")
    tie_band(ax)
    pow2_axis(ax, sorted(set(split["cache_len"])))
    plain_log(ax, "y")
    ax.set_xlabel("cached tokens L")
    ax.set_ylabel("time without split / time with split")
    first = split.iloc[0]
    ax.set_title(f"split-KV decode, Hq={first['heads_q']} D={first['head_dim']}, "
                 f"{DTYPE_SHORT.get(first['dtype'], first['dtype'])}, {data.label}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return None
