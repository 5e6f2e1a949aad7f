"""Every figure of the paper, drawn from the aggregate with matplotlib (Agg).

Each figure is one function `draw(fig, data) -> None | str`: None when it drew, else the
reason it could not (which data are missing). A figure without data is still written, as
a page that states that reason, so the workflow's outputs stay fixed; figures/index.json
records which is which, and the paper only shows the drawn ones.
"""
from __future__ import annotations

import json
import math
import traceback
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from rooflab.report.analysis import (ceiling_name, comparisons, intensity, is_ours, moved_bytes,  # noqa: E402
                                     primary_gpu, study_work)
from rooflab.report.catalog import FIGURES  # noqa: E402
from rooflab.report.load import Aggregate  # noqa: E402
from rooflab.report.verdicts import judge_all  # noqa: E402
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
DEFAULT_GRAPH_BELOW = 8e6   # rooflab.bench.BenchConfig.graph_below_bytes, when env.json has no config


def color(impl: str, index: int = 0) -> str:
    return IMPL_COLORS.get(impl, EXTRA_COLORS[index % len(EXTRA_COLORS)])


@dataclass
class FigureData:
    agg: Aggregate
    gpu: str | None           # the GPU the per-study figures show

    def rows(self, study: str, timing: str | None = "events") -> pd.DataFrame:
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
    def graph_below(self) -> float:
        config = self.agg.envs.get(self.gpu, {}).get("config") or {}
        return float((config.get("bench") or {}).get("graph_below_bytes", DEFAULT_GRAPH_BELOW))

    @property
    def label(self) -> str:
        env = self.agg.envs.get(self.gpu, {})
        return str(env.get("gpu") or self.gpu)


def _plain_log(ax, *axes: str) -> None:
    """Log scale with ticks written as plain numbers (0.5, 2, 1e+06), never 2x10^0."""
    fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:.3g}")
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


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["status"] == "ok") & frame["median_ms"].notna()]


def _ceiling_lines(ax, measured: float | None, sheet: float | None, what: str) -> None:
    if measured:
        ax.axhline(measured, color="black", lw=1.2, label=f"measured {what} {measured:.3g}")
    if sheet:
        ax.axhline(sheet, color="black", lw=1.0, ls="--", label=f"datasheet {sheet:.3g}")


def _panels(fig, n: int, sharey: bool = False):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=sharey)
    fig.set_size_inches(4.6 * cols, 3.6 * rows + 0.4)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return flat[:n]


def _impl_lines(ax, frame: pd.DataFrame, x: str, y: str) -> None:
    """One line per implementation over its correct rows, ours first and drawn heavier."""
    groups = sorted(_ok(frame).groupby("impl"), key=lambda kv: (kv[0] != "ours", kv[0]))
    for i, (impl, rows) in enumerate(groups):
        rows = rows.sort_values(x)
        ax.plot(rows[x], rows[y], marker="o", ms=3, color=color(impl, i), label=impl,
                lw=2.2 if impl == "ours" else 1.2, zorder=3 if impl == "ours" else 2)


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


# ---------------------------------------------------------------- softmax

def softmax_bandwidth(fig, data: FigureData):
    frame = data.rows("softmax")
    frame = frame[~frame["impl"].str.startswith("ours_")]
    if _ok(frame).empty:
        return "no correct softmax rows (events timing)"
    dtypes = [d for d in DTYPE_SHORT if d in set(frame["dtype"])]
    for ax, dtype in zip(_panels(fig, len(dtypes), sharey=True), dtypes):
        part = _largest_rows(frame[frame["dtype"] == dtype])
        _impl_lines(ax, part, "cols", "tbps")
        _mark_failed(ax, part, "cols", set())
        _ceiling_lines(ax, data.ceiling("copy_tbps"), data.ceiling("datasheet_bandwidth_tbps"), "copy")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_title(f"{DTYPE_SHORT[dtype]}, {data.label}", fontsize=9)
        ax.set_xlabel("row length (columns)")
        ax.set_ylabel("TB/s")
        ax.legend(fontsize=6, loc="lower right")
    return None


