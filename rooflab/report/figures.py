"""Every figure of the paper, drawn from the aggregate with matplotlib (Agg).

Each figure is one function `draw(fig, data) -> None | str`: None when it drew, else the
reason it could not (which data are missing). A figure without data is still written, as
a page that states that reason, so the workflow's outputs stay fixed; figures/index.json
records which is which, and the paper only shows the drawn ones.
"""
from __future__ import annotations

import json
import math
import os
import traceback
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from rooflab import datasheet  # noqa: E402
from rooflab.report.analysis import (E2E_GRAPH_TIMING, KERNEL_TIMING, LAUNCH_BOUND_BYTES, PLAIN_TIMING,  # noqa: E402
                                     counts, is_ours, is_seed, primary_gpu)
from rooflab.report.derive import select  # noqa: E402
from rooflab.report.catalog import FIGURES, caption  # noqa: E402
from rooflab.report.load import Aggregate  # noqa: E402
from rooflab.schema import SHAPE_COLUMNS  # noqa: E402

DTYPE_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
IMPL_COLORS = {
    "ours": "#d62728", "torch": "#1f77b4", "torch_compile": "#17becf", "liger": "#9467bd",
    "seed_rowwise": "#8c564b", "seed_multipass": "#bcbd22", "seed_attention": "#8c564b",
    "sdpa_flash": "#1f77b4", "sdpa_cudnn": "#2ca02c", "sdpa_efficient": "#17becf", "eager": "#7f7f7f",
    "ours_nosplit": "#ff7f0e", "sdpa": "#1f77b4", "ours_softmax": "#ff7f0e", "ours_attention": "#d62728",
}
EXTRA_COLORS = ["#e377c2", "#ff7f0e", "#2ca02c", "#bcbd22", "#17becf", "#9467bd"]
PART_COLORS = {"norms": "#c7c7c7", "projections": "#1f77b4", "attention": "#d62728", "softmax": "#ff7f0e",
               "mlp": "#2ca02c", "other": "#7f7f7f"}


def color(impl: str, index: int = 0) -> str:
    return IMPL_COLORS.get(impl, EXTRA_COLORS[index % len(EXTRA_COLORS)])


@dataclass
class FigureData:
    agg: Aggregate
    tables: dict              # the derived tables (rooflab.report.derive)
    gpu: str | None           # the GPU the per-study figures show

    def cases(self, study: str) -> pd.DataFrame:
        """This GPU's rows of a study, each case in the timing that judges it."""
        frame = self.tables["cases"]
        return self.agg.study(study).iloc[0:0].pipe(lambda empty: pd.concat(
            [empty, frame[(frame["study"] == study) & (frame["gpu"] == self.gpu)]], ignore_index=True)[empty.columns])

    def compared(self, study: str, against: str) -> pd.DataFrame:
        return select(self.tables["comparisons"], study, against, self.gpu)

    def rows(self, study: str, timing: str | None = PLAIN_TIMING) -> pd.DataFrame:
        frame = self.agg.study(study)
        frame = frame[frame["gpu"] == self.gpu]
        return frame if timing is None else frame[frame["timing"] == timing]

    def ceiling(self, name: str) -> float | None:
        return self.agg.ceiling(self.gpu).get(name) if self.gpu else None

    @property
    def memory_bytes(self) -> float | None:
        env = self.agg.envs.get(self.gpu, {})
        if env.get("memory_gib"):
            return float(env["memory_gib"]) * 2**30
        gb = self.ceiling("datasheet_memory_gb")
        return gb * 1e9 if gb else None

    @property
    def label(self) -> str:
        env = self.agg.envs.get(self.gpu, {})
        return plain(env.get("gpu") or self.gpu)


def _plain_log(ax, *axes: str) -> None:
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


def _bytes_axis(ax, values=None) -> None:
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


def _pow2_axis(ax, values=None) -> None:
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


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["status"] == "ok") & frame["median_ms"].notna()]


def _ceiling_lines(ax, measured: float | None, sheet: float | None, what: str) -> None:
    if measured:
        ax.axhline(measured, color="black", lw=1.2, label=f"measured {what} ceiling ({measured:.3g})")
    if sheet:
        ax.axhline(sheet, color="black", lw=1.0, ls="--", label=f"datasheet ({sheet:.3g})")


def _top(values, *lines) -> float:
    """An upper y limit that shows every value and every reference line, with headroom."""
    finite = [float(v) for v in list(values) + list(lines) if v is not None and pd.notna(v)]
    return max(finite) * 1.08 if finite else 1.0


