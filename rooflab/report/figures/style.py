"""The look every figure shares: colours and labels per implementation, axes, ceilings, legends.

Implementation names are data (config, studies, CSVs); figures print their display labels
(rooflab.report.fmt.label), so `ours_rows` and `ours_row` read as the strategies they are.
"""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402

from rooflab.report.analysis import TIE_WITHIN, counts, is_bound, is_seed  # noqa: E402
from rooflab.report.fmt import label  # noqa: E402

DTYPE_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
IMPL_COLORS = {
    "ours": "#d62728", "torch": "#1f77b4", "torch_compile": "#17becf", "liger": "#9467bd",
    "seed_rowwise": "#8c564b", "seed_multipass": "#bcbd22", "seed_attention": "#8c564b",
    "sdpa_flash": "#1f77b4", "sdpa_cudnn": "#2ca02c", "sdpa_efficient": "#17becf", "eager": "#7f7f7f",
    "ours_nosplit": "#ff7f0e", "sdpa": "#1f77b4", "ours_softmax": "#ff7f0e", "ours_attention": "#d62728",
    # our softmax strategies forced one at a time, and the paged decode layout: one colour each in every panel
    "ours_rows": "#bcbd22", "ours_row": "#2ca02c", "ours_looped": "#ff7f0e", "ours_split": "#17becf",
    "ours_paged": "#e377c2", "ours_triton": "#9467bd",
    "copy": "#000000",     # the copy bound of softmax's cases (a copy of the same bytes in the same trials)
}
EXTRA_COLORS = ["#e377c2", "#ff7f0e", "#2ca02c", "#bcbd22", "#17becf", "#9467bd"]
PART_COLORS = {"norms": "#c7c7c7", "projections": "#1f77b4", "attention": "#d62728", "softmax": "#ff7f0e",
               "mlp": "#2ca02c", "other": "#7f7f7f"}


def color(impl: str, index: int = 0) -> str:
    return IMPL_COLORS.get(impl, EXTRA_COLORS[index % len(EXTRA_COLORS)])


def plain(text) -> str:
    """A string from data (a GPU's name, an error message) as matplotlib text that prints it literally:
    no figure text goes through TeX, and a `$` is a dollar sign, never the start of mathtext."""
    return str(text).replace("$", r"\$")


def plain_log(ax, *axes: str) -> None:
    """Log scale with ticks written as plain numbers (0.5, 2, 1e+06), never 2x10^0."""
    fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:.0f}" if 1 <= v < 1e6 else f"{v:.3g}")
    sparse = matplotlib.ticker.FuncFormatter(
        lambda v, _: f"{v:.3g}" if v > 0 and f"{v:e}"[0] in "25" else "")
    for axis in axes:
        getattr(ax, f"set_{axis}scale")("log")
        target = ax.xaxis if axis == "x" else ax.yaxis
        low, high = ax.get_xlim() if axis == "x" else ax.get_ylim()
        target.set_major_formatter(fmt)
        # within about one decade there may be no major tick: label the minor ones then
        narrow = low > 0 and high / low < 30
        target.set_minor_formatter(sparse if narrow else matplotlib.ticker.NullFormatter())


def bytes_axis(ax, values=None) -> None:
    """Log x axis of bytes, ticked in kB / MB / GB (at the values themselves when they span under a decade)."""
    ax.set_xscale("log")
    values = sorted(set(float(v) for v in values if pd.notna(v))) if values is not None else []
    if values and values[-1] / values[0] < 10:
        ax.set_xlim(values[0] / 3, values[-1] * 3)
        ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(values))

    def label(v, _):
        for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
            if v >= size:
                return f"{v / size:.3g} {unit}"
        return f"{v:.3g} B"
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(label))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _binary(v: float) -> str:
    """1, 512, 4k, 128k, 4M: powers of two as row lengths and token counts are usually written."""
    for suffix, size in (("M", 2**20), ("k", 2**10)):
        if v >= size and v % size == 0:
            return f"{v / size:.0f}{suffix}"
    return f"{v:.0f}" if v >= 1 else f"{v:.2g}"


def pow2_axis(ax, values=None) -> None:
    """Log2 x axis ticked at powers of two (every third one over a wide range), labelled 1, 8, 4k, 1M."""
    ax.set_xscale("log", base=2)
    low, high = ax.get_xlim()
    if values is not None and len(values):
        low, high = min(values) / 1.5, max(values) * 1.5
        ax.set_xlim(low, high)
    first, last = math.ceil(math.log2(max(low, 2 ** -1))), math.floor(math.log2(high))
    step = max(1, math.ceil((last - first + 1) / 8))
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator([2.0 ** k for k in range(first, last + 1, step)]))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: _binary(v)))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.tick_params(axis="x", labelsize=7)


def ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["status"] == "ok") & frame["median_ms"].notna()]


def ceiling_lines(ax, measured: float | None, sheet: float | None, what: str) -> None:
    if measured:
        ax.axhline(measured, color="black", lw=1.2, label=f"measured {what} ceiling ({measured:.3g})")
    if sheet:
        ax.axhline(sheet, color="black", lw=1.0, ls="--", label=f"datasheet ({sheet:.3g})")


def top(values, *lines) -> float:
    """An upper y limit that shows every value and every reference line, with headroom."""
    finite = [float(v) for v in list(values) + list(lines) if v is not None and pd.notna(v)]
    return max(finite) * 1.08 if finite else 1.0


def panels(fig, n: int, sharey: bool = False, cols: int | None = None, width: float = 4.2, height: float = 3.2):
    cols = cols or min(n, 3)
    rows = math.ceil(n / cols)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=sharey)
    fig.set_size_inches(width * cols, height * rows + 0.9)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return flat[:n]


def legend_below(fig, axes, ncol: int = 6) -> None:
    """One legend for the whole figure, under the panels (so it never covers data); duplicate labels merged."""
    handles = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels()):
            if text and not text.startswith("_"):
                handles.setdefault(text, handle)
    if handles:
        fig.set_layout_engine("constrained")
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=min(ncol, len(handles)),
                   fontsize=7, frameon=False)


def impl_lines(ax, frame: pd.DataFrame, x: str, y: str, bars: bool = True) -> None:
    """One line per implementation over its correct rows: ours first and heavier, the seeds' designs dashed,
    a bound (the copy of the same bytes) dotted and thin; bars: each row's 95% confidence interval of the
    median, as the metric (metric x median / interval end)."""
    groups = sorted(ok(frame).groupby("impl"), key=lambda kv: (kv[0] != "ours", is_seed(kv[0]), kv[0]))
    for i, (impl, rows) in enumerate(groups):
        rows = rows.sort_values(x)
        style = dict(color=color(impl, i), lw=2.2 if impl == "ours" else 1.2,
                     ls="--" if is_seed(impl) else ":" if is_bound(impl) else "-", zorder=3 if impl == "ours" else 2)
        ax.plot(rows[x], rows[y], marker="o", ms=3.5, label=label(impl), **style)
        if bars and rows["ci_low_ms"].notna().any():
            low = rows[y] * rows["median_ms"] / rows["ci_high_ms"]
            high = rows[y] * rows["median_ms"] / rows["ci_low_ms"]
            ax.errorbar(rows[x], rows[y], yerr=[(rows[y] - low).clip(lower=0), (high - rows[y]).clip(lower=0)],
                        fmt="none", ecolor=style["color"], lw=0.7, capsize=1.5, zorder=style["zorder"])


def tie_band(ax) -> None:
    """The band of ratios counted as ties whatever the intervals (medians within TIE_WITHIN), and the 1x line."""
    ax.axhspan(1 / (1 + TIE_WITHIN), 1 + TIE_WITHIN, color="0.75", zorder=0.5, label=f"tie band (within {TIE_WITHIN:.0%})")
    ax.axhline(1.0, color="black", lw=0.8, zorder=1)


def tally(table: pd.DataFrame) -> str:
    """'2 win / 1 tie / 0 loss' over a selection of the comparisons table."""
    c = counts(table["vs_best_outcome"])
    return f"{c['win']} win / {c['tie']} tie / {c['loss']} loss"


def mark_failed(ax, frame: pd.DataFrame, x: str, labelled: set) -> None:
    bad = frame[frame["status"] == "incorrect"]
    for _, row in bad.iterrows():
        label = "incorrect" if "incorrect" not in labelled else None
        labelled.add("incorrect")
        ax.plot(row[x], 0, marker="x", color="red", ms=8, mew=2, clip_on=False, label=label, ls="none")


def shade_launch_bound(ax, threshold: float, label: bool = True) -> None:
    """A pale band over the cases below the launch-bound threshold (call after plotting: it keeps the x limits)."""
    low, high = ax.get_xlim()
    if low < threshold:
        ax.axvspan(low, threshold, color="#fdf1dc", zorder=0,
                   label=f"below {threshold / 1e6:.3g} MB: launch-bound" if label else None)
    ax.set_xlim(low, high)