def softmax_speedup(fig, data: FigureData):
    table = comparisons(data.rows("softmax"), "softmax")
    if table.empty or table["vs_best"].notna().sum() == 0:
        return "no softmax shape with a correct row of ours and of a peer"
    ax = fig.subplots()
    fig.set_size_inches(7, 4.2)
    markers = {"float32": "o", "float16": "s", "bfloat16": "D"}
    for dtype, part in table.groupby("dtype"):
        part = part.sort_values("bytes")
        ax.scatter(part["bytes"], part["vs_baseline"], marker=markers.get(dtype, "o"), facecolors="none",
                   edgecolors=color("torch"), label=f"vs torch, {DTYPE_SHORT.get(dtype, dtype)}")
        ax.scatter(part["bytes"], part["vs_best"], marker=markers.get(dtype, "o"), color=color("ours"),
                   label=f"vs best peer, {DTYPE_SHORT.get(dtype, dtype)}", s=18)
    failed = table[table["ours_status"] != "ok"]     # ours incorrect, unsupported, oom or error: no speedup
    for k, (_, row) in enumerate(failed.iterrows()):
        shape = {"rows": int(row["rows"]), "cols": int(row["cols"])}
        nbytes = row["bytes"] if pd.notna(row["bytes"]) else study_work("softmax", shape, row["dtype"])[0]
        if nbytes:
            ax.plot(nbytes, 1.0, marker="x", color="red", ms=9, mew=2, ls="none",
                    label="ours: no correct row" if k == 0 else None)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axvline(data.graph_below, color="gray", ls=":", lw=1)
    ax.text(data.graph_below, ax.get_ylim()[1], f" {data.graph_below / 1e6:.3g} MB", va="top", fontsize=7, color="gray")
    _plain_log(ax, "x", "y")
    ax.set_xlabel("bytes moved (read + write)")
    ax.set_ylabel("speedup (peer time / our time)")
    ax.set_title(f"softmax, {data.label}", fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    return None


def softmax_strategies(fig, data: FigureData):
    frame = data.rows("softmax")
    frame = frame[frame["impl"].map(is_ours).astype(bool)]
    if _ok(frame[frame["impl"] != "ours"]).empty:
        return "no correct rows of the forced softmax strategies (impl ours_<strategy>)"
    dtypes = [d for d in DTYPE_SHORT if d in set(frame["dtype"])]
    for ax, dtype in zip(_panels(fig, len(dtypes), sharey=True), dtypes):
        part = _ok(_largest_rows(frame[frame["dtype"] == dtype]))
        for i, (impl, rows) in enumerate(sorted(part.groupby("impl"))):
            rows = rows.sort_values("cols")
            style = dict(color="black", ls="--", lw=2) if impl == "ours" else dict(color=EXTRA_COLORS[i % 6], lw=1.3)
            ax.plot(rows["cols"], rows["tbps"], marker="o", ms=3, label=impl, **style)
        _ceiling_lines(ax, data.ceiling("copy_tbps"), None, "copy")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_title(f"{DTYPE_SHORT[dtype]}, {data.label}", fontsize=9)
        ax.set_xlabel("row length (columns)")
        ax.set_ylabel("TB/s")
        ax.legend(fontsize=6)
    return None


def launch_bound(fig, data: FigureData):
    studies = []
    for study in ("softmax", "decode", "attention"):
        frame = data.rows(study, timing=None)
        if not _ok(frame[frame["timing"] == "cudagraph"]).empty:
            studies.append((study, frame))
    if not studies:
        return "no CUDA-graph (cudagraph) rows: no case small enough to be launch-bound was measured"
    for ax, (study, frame) in zip(_panels(fig, len(studies)), studies):
        keys = ["dtype", *SHAPE_COLUMNS[study]]
        graphed = _ok(frame[frame["timing"] == "cudagraph"])
        impls = ["ours"] + [i for i in ("torch", "sdpa_flash") if i in set(graphed["impl"])]
        for impl in impls:
            g = graphed[graphed["impl"] == impl]
            e = _ok(frame[(frame["timing"] == "events") & (frame["impl"] == impl)])
            both = e.merge(g, on=keys, suffixes=("_e", "_g"))
            if both.empty:
                continue
            both["bytes"] = [study_work(study, {c: r[c] for c in SHAPE_COLUMNS[study]}, r["dtype"])[0]
                             or moved_bytes({"tbps": r["tbps_e"], "median_ms": r["median_ms_e"]}) for _, r in both.iterrows()]
            both = both.sort_values("bytes")
            ax.plot(both["bytes"], both["median_ms_e"] * 1e3, marker="o", ms=3, color=color(impl), label=f"{impl}, events")
            ax.plot(both["bytes"], both["median_ms_g"] * 1e3, marker="s", ms=3, ls="--", color=color(impl),
                    label=f"{impl}, CUDA graph")
        for name, style in (("launch_us", "-"), ("launch_graph_us", "--")):
            if data.ceiling(name):
                ax.axhline(data.ceiling(name), color="gray", ls=style, lw=0.8, label=f"{name} {data.ceiling(name):.2g}")
        _plain_log(ax, "x", "y")
        ax.set_xlabel("bytes moved")
        ax.set_ylabel("median time (us)")
        ax.set_title(f"{study}, {data.label}", fontsize=9)
        ax.legend(fontsize=6)
    return None


# ---------------------------------------------------------------- claims and cross-GPU

def claims(fig, data: FigureData):
    verdicts = [v for v in judge_all(data.agg.published, data.agg.results, [data.gpu] if data.gpu else None)
                if v.claimed_frac is not None and v.ours_frac is not None]
    if not verdicts:
        return "no published claim has a measurement of ours to set beside it (and a datasheet peak for both GPUs)"
    n = len(verdicts)
    ax = fig.subplots()
    fig.set_size_inches(8, 1.2 + 0.32 * n)
    ys = range(n)
    ax.barh([y + 0.2 for y in ys], [v.claimed_frac for v in verdicts], height=0.38, color="#aec7e8", label="published (their GPU)")
    ax.barh([y - 0.2 for y in ys], [v.ours_frac for v in verdicts], height=0.38, color="#d62728", label="ours (our GPU)")
    ax.set_yticks(list(ys))
    ax.set_yticklabels([f"{v.source[:3]} {v.impl} {v.shape} {DTYPE_SHORT.get(v.dtype, v.dtype)}\n{v.claim_gpu} / {v.ours_gpu}"
                        for v in verdicts], fontsize=6)
    ax.invert_yaxis()
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xlabel("fraction of own GPU's datasheet peak")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2)
    return None


