"""Softmax figures: bandwidth against row length at a fixed size, speedup around 1x, the forced strategies."""
from __future__ import annotations

import numpy as np
import pandas as pd

from rooflab.report.analysis import LAUNCH_BOUND_BYTES, is_bound, is_ours
from rooflab.report.figures.inputs import FigureData
from rooflab.report.figures.style import (DTYPE_SHORT, EXTRA_COLORS, bytes_axis, ceiling_lines, impl_lines,
                                          legend_below, mark_failed, ok, panels, pow2_axis, shade_launch_bound,
                                          tally, tie_band, top)

SIZE_PANELS = 3          # byte sizes drawn, each a panel: those with the most row lengths measured


def _sizes(frame: pd.DataFrame) -> list[int]:
    """The byte sizes (log2, rounded) with the most row lengths of ours (three or more where the grid has
    them), largest first."""
    mine = ok(frame[frame["impl"] == "ours"])
    if mine.empty:
        return []
    level = np.round(np.log2(mine["bytes"].astype(float)))
    lengths = mine.assign(level=level).groupby("level")["cols"].nunique()
    lengths = lengths[lengths >= min(3, lengths.max())].sort_index(ascending=False)
    return sorted(lengths.sort_values(ascending=False, kind="stable").index[:SIZE_PANELS], reverse=True)


def _fixed_size_panels(fig, data: FigureData, frame: pd.DataFrame, what: str, title: str):
    """Bandwidth against row length, one panel per fixed size (`_sizes`), fp16 where measured, one line
    per implementation of `frame` and the copy ceiling; a reason string when there is nothing to draw."""
    if ok(frame).empty:
        return f"no correct rows of {what}"
    dtype = "float16" if "float16" in set(frame["dtype"]) else sorted(set(frame["dtype"]))[0]
    frame = frame[frame["dtype"] == dtype]
    sizes = _sizes(frame)
    if not sizes:
        return f"no correct softmax row of ours in {DTYPE_SHORT.get(dtype, dtype)}"
    frame = frame.assign(level=np.round(np.log2(frame["bytes"].astype(float))))
    _, copy = data.ceiling_of(frame)
    axes = panels(fig, len(sizes), sharey=True, width=4.4, height=3.4)
    for ax, size in zip(axes, sizes):
        part = frame[frame["level"] == size]
        impl_lines(ax, part, "cols", "tbps")
        mark_failed(ax, part, "cols", set())
        ceiling_lines(ax, copy, None, "copy")
        pow2_axis(ax, sorted(set(part["cols"])))
        ax.set_ylim(0, top(ok(frame[frame["level"].isin(sizes)])["tbps"], copy))
        ax.set_title(f"about {2 ** size / 1e6:.3g} MB read + written per call", fontsize=9)
        ax.set_xlabel("row length (columns); rows = size / row length")
        ax.set_ylabel("TB/s (bars: 95% CI of the median)")
    fig.suptitle(f"{title}, {DTYPE_SHORT.get(dtype, dtype)}, {data.label}", fontsize=10)
    legend_below(fig, axes, ncol=4)
    return None


def bandwidth(fig, data: FigureData):
    frame = data.cases("softmax")
    return _fixed_size_panels(fig, data, frame[~frame["impl"].str.startswith("ours_")], "softmax",
                              "softmax bandwidth at a fixed size")


def _clipped(ax, table: pd.DataFrame, low: float, high: float, **style) -> None:
    """Speedups inside [low, high] as points with interval bars; those outside as arrows on the edge."""
    inside = table[(table["vs_best"] >= low) & (table["vs_best"] <= high)]
    ax.scatter(inside["bytes"], inside["vs_best"], zorder=3, **style)
    ax.errorbar(inside["bytes"], inside["vs_best"], yerr=[(inside["vs_best"] - inside["vs_best_low"]).clip(lower=0),
                                                           (inside["vs_best_high"] - inside["vs_best"]).clip(lower=0)],
                fmt="none", ecolor=style.get("color", style.get("edgecolors")), lw=0.7, capsize=1.5, zorder=2)
    for edge, marker, part in ((high, "^", table[table["vs_best"] > high]), (low, "v", table[table["vs_best"] < low])):
        ax.scatter(part["bytes"], [edge] * len(part), marker=marker, s=30, color=style.get("color", "black"),
                   clip_on=False, zorder=4)


def speedup(fig, data: FigureData):
    groups = [("fastest peer", data.compared("softmax", "peer")), ("fastest seed design", data.compared("softmax", "seed"))]
    groups = [(name, t.dropna(subset=["vs_best"])) for name, t in groups if t["vs_best"].notna().any()]
    if not groups or groups[0][0] != "fastest peer":
        return "no softmax shape with a correct row of ours and of a peer"
    axes = panels(fig, len(groups), width=5.0, height=3.8)
    markers = {"float32": "o", "float16": "s", "bfloat16": "D"}
    for ax, (name, table) in zip(axes, groups):
        low = max(min(0.5, table["vs_best"].quantile(0.02) / 1.1), 1 / 16)      # tight around 1x: the
        high = min(max(2.0, table["vs_best"].quantile(0.98) * 1.1), 16)         # outermost 2% as arrows
        for k, dtype in enumerate(d for d in DTYPE_SHORT if d in set(table["dtype"])):
            part = table[table["dtype"] == dtype]
            _clipped(ax, part, low, high, marker=markers[dtype], s=18, color=EXTRA_COLORS[k],
                     label=f"{DTYPE_SHORT[dtype]} ({tally(part)})")
        tie_band(ax)
        ax.set_yscale("log")
        ax.set_ylim(low, high)
        ticks = [t for t in (1 / 8, 1 / 4, 1 / 2, 2 / 3, 1, 1.5, 2, 4, 8, 16) if low <= t <= high]
        ax.set_yticks(ticks, [f"{t:.2g}x" for t in ticks])
        ax.minorticks_off()
        bytes_axis(ax)
        shade_launch_bound(ax, LAUNCH_BOUND_BYTES)
        ax.set_xlabel("bytes moved (read + write)")
        ax.set_ylabel("their time / our time")
        ax.set_title(f"ours against the {name}", fontsize=9)
        ax.legend(fontsize=7, loc="upper left", frameon=False)
    fig.suptitle(f"softmax speedup, each shape in the timing that judges it, {data.label}", fontsize=10)
    return None


def strategies(fig, data: FigureData):
    frame = data.cases("softmax")
    frame = frame[frame["impl"].map(lambda i: is_ours(i) or is_bound(i)).astype(bool)]
    if ok(frame[frame["impl"].str.startswith("ours_")]).empty:
        return "no correct rows of the forced softmax strategies (impl ours_<strategy>)"
    return _fixed_size_panels(fig, data, frame, "the forced softmax strategies",
                              "softmax strategies forced one at a time, at a fixed size")
