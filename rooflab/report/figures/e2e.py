"""End-to-end figure: one decoder block's time stacked by part per configuration, with the CUDA-graph
replay and Amdahl's prediction for the block with our softmax marked."""
from __future__ import annotations

import pandas as pd

from rooflab.report.analysis import E2E_GRAPH_TIMING, PLAIN_TIMING
from rooflab.report.figures.inputs import FigureData
from rooflab.report.figures.style import PART_COLORS, legend_below
from rooflab.report.fmt import label

E2E_ORDER = ("eager", "ours_softmax", "sdpa", "ours_attention")


def _amdahl(amdahl: pd.DataFrame, phase: str, length: str, n, sub: pd.DataFrame, impl: str) -> float | None:
    """The block time Amdahl's law predicts with our softmax (eager total / predicted speedup), on its bar."""
    if impl != "ours_softmax":
        return None
    line = amdahl[(amdahl["phase"] == phase) & (amdahl[length] == n)]
    eager = sub[(sub["impl"] == "eager")]
    total = pd.to_numeric(eager["median_ms"]).sum()       # the eager block's parts add up to its total
    return float(total / line["predicted"].iloc[0]) if not line.empty and total > 0 else None


def breakdown(fig, data: FigureData):
    frame = data.rows("e2e", timing=None)
    amdahl = data.tables["amdahl"][data.tables["amdahl"]["gpu"] == data.gpu]
    frame = frame[frame["median_ms"].notna() & frame["status"].isin(["ok", "incorrect"])]
    graphs = frame[(frame["timing"] == E2E_GRAPH_TIMING) & (frame["part"] == "total")]
    frame = frame[frame["timing"] == PLAIN_TIMING]
    parts = frame[frame["part"] != "total"]
    if parts.empty:
        return "no end-to-end rows with a per-part time"
    phases = [p for p in ("prefill", "decode") if p in set(parts["phase"])] or sorted(set(parts["phase"]))
    grid = []
    for phase in phases:
        length = "seqlen" if phase == "prefill" else "cache_len"
        grid.append([(phase, length, n) for n in sorted(set(parts[parts["phase"] == phase][length]))])
    cols = max(len(g) for g in grid)
    axes = fig.subplots(len(grid), cols, squeeze=False)
    fig.set_size_inches(2.6 * cols, 3.0 * len(grid) + 1.0)
    used = []
    for r, row in enumerate(grid):
        for c in range(cols):
            ax = axes[r, c]
            if c >= len(row):
                ax.set_visible(False)
                continue
            phase, length, n = row[c]
            sub = parts[(parts["phase"] == phase) & (parts[length] == n)]
            impls = [i for i in E2E_ORDER if i in set(sub["impl"])] + sorted(set(sub["impl"]) - set(E2E_ORDER))
            for x, impl in enumerate(impls):
                rows = sub[sub["impl"] == impl].set_index("part")["median_ms"]
                bad = (sub[sub["impl"] == impl]["status"] == "incorrect").any()
                bottom = 0.0
                for part, colour in PART_COLORS.items():
                    if part in rows and pd.notna(rows[part]):
                        ax.bar(x, rows[part], bottom=bottom, color=colour, hatch="//" if bad else None, label=part)
                        bottom += rows[part]
                replay = graphs[(graphs["phase"] == phase) & (graphs[length] == n) & (graphs["impl"] == impl)]["median_ms"]
                if not replay.empty:
                    ax.plot(x, float(replay.iloc[0]), marker="D", color="black", ms=6, ls="none",
                            label="whole block replayed as a CUDA graph")
                predicted = _amdahl(amdahl, phase, length, n, sub, impl)
                if predicted is not None:
                    ax.hlines(predicted, x - 0.45, x + 0.45, color="black", lw=2, ls=(0, (2, 1)), zorder=4,
                              label="Amdahl's prediction for the block with our softmax")
            ax.set_xticks(range(len(impls)))
            ax.set_xticklabels([label(i).replace(" + ", "\n+ ") for i in impls], fontsize=6)
            ax.set_title(f"{phase}, {'S' if phase == 'prefill' else 'L'}={n}", fontsize=9)
            if c == 0:
                ax.set_ylabel("time per block (ms)")
            used.append(ax)
    fig.suptitle(f"one decoder block, time per part (CUDA events), {data.label}", fontsize=10)
    legend_below(fig, used, ncol=4)
    return None