def cross_gpu(fig, data: FigureData):
    records = []
    for study in ("softmax", "attention", "decode"):
        frame = data.agg.study(study)
        frame = frame[frame["timing"] == "events"]
        for gpu, part in frame.groupby("gpu"):
            table = comparisons(part, study)
            ours = table["ours_frac"].dropna()
            best = []
            for _, row in table.dropna(subset=["best_impl"]).iterrows():
                ceiling = data.agg.ceiling(gpu).get(ceiling_name(study, row["dtype"]) or "")
                if ceiling and pd.notna(row["best_metric"]):
                    best.append(row["best_metric"] / ceiling)
            if len(ours):
                records.append(dict(study=study, gpu=gpu, who="ours", med=ours.median(), lo=ours.min(), hi=ours.max()))
            if best:
                s = pd.Series(best)
                records.append(dict(study=study, gpu=gpu, who="best peer", med=s.median(), lo=s.min(), hi=s.max()))
    if not records:
        return "no GPU has rows of ours with a fraction of its measured ceiling"
    table = pd.DataFrame(records)
    studies = list(dict.fromkeys(table["study"]))
    for ax, study in zip(_panels(fig, len(studies), sharey=True), studies):
        part = table[table["study"] == study]
        gpus = sorted(set(part["gpu"]))
        for k, who in enumerate(("ours", "best peer")):
            sub = part[part["who"] == who].set_index("gpu").reindex(gpus)
            xs = [i + (k - 0.5) * 0.38 for i in range(len(gpus))]
            med, lo, hi = (sub[c].to_numpy(dtype=float) for c in ("med", "lo", "hi"))
            ax.bar(xs, med, width=0.36, color=color("ours") if who == "ours" else "#7f7f7f", label=who)
            ax.errorbar(xs, med, yerr=[med - lo, hi - med], fmt="none", ecolor="black", lw=0.8, capsize=2)
        ax.set_xticks(range(len(gpus)))
        ax.set_xticklabels(gpus, rotation=20, fontsize=7)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_title(study, fontsize=9)
        ax.set_ylabel("fraction of measured ceiling")
        ax.legend(fontsize=6)
    return None