def _panels(fig, n: int, sharey: bool = False, cols: int | None = None, width: float = 4.2, height: float = 3.2):
    cols = cols or min(n, 3)
    rows = math.ceil(n / cols)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=sharey)
    fig.set_size_inches(width * cols, height * rows + 0.9)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return flat[:n]


def _legend_below(fig, axes, ncol: int = 6) -> None:
    """One legend for the whole figure, under the panels (so it never covers data); duplicate labels merged."""
    handles = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label and not label.startswith("_"):
                handles.setdefault(label, handle)
    if handles:
        fig.set_layout_engine("constrained")
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=min(ncol, len(handles)),
                   fontsize=7, frameon=False)


def _impl_lines(ax, frame: pd.DataFrame, x: str, y: str) -> None:
    """One line per implementation over its correct rows: ours first and heavier, the seeds' designs dashed."""
    groups = sorted(_ok(frame).groupby("impl"), key=lambda kv: (kv[0] != "ours", is_seed(kv[0]), kv[0]))
    for i, (impl, rows) in enumerate(groups):
        rows = rows.sort_values(x)
        ax.plot(rows[x], rows[y], marker="o", ms=3.5, color=color(impl, i), label=impl,
                lw=2.2 if impl == "ours" else 1.2, ls="--" if is_seed(impl) else "-", zorder=3 if impl == "ours" else 2)


def _largest_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """For each row length, only the shape with the most rows (the same shape for every impl)."""
    biggest = frame.groupby("cols")["rows"].transform("max")
    return frame[frame["rows"] == biggest]


def _mark_failed(ax, frame: pd.DataFrame, x: str, labelled: set) -> None:
    bad = frame[frame["status"] == "incorrect"]
    for _, row in bad.iterrows():
        label = "incorrect" if "incorrect" not in labelled else None
        labelled.add("incorrect")
        ax.plot(row[x], 0, marker="x", color="red", ms=8, mew=2, clip_on=False, label=label, ls="none")


def _shade_launch_bound(ax, threshold: float, label: bool = True) -> None:
    """Grey band over the cases below the launch-bound threshold (call after plotting: it keeps the x limits)."""
    low, high = ax.get_xlim()
    if low < threshold:
        ax.axvspan(low, threshold, color="0.9", zorder=0,
                   label=f"below {threshold / 1e6:.3g} MB: launch-bound" if label else None)
    ax.set_xlim(low, high)


# ---------------------------------------------------------------- softmax

def _shade_columns(ax, cols, label: str | None) -> None:
    """A grey band at each row length whose plotted shape has kernel-time (CUPTI) rows."""
    low, high = ax.get_xlim()
    for k, c in enumerate(sorted(cols)):
        ax.axvspan(c / 1.3, c * 1.3, color="0.88", zorder=0, label=label if k == 0 else None)
    ax.set_xlim(low, high)


def softmax_bandwidth(fig, data: FigureData):
    frame = data.rows("softmax", timing=None)
    frame = frame[~frame["impl"].str.startswith("ours_")]
    if _ok(frame[frame["timing"] == PLAIN_TIMING]).empty:
        return "no correct softmax rows (events timing)"
    frame = data.cases("softmax")
    frame = frame[~frame["impl"].str.startswith("ours_")]
    dtypes = [d for d in DTYPE_SHORT if d in set(frame["dtype"])]
    copy, sheet = data.ceiling("copy_tbps"), data.ceiling("datasheet_bandwidth_tbps")
    top = _top(_ok(_largest_rows(frame))["tbps"], copy, sheet)
    axes = _panels(fig, len(dtypes), sharey=True)
    for ax, dtype in zip(axes, dtypes):
        part = _largest_rows(frame[frame["dtype"] == dtype])
        _impl_lines(ax, part[part["timing"] == PLAIN_TIMING], "cols", "tbps")
        for impl, rows in _ok(part[part["timing"] == KERNEL_TIMING]).groupby("impl"):   # off the lines: another timing
            ax.scatter(rows["cols"], rows["tbps"], s=18, facecolors="none", edgecolors=color(impl), zorder=3)
        _mark_failed(ax, part, "cols", set())
        _softmax_axis(ax, data, part, dtype, top, copy, sheet, "TB/s (read + write)")
    fig.suptitle(f"softmax bandwidth, {data.label}", fontsize=10)
    _legend_below(fig, axes)
    return None