# ---------------------------------------------------------------- attention and decode

def _memory_cutoff(data: FigureData, shape: dict, dtype: str, ns: list[int]) -> int | None:
    """The first N at which eager attention's analytic footprint exceeds the GPU's memory, when the
    attention study module provides memory_bytes (else None)."""
    try:
        from rooflab.studies import attention as module
        memory_bytes = module.memory_bytes
    except (ImportError, AttributeError):
        return None
    limit = data.memory_bytes
    if not limit:
        return None
    for n in sorted(ns):
        need = memory_bytes("eager", dict(shape, seqlen_q=n, seqlen_k=n), dtype)
        if need > limit:
            return n
    return None


def attention_tflops(fig, data: FigureData):
    frame = data.rows("attention")
    frame = frame[frame["seqlen_q"] == frame["seqlen_k"]]
    if _ok(frame).empty:
        return "no correct attention rows with seqlen_q = seqlen_k"
    dtype = "float16" if "float16" in set(frame["dtype"]) else sorted(set(frame["dtype"]))[0]
    frame = frame[frame["dtype"] == dtype]
    heads = frame.groupby(["batch", "heads_q", "heads_kv"]).size().idxmax()
    frame = frame[(frame["batch"] == heads[0]) & (frame["heads_q"] == heads[1]) & (frame["heads_kv"] == heads[2])]
    panels = [(d, c) for d in sorted(set(frame["head_dim"])) for c in (True, False)
              if not frame[(frame["head_dim"] == d) & (frame["causal"] == c)].empty]
    for ax, (d, causal) in zip(_panels(fig, len(panels), sharey=True), panels):
        part = frame[(frame["head_dim"] == d) & (frame["causal"] == causal)]
        _impl_lines(ax, part, "seqlen_q", "tflops")
        oom = part[part["status"] == "oom"]
        for k, (_, row) in enumerate(oom.iterrows()):
            ax.plot(row["seqlen_q"], 0, marker="v", color=color(row["impl"]), ms=8, ls="none", clip_on=False,
                    label=f"OOM ({row['impl']})" if k == 0 or row["impl"] != oom.iloc[k - 1]["impl"] else None)
        _mark_failed(ax, part, "seqlen_q", set())
        shape = dict(batch=int(heads[0]), heads_q=int(heads[1]), heads_kv=int(heads[2]), head_dim=int(d), causal=bool(causal))
        cutoff = _memory_cutoff(data, shape, dtype, sorted(int(n) for n in part["seqlen_q"]))
        if cutoff:
            ax.axvline(cutoff, color="gray", ls=":", lw=1, label="eager exceeds memory")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_title(f"D={d}, {'causal' if causal else 'non-causal'}, B={heads[0]} Hq={heads[1]} Hkv={heads[2]}, "
                     f"{DTYPE_SHORT.get(dtype, dtype)}", fontsize=8)
        ax.set_xlabel("sequence length N")
        ax.set_ylabel("TFLOP/s")
        ax.legend(fontsize=6)
    return None


def _decode_frame(data: FigureData) -> pd.DataFrame:
    frame = data.rows("decode")
    frame = frame[frame["ragged"] == False]  # noqa: E712  (object column of bools)
    if frame.empty:
        return frame
    dtype = "float16" if "float16" in set(frame["dtype"]) else sorted(set(frame["dtype"]))[0]
    frame = frame[frame["dtype"] == dtype]
    heads = frame.groupby(["heads_q", "heads_kv", "head_dim"]).size().idxmax()
    return frame[(frame["heads_q"] == heads[0]) & (frame["heads_kv"] == heads[1]) & (frame["head_dim"] == heads[2])]


def decode_bandwidth(fig, data: FigureData):
    frame = _decode_frame(data)
    if _ok(frame).empty:
        return "no correct decode rows (non-ragged, events timing)"
    batches = sorted(set(frame["batch"]))
    for ax, b in zip(_panels(fig, len(batches), sharey=True), batches):
        part = frame[frame["batch"] == b]
        _impl_lines(ax, part, "cache_len", "tbps")
        _mark_failed(ax, part, "cache_len", set())
        _ceiling_lines(ax, data.ceiling("read_tbps"), data.ceiling("datasheet_bandwidth_tbps"), "read")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        row = part.iloc[0]
        ax.set_title(f"B={b}, Hq={row['heads_q']} Hkv={row['heads_kv']} D={row['head_dim']}, "
                     f"{DTYPE_SHORT.get(row['dtype'], row['dtype'])}", fontsize=8)
        ax.set_xlabel("cached tokens L")
        ax.set_ylabel("TB/s")
        ax.legend(fontsize=6)
    return None


def decode_split(fig, data: FigureData):
    frame = _ok(_decode_frame(data))
    keys = ["batch", "heads_q", "heads_kv", "cache_len", "head_dim", "dtype"]
    split = frame[frame["impl"] == "ours"].merge(frame[frame["impl"] == "ours_nosplit"], on=keys, suffixes=("", "_nosplit"))
    if split.empty:
        return "no decode shape with correct rows of both ours and ours_nosplit"
    ax = fig.subplots()
    fig.set_size_inches(6.5, 4)
    for i, (b, rows) in enumerate(split.groupby("batch")):
        rows = rows.sort_values("cache_len")
        ax.plot(rows["cache_len"], rows["median_ms_nosplit"] / rows["median_ms"], marker="o", color=EXTRA_COLORS[i % 6],
                label=f"B={b}")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xscale("log", base=2)
    _plain_log(ax, "y")
    ax.set_xlabel("cached tokens L")
    ax.set_ylabel("time without split / time with split")
    ax.set_title(f"split-KV decode, {data.label}", fontsize=9)
    ax.legend(fontsize=7)
    return None


def roofline(fig, data: FigureData):
    points = []
    for study in ("attention", "decode"):
        frame = _ok(data.rows(study))
        for _, row in frame.iterrows():
            ai = intensity(row, study)
            if ai and pd.notna(row["tflops"]):
                points.append((study, row["impl"], ai, float(row["tflops"])))
    bw = data.ceiling("read_tbps")
    peak = data.ceiling("matmul_fp16_tflops")
    if not points:
        return "no attention or decode rows with a FLOP rate (tflops) and a known arithmetic intensity"
    ax = fig.subplots()
    fig.set_size_inches(7, 4.5)
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
        label = f"{study}, {'ours' if key[1] else 'peers'}" if key not in seen else None
        seen.add(key)
        ax.scatter(ai, tf, marker=styles[study], s=16 if key[1] else 10, alpha=0.9 if key[1] else 0.35,
                   color=color("ours") if key[1] else "#1f77b4", label=label)
    _plain_log(ax, "x", "y")
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attained TFLOP/s")
    ax.set_title(f"roofline, {data.label}", fontsize=9)
    ax.legend(fontsize=6)
    return None