def _softmax_axis(ax, data: FigureData, part: pd.DataFrame, dtype: str, top: float, copy, sheet, ylabel: str):
    """Ceilings, power-of-two row lengths, the launch-bound band and labels of one softmax panel."""
    _ceiling_lines(ax, copy, sheet, "copy")
    _pow2_axis(ax, sorted(set(part["cols"])))
    ax.set_ylim(0, top)
    _shade_columns(ax, set(part[part["timing"] == KERNEL_TIMING]["cols"]),
                   "small or short shape: hollow = the kernel's device time (CUPTI)")
    ax.set_title(DTYPE_SHORT[dtype], fontsize=9)
    ax.set_xlabel("row length (columns), at the largest row count")
    ax.set_ylabel(ylabel)


def _tally(table: pd.DataFrame) -> str:
    """'2 win / 1 tie / 0 loss' over a comparisons table."""
    c = counts(table["vs_best_outcome"])
    return f"{c['win']} win / {c['tie']} tie / {c['loss']} loss"


def _interval_bars(ax, table: pd.DataFrame, colour: str) -> None:
    """Each speedup's interval (from both rows' 95% confidence intervals) as a vertical bar."""
    part = table.dropna(subset=["vs_best", "vs_best_low", "vs_best_high", "bytes"])
    if not part.empty:
        ax.errorbar(part["bytes"], part["vs_best"], yerr=[part["vs_best"] - part["vs_best_low"],
                                                          part["vs_best_high"] - part["vs_best"]],
                    fmt="none", ecolor=colour, lw=0.8, capsize=2, zorder=2)