def e2e_breakdown(fig, data: FigureData):
    frame = data.rows("e2e")
    frame = frame[frame["median_ms"].notna() & frame["status"].isin(["ok", "incorrect"])]
    parts = frame[frame["part"] != "total"]
    if parts.empty:
        return "no end-to-end rows with a per-part time"
    phases = [p for p in ("prefill", "decode") if p in set(parts["phase"])] or sorted(set(parts["phase"]))
    for ax, phase in zip(_panels(fig, len(phases)), phases):
        sub = parts[parts["phase"] == phase]
        length = "seqlen" if phase == "prefill" else "cache_len"
        groups = sorted(sub.groupby([length, "impl"]).groups)
        for x, (n, impl) in enumerate(groups):
            rows = sub[(sub[length] == n) & (sub["impl"] == impl)].set_index("part")["median_ms"]
            bottom = 0.0
            bad = (sub[(sub[length] == n) & (sub["impl"] == impl)]["status"] == "incorrect").any()
            for part, colour in PART_COLORS.items():
                if part in rows and pd.notna(rows[part]):
                    ax.bar(x, rows[part], bottom=bottom, color=colour, hatch="//" if bad else None,
                           label=part if x == 0 else None)
                    bottom += rows[part]
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{impl}\n{length}={n}" for n, impl in groups], rotation=35, fontsize=6, ha="right")
        ax.set_ylabel("GPU time per block (ms)")
        ax.set_title(f"{phase}, {data.label}", fontsize=9)
        ax.legend(fontsize=6)
    return None


DRAW = {
    "softmax_bandwidth": softmax_bandwidth, "softmax_speedup": softmax_speedup,
    "softmax_strategies": softmax_strategies, "launch_bound": launch_bound, "claims": claims,
    "attention_tflops": attention_tflops, "decode_bandwidth": decode_bandwidth, "decode_split": decode_split,
    "roofline": roofline, "cross_gpu": cross_gpu, "e2e_breakdown": e2e_breakdown,
}
assert set(DRAW) == set(FIGURES), "every catalogued figure needs a draw function"


def _placeholder(fig, name: str, reason: str) -> None:
    fig.clear()
    fig.set_size_inches(6, 2.2)
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, f"{name}: not drawn\n{reason}", ha="center", va="center", wrap=True, fontsize=10)


def render_all(agg: Aggregate, out_dir: str | Path, fresh_slug: str | None = None, names=None) -> list[dict]:
    """Write <name>.png and <name>.pdf for every figure (a stated placeholder when data are missing)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = FigureData(agg, primary_gpu(agg.results, fresh_slug))
    index = []
    for name in names or FIGURES:
        study, category, caption = FIGURES[name]
        fig = plt.figure()
        try:
            reason = DRAW[name](fig, data)
        except Exception as exc:  # a figure must never take the report down: say what broke instead
            traceback.print_exc()
            reason = f"drawing failed: {type(exc).__name__}: {exc}"
        if reason:
            _placeholder(fig, name, reason)
        else:
            fig.tight_layout()
        for ext in ("png", "pdf"):
            fig.savefig(out_dir / f"{name}.{ext}", dpi=150, metadata={"CreationDate": None} if ext == "pdf" else None)
        plt.close(fig)
        index.append(dict(name=name, study=study, category=category, caption=caption, gpu=data.gpu,
                          drawn=reason is None, reason=reason, png=f"{name}.png", pdf=f"{name}.pdf"))
    (out_dir / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    return index