def softmax_speedup(fig, data: FigureData):
    peers, seeds = data.compared("softmax", "peer"), data.compared("softmax", "seed")
    if peers.empty or peers["vs_best"].notna().sum() == 0:
        return "no softmax shape with a correct row of ours and of a peer"
    ax = fig.subplots()
    fig.set_size_inches(7.5, 4.6)
    markers = {"float32": "o", "float16": "s", "bfloat16": "D"}
    for dtype in [d for d in DTYPE_SHORT if d in set(peers["dtype"])]:
        p, s = peers[peers["dtype"] == dtype], seeds[seeds["dtype"] == dtype]
        ax.scatter(p["bytes"], p["vs_best"], marker=markers[dtype], color=color("ours"), s=20, zorder=3,
                   label=f"vs best peer, {DTYPE_SHORT[dtype]} ({_tally(p)})")
        _interval_bars(ax, p, color("ours"))
        if s["vs_best"].notna().any():
            ax.scatter(s["bytes"], s["vs_best"], marker=markers[dtype], facecolors="none", edgecolors=color("seed_rowwise"),
                       s=26, zorder=2, label=f"vs best seed design, {DTYPE_SHORT[dtype]} ({_tally(s)})")
            _interval_bars(ax, s, color("seed_rowwise"))
    failed = peers[peers["ours_status"] != "ok"]     # ours incorrect, unsupported, oom or error: no speedup
    for k, (_, row) in enumerate(failed.iterrows()):
        if pd.notna(row["bytes"]):
            ax.plot(row["bytes"], 1.0, marker="x", color="red", ms=9, mew=2, ls="none",
                    label="ours: no correct row" if k == 0 else None)
    ax.axhline(1.0, color="black", lw=0.8)
    _plain_log(ax, "y")
    _bytes_axis(ax)
    _shade_launch_bound(ax, LAUNCH_BOUND_BYTES)
    ax.set_xlabel("bytes moved (read + write)")
    ax.set_ylabel("their time / our time (bars: interval)")
    ax.set_title(f"softmax: ours against the fastest peer and the seeds' designs, {data.label}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return None


def softmax_strategies(fig, data: FigureData):
    frame = data.rows("softmax", timing=None)
    frame = frame[frame["impl"].map(is_ours).astype(bool)]
    if _ok(frame[(frame["impl"] != "ours") & (frame["timing"] == PLAIN_TIMING)]).empty:
        return "no correct rows of the forced softmax strategies (impl ours_<strategy>)"
    frame = data.cases("softmax")
    frame = frame[frame["impl"].map(is_ours).astype(bool)]
    dtypes = [d for d in DTYPE_SHORT if d in set(frame["dtype"])]
    copy = data.ceiling("copy_tbps")
    top = _top(_ok(_largest_rows(frame))["tbps"], copy)
    axes = _panels(fig, len(dtypes), sharey=True)
    for ax, dtype in zip(axes, dtypes):
        part = _ok(_largest_rows(frame[frame["dtype"] == dtype]))
        for i, (impl, rows) in enumerate(sorted(part.groupby("impl"))):
            rows = rows.sort_values("cols")
            style = dict(color="black", ls="--", lw=2, zorder=3) if impl == "ours" else dict(color=EXTRA_COLORS[i % 6], lw=1.3)
            plain, graphed = rows[rows["timing"] == PLAIN_TIMING], rows[rows["timing"] == KERNEL_TIMING]
            ax.plot(plain["cols"], plain["tbps"], marker="o", ms=3.5, label=impl if impl != "ours" else "ours (dispatched)",
                    **style)
            if not graphed.empty:       # off the lines: another timing
                ax.scatter(graphed["cols"], graphed["tbps"], s=18, facecolors="none", edgecolors=style["color"], zorder=4)
        _softmax_axis(ax, data, part, dtype, top, copy, None, "TB/s")
    fig.suptitle(f"softmax strategies forced one at a time, {data.label}", fontsize=10)
    _legend_below(fig, axes)
    return None


LAUNCH_PEER = {"softmax": "torch", "decode": "sdpa_cudnn", "attention": "sdpa_flash"}


def launch_bound(fig, data: FigureData):
    studies = []
    for study in ("softmax", "decode", "attention"):
        frame = data.rows(study, timing=None)
        if not _ok(frame[frame["timing"] == KERNEL_TIMING]).empty:
            studies.append((study, frame))
    if not studies:
        return "no kernel-time (cupti) rows: no case small or short enough for them was measured"
    axes = _panels(fig, len(studies), width=4.8, height=3.6)
    for ax, (study, frame) in zip(axes, studies):
        keys = ["dtype", *SHAPE_COLUMNS[study]]
        graphed = _ok(frame[frame["timing"] == KERNEL_TIMING])
        impls = ["ours"] + [i for i in (LAUNCH_PEER[study],) if i in set(graphed["impl"])]
        for impl in impls:
            g = graphed[graphed["impl"] == impl]
            e = _ok(frame[(frame["timing"] == PLAIN_TIMING) & (frame["impl"] == impl)])
            both = e.merge(g, on=keys, suffixes=("_e", "_g"))
            if both.empty:
                continue
            ax.scatter(both["bytes_e"], both["median_ms_e"] * 1e3, marker="o", s=22, facecolors="none",
                       edgecolors=color(impl), label=f"{impl}, plain call (events)")
            ax.scatter(both["bytes_e"], both["median_ms_g"] * 1e3, marker="s", s=18, color=color(impl),
                       label=f"{impl}, kernel alone (CUPTI)")
        for name, style, what in (("launch_us", "-", "launch floor"), ("launch_graph_us", "--", "launch floor in a graph")):
            if data.ceiling(name):
                ax.axhline(data.ceiling(name), color="gray", ls=style, lw=0.9, label=f"{what} ({data.ceiling(name):.2g} us)")
        _bytes_axis(ax, [b for coll in ax.collections for b in coll.get_offsets()[:, 0]])
        _plain_log(ax, "y")
        ax.set_xlabel("bytes moved")
        ax.set_ylabel("median time per call (us)")
        ax.set_title(f"{study}", fontsize=9)
    fig.suptitle(f"plain call against the kernel alone, {data.label}", fontsize=10)
    _legend_below(fig, axes, ncol=3)
    return None


# ---------------------------------------------------------------- claims and cross-GPU

def _gpu_name(slug: str | None) -> str:
    entry = datasheet.for_slug(slug) if slug else None
    return entry["label"].split(" (")[0] if entry else str(slug)


def _common_tokens(labels: list[str]) -> tuple[list[str], str]:
    """Labels without the words every one of them shares, and those shared words (kept in order)."""
    split = [label.split() for label in labels]
    common = [w for w in split[0] if all(w in words for words in split[1:])] if len(split) > 1 else []
    short = [" ".join(w for w in words if w not in common) or " ".join(words) for words in split]
    return short, " ".join(common)


def claims(fig, data: FigureData):
    table = data.tables["verdicts"].dropna(subset=["claimed_frac", "ours_frac"])
    verdicts = [v for _, v in table.iterrows()]
    if not verdicts:
        return "no published claim has a measurement of ours to set beside it (and a datasheet peak for both GPUs)"
    groups: dict[tuple, list] = {}
    for v in verdicts:
        groups.setdefault((v["source"][:3], v["claim_gpu"], v["ours_gpu"]), []).append(v)
    counts = [len(g) for g in groups.values()]
    axes = fig.subplots(len(groups), 1, squeeze=False, sharex=True,
                        gridspec_kw={"height_ratios": counts})[:, 0]
    fig.set_size_inches(8, 1.4 + 0.3 * sum(counts) + 0.55 * len(groups))
    fig.set_layout_engine("constrained")
    for ax, ((seed, claim_gpu, ours_gpu), vs) in zip(axes, groups.items()):
        ys = range(len(vs))
        ax.barh([y - 0.2 for y in ys], [v["claimed_frac"] for v in vs], height=0.38, color="#9ecae1",
                label="published: the seed's claim, on the seed's GPU")
        ax.barh([y + 0.2 for y in ys], [v["ours_frac"] for v in vs], height=0.38, color=color("ours"),
                label="measured here: same implementation, shape and dtype, on our GPU")
        labels, common = _common_tokens([f"{v['impl']} {v['shape']} {DTYPE_SHORT.get(v['dtype'], v['dtype'])}" for v in vs])
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_ylim(len(vs) - 0.5, -0.5)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_title(f"seed {seed}{' (' + common + ')' if common else ''}\nblue: claimed on {_gpu_name(claim_gpu)}; "
                     f"red: measured on {_gpu_name(ours_gpu)}", fontsize=8, loc="left")
    axes[-1].set_xlabel("fraction of the GPU's own datasheet peak\n(bandwidth for softmax, dense tensor rate of the dtype for attention)",
                        fontsize=8)
    axes[-1].set_xlim(0, 1.05)
    _legend_below(fig, list(axes), ncol=1)
    return None


def cross_gpu(fig, data: FigureData):
    records = []
    ceilings = data.agg.ceilings
    for study in ("softmax", "attention", "decode"):
        for gpu in sorted(set(data.tables["comparisons"]["gpu"])):
            table = select(data.tables["comparisons"], study, "peer", gpu)
            ours = table["ours_frac_plain"].dropna()
            limit = {(g, n): v for g, n, v in zip(ceilings["gpu"], ceilings["name"], ceilings["value"])}
            best = [r["best_metric"] / limit[(gpu, r["ceiling_name"])] for _, r in table.dropna(subset=["best_metric"]).iterrows()
                    if r["timing"] == PLAIN_TIMING and limit.get((gpu, r["ceiling_name"]))]
            if len(ours):
                records.append(dict(study=study, gpu=gpu, who="ours", med=ours.median(), lo=ours.min(), hi=ours.max()))
            if best:
                s = pd.Series(best)
                records.append(dict(study=study, gpu=gpu, who="best peer", med=s.median(), lo=s.min(), hi=s.max()))
    if not records:
        return "no GPU has rows of ours with a fraction of its measured ceiling"
    table = pd.DataFrame(records)
    studies = list(dict.fromkeys(table["study"]))
    axes = _panels(fig, len(studies), sharey=True, width=3.6, height=3.2)
    for ax, study in zip(axes, studies):
        part = table[table["study"] == study]
        gpus = sorted(set(part["gpu"]))
        for k, who in enumerate(("ours", "best peer")):
            sub = part[part["who"] == who].set_index("gpu").reindex(gpus)
            xs = [i + (k - 0.5) * 0.38 for i in range(len(gpus))]
            med, lo, hi = (sub[c].to_numpy(dtype=float) for c in ("med", "lo", "hi"))
            ax.bar(xs, med, width=0.36, color=color("ours") if who == "ours" else "#7f7f7f",
                   label=f"{who} (median over shapes)")
            ax.errorbar(xs, med, yerr=[med - lo, hi - med], fmt="none", ecolor="black", lw=0.8, capsize=2,
                        label="lowest to highest shape")
        ax.set_xticks(range(len(gpus)))
        ax.set_xticklabels(gpus, fontsize=7)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_ylim(0, _top(table["hi"], 1.0))
        ax.set_title(study, fontsize=9)
        ax.set_ylabel("fraction of measured ceiling")
    _legend_below(fig, axes, ncol=3)
    return None


# ---------------------------------------------------------------- attention and decode

def _first_dtype(frame: pd.DataFrame) -> str:
    return "float16" if "float16" in set(frame["dtype"]) else sorted(set(frame["dtype"]))[0]


def attention_tflops(fig, data: FigureData):
    frame = data.rows("attention")
    frame = frame[frame["seqlen_q"] == frame["seqlen_k"]]
    if _ok(frame).empty:
        return "no correct attention rows with seqlen_q = seqlen_k"
    dtype = _first_dtype(frame)
    frame = frame[frame["dtype"] == dtype]
    heads = frame.groupby(["batch", "heads_q", "heads_kv"]).size().idxmax()
    frame = frame[(frame["batch"] == heads[0]) & (frame["heads_q"] == heads[1]) & (frame["heads_kv"] == heads[2])]
    panels = [(d, c) for d in sorted(set(frame["head_dim"])) for c in (True, False)
              if not frame[(frame["head_dim"] == d) & (frame["causal"] == c)].empty]
    top = _top(_ok(frame)["tflops"])
    axes = _panels(fig, len(panels), sharey=True, width=4.0, height=3.0)
    for ax, (d, causal) in zip(axes, panels):
        part = frame[(frame["head_dim"] == d) & (frame["causal"] == causal)]
        _impl_lines(ax, part, "seqlen_q", "tflops")
        oom = part[part["status"] == "oom"]
        for _, row in oom.iterrows():
            ax.plot(row["seqlen_q"], 0, marker="v", color=color(row["impl"]), ms=8, ls="none", clip_on=False,
                    label=f"out of memory ({row['impl']})")
        _mark_failed(ax, part, "seqlen_q", set())
        _pow2_axis(ax, sorted(set(int(n) for n in part["seqlen_q"])))
        ax.set_ylim(0, top)
        ax.set_title(f"D={d}, {'causal' if causal else 'non-causal'}", fontsize=9)
        ax.set_xlabel("sequence length N")
        ax.set_ylabel("TFLOP/s")
    fig.suptitle(f"attention forward, B={heads[0]} Hq={heads[1]} Hkv={heads[2]}, {DTYPE_SHORT.get(dtype, dtype)}, "
                 f"{data.label}", fontsize=10)
    _legend_below(fig, axes, ncol=5)
    return None


def _decode_frame(data: FigureData, heads_kv=None) -> pd.DataFrame:
    """Non-ragged decode rows of the first dtype (fp16 when present) and the most common Hq and D."""
    frame = data.rows("decode")
    frame = frame[frame["ragged"] == False]  # noqa: E712  (object column of bools)
    if frame.empty:
        return frame
    frame = frame[frame["dtype"] == _first_dtype(frame)]
    heads = frame.groupby(["heads_q", "head_dim"]).size().idxmax()
    frame = frame[(frame["heads_q"] == heads[0]) & (frame["head_dim"] == heads[1])]
    return frame if heads_kv is None else frame[frame["heads_kv"] == heads_kv]


def decode_bandwidth(fig, data: FigureData):
    frame = _decode_frame(data)
    if _ok(frame).empty:
        return "no correct decode rows (non-ragged, events timing)"
    batches = sorted(set(frame["batch"]))
    kv_heads = sorted(set(frame["heads_kv"]), reverse=True)      # MHA (Hkv = Hq) first, then GQA
    read, sheet = data.ceiling("read_tbps"), data.ceiling("datasheet_bandwidth_tbps")
    top = _top(_ok(frame)["tbps"], read, sheet)
    axes = fig.subplots(len(kv_heads), len(batches), squeeze=False, sharey=True, sharex=True)
    fig.set_size_inches(3.3 * len(batches), 2.8 * len(kv_heads) + 1.0)
    for r, hkv in enumerate(kv_heads):
        for c, b in enumerate(batches):
            ax = axes[r, c]
            part = frame[(frame["batch"] == b) & (frame["heads_kv"] == hkv)]
            _impl_lines(ax, part, "cache_len", "tbps")
            _mark_failed(ax, part, "cache_len", set())
            _ceiling_lines(ax, read, sheet, "read")
            _pow2_axis(ax, sorted(set(frame["cache_len"])))
            ax.set_ylim(0, top)
            first = frame.iloc[0]
            ax.set_title(f"B={b}, Hkv={hkv}", fontsize=9)
            if r == len(kv_heads) - 1:
                ax.set_xlabel("cached tokens L")
            if c == 0:
                ax.set_ylabel("TB/s (K and V read)")
    fig.suptitle(f"decode, Hq={first['heads_q']} D={first['head_dim']}, {DTYPE_SHORT.get(first['dtype'], first['dtype'])}, "
                 f"{data.label}", fontsize=10)
    _legend_below(fig, list(axes.flat), ncol=7)
    return None


def decode_split(fig, data: FigureData):
    frame = _ok(_decode_frame(data))
    keys = ["batch", "heads_q", "heads_kv", "cache_len", "head_dim", "dtype"]
    split = frame[frame["impl"] == "ours"].merge(frame[frame["impl"] == "ours_nosplit"], on=keys, suffixes=("", "_nosplit"))
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
            ax.plot(part["cache_len"], part["median_ms_nosplit"] / part["median_ms"], marker="o", ms=4,
                    color=EXTRA_COLORS[i % 6], ls=styles[k % 4], label=f"B={b}, Hkv={hkv}")
    ax.axhline(1.0, color="black", lw=0.8)
    _pow2_axis(ax, sorted(set(split["cache_len"])))
    _plain_log(ax, "y")
    ax.set_xlabel("cached tokens L")
    ax.set_ylabel("time without split / time with split")
    first = split.iloc[0]
    ax.set_title(f"split-KV decode, Hq={first['heads_q']} D={first['head_dim']}, "
                 f"{DTYPE_SHORT.get(first['dtype'], first['dtype'])}, {data.label}", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return None


def roofline(fig, data: FigureData):
    points = []
    for study in ("attention", "decode"):
        frame = _ok(data.rows(study))
        for _, row in frame.iterrows():
            ai = row["flops"] / row["bytes"] if pd.notna(row["flops"]) and row["bytes"] else None
            if ai and pd.notna(row["tflops"]):
                points.append((study, row["impl"], ai, float(row["tflops"])))
    bw = data.ceiling("read_tbps")
    peak = data.ceiling("matmul_fp16_tflops")
    if not points:
        return "no attention or decode rows with a FLOP rate (tflops) and a known arithmetic intensity"
    ax = fig.subplots()
    fig.set_size_inches(7.5, 4.6)
    lo = min(p[2] for p in points) / 4
    hi = max(p[2] for p in points) * 4
    xs = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    if bw and peak:
        ax.plot(xs, [min(peak, bw * x) for x in xs], color="black", lw=1.2,
                label=f"measured: {bw:.3g} TB/s read, {peak:.3g} TFLOP/s fp16 matmul")
    sheet_bw, sheet_peak = data.ceiling("datasheet_bandwidth_tbps"), data.ceiling("datasheet_fp16_tflops")
    if sheet_bw and sheet_peak:
        ax.plot(xs, [min(sheet_peak, sheet_bw * x) for x in xs], color="black", lw=1, ls="--", label="datasheet")
    styles = {"attention": "o", "decode": "s"}
    seen = set()
    for study, impl, ai, tf in points:
        key = (study, is_ours(impl))
        who = "ours" if key[1] else "peers and the seeds' designs"
        label = f"{study}, {who}" if key not in seen else None
        seen.add(key)
        ax.scatter(ai, tf, marker=styles[study], s=16 if key[1] else 10, alpha=0.9 if key[1] else 0.35,
                   color=color("ours") if key[1] else "#1f77b4", label=label, zorder=3 if key[1] else 2)
    _plain_log(ax, "x", "y")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attained TFLOP/s")
    ax.set_title(f"roofline, {data.label}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return None


E2E_ORDER = ("eager", "ours_softmax", "sdpa", "ours_attention")


def e2e_breakdown(fig, data: FigureData):
    frame = data.rows("e2e", timing=None)
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
            ax.set_xticks(range(len(impls)))
            ax.set_xticklabels([i.replace("_", "\n") for i in impls], fontsize=7)
            ax.set_title(f"{phase}, {'S' if phase == 'prefill' else 'L'}={n}", fontsize=9)
            if c == 0:
                ax.set_ylabel("time per block (ms)")
            used.append(ax)
    fig.suptitle(f"one decoder block, time per part (CUDA events), {data.label}", fontsize=10)
    _legend_below(fig, used, ncol=7)
    return None


def reproduction(fig, data: FigureData):
    """rooflab.reproduce.draw over the paper's GPU's reproduction.csv."""
    from rooflab import reproduce

    if not data.agg.has_record(data.gpu, "reproduction.csv"):
        return (f"no reproduction.csv for {data.gpu}: no fresh run was compared with the committed one"
                if data.gpu else "no GPU results, so no reproduction record")
    frame = data.agg.reproduction[data.agg.reproduction["gpu"] == data.gpu].drop(columns=["gpu"])
    both = frame[frame["verdict"].isin(("reproduced", "faster", "slower"))]
    if both.empty:
        return f"reproduction.csv of {data.gpu} has no case measured in both runs"
    ax = fig.subplots()
    fig.set_size_inches(5.6, 5.0)
    reproduce.draw(frame, ax)
    ax.set_title(f"fresh against committed run, {data.label}", fontsize=9)
    return None


DRAW = {
    "softmax_bandwidth": softmax_bandwidth, "softmax_speedup": softmax_speedup,
    "softmax_strategies": softmax_strategies, "launch_bound": launch_bound, "claims": claims,
    "attention_tflops": attention_tflops, "decode_bandwidth": decode_bandwidth, "decode_split": decode_split,
    "roofline": roofline, "cross_gpu": cross_gpu, "e2e_breakdown": e2e_breakdown, "reproduction": reproduction,
}
assert set(DRAW) == set(FIGURES), "every catalogued figure needs a draw function"


def _placeholder(fig, name: str, reason: str) -> None:
    fig.clear()
    fig.set_size_inches(6, 2.2)
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, plain(f"{name}: not drawn\n{reason}"), ha="center", va="center", wrap=True, fontsize=10)


# No figure text goes through TeX; strings from data go through `plain`, so a `$` in them is a dollar sign,
# never the start of mathtext (matplotlib's own log-axis tick labels still use mathtext).
PLAIN_TEXT = {"text.usetex": False}


def plain(text) -> str:
    """A string from data (a GPU's name, an error message) as matplotlib text that prints it literally."""
    return str(text).replace("$", r"\$")


def render_all(agg: Aggregate, tables: dict, out_dir: str | Path, fresh_slug: str | None = None, names=None,
               lead: str | None = "auto") -> list[dict]:
    """Write <name>.png and <name>.pdf for every figure (a stated placeholder when data are missing).

    A figure that fails to draw or to save becomes a placeholder saying why; one whose placeholder fails
    too keeps its previous files and its index entry says so. Each file is written beside its target
    and moved into place only once complete, so a failure never leaves a truncated or missing figure."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = FigureData(agg, tables, primary_gpu(agg.results, fresh_slug, lead, agg.gpus))
    index = []
    with matplotlib.rc_context(PLAIN_TEXT):
        for name in names or FIGURES:
            index.append(_render_one(name, data, out_dir))
    _write_atomic(out_dir / "index.json", (json.dumps(index, indent=2) + "\n").encode())
    return index


def _render_one(name: str, data: FigureData, out_dir: Path) -> dict:
    study, category = FIGURES[name]
    fig = plt.figure()
    try:
        try:
            reason = DRAW[name](fig, data)
        except Exception as exc:  # a figure must never take the report down: say what broke instead
            traceback.print_exc()
            reason = f"drawing failed: {type(exc).__name__}: {exc}"
        try:
            if reason:
                _placeholder(fig, name, reason)
            elif fig.get_layout_engine() is None:
                fig.tight_layout()
            _save(fig, out_dir, name)
        except Exception as exc:
            traceback.print_exc()
            reason = f"saving failed: {type(exc).__name__}: {exc}"
            plt.close(fig)
            fig = plt.figure()
            try:
                _placeholder(fig, name, reason)
                _save(fig, out_dir, name)
            except Exception as again:
                traceback.print_exc()
                reason += f"; its placeholder failed too ({type(again).__name__}: {again}): the previous files are kept"
        width, height = (round(float(x), 2) for x in fig.get_size_inches())
    finally:
        plt.close(fig)
    return dict(name=name, study=study, category=category, caption=caption(name), gpu=data.gpu,
                drawn=reason is None, reason=reason, png=f"{name}.png", pdf=f"{name}.pdf",
                width_in=width, height_in=height)


def _save(fig, out_dir: Path, name: str) -> None:
    """Both files of one figure, each written to a temporary name and moved into place once complete;
    neither target is replaced unless both were written."""
    temps = {}
    try:
        for ext in ("png", "pdf"):
            temp = out_dir / f".{name}.{ext}.tmp"
            fig.savefig(temp, format=ext, dpi=150, metadata={"CreationDate": None} if ext == "pdf" else None)
            temps[ext] = temp
        for ext, temp in temps.items():
            os.replace(temp, out_dir / f"{name}.{ext}")
    finally:
        for temp in temps.values():
            temp.unlink(missing_ok=True)


def _write_atomic(path: Path, content: bytes) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(content)
    os.replace(temp, path)
