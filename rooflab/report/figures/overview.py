"""Figures across studies: the roofline, plain call against kernel time, the claims, each GPU against its
own ceilings, and a fresh run against the committed one."""
from __future__ import annotations

import pandas as pd

from rooflab import datasheet
from rooflab.report.analysis import KERNEL_TIMING, PLAIN_TIMING
from rooflab.report.derive import select
from rooflab.report.figures.inputs import FigureData
from rooflab.report.figures.style import (DTYPE_SHORT, bytes_axis, color, legend_below, ok, panels, plain_log, top)
from rooflab.report.fmt import label
from rooflab.schema import HOST_TIMING, SHAPE_COLUMNS

def roofline(fig, data: FigureData):
    """One panel per dtype: every implementation's attention and decode rows (plain calls) at their FLOP/byte,
    each implementation its own colour, under the read-bandwidth slope and the matmul roof of that dtype."""
    points = []
    for study in ("attention", "decode"):
        frame = ok(data.rows(study))
        frame = frame[frame["tflops"].notna() & frame["flops"].notna() & (frame["bytes"] > 0)]
        points.append(frame.assign(study=study, intensity=frame["flops"] / frame["bytes"]))
    points = pd.concat(points, ignore_index=True)
    if points.empty:
        return "no attention or decode rows with a FLOP rate and their FLOP and byte counts"
    dtypes = [d for d in ("float16", "bfloat16") if d in set(points["dtype"])]
    _, bw = data.ceiling_of(points[points["study"] == "decode"])       # the bandwidth decode rows are judged on
    lo, hi = points["intensity"].min() / 4, points["intensity"].max() * 4
    xs = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    axes = panels(fig, len(dtypes), sharey=True, width=5.0, height=4.0)
    impls = sorted(set(points["impl"]), key=lambda i: (i != "ours", i))
    for ax, dtype in zip(axes, dtypes):
        _, peak = data.ceiling_of(points[(points["study"] == "attention") & (points["dtype"] == dtype)])
        if bw and peak:
            ax.plot(xs, [min(peak, bw * x) for x in xs], color="black", lw=1.2, label="measured roof of the panel's dtype")
            ax.text(xs[-1], peak * 1.08, f"{DTYPE_SHORT[dtype]} matmul {peak:.3g} TFLOP/s", ha="right", fontsize=7)
            ax.text(xs[0] * 1.5, bw * xs[0] * 1.5 * 1.6, f"read {bw:.3g} TB/s", rotation=38, fontsize=7)
        part = points[points["dtype"] == dtype]
        for k, impl in enumerate(impls):
            for study, marker in (("attention", "o"), ("decode", "s")):
                rows = part[(part["impl"] == impl) & (part["study"] == study)]
                ax.scatter(rows["intensity"], rows["tflops"], marker=marker, s=18 if impl == "ours" else 12,
                           color=color(impl, k), alpha=0.9, zorder=3 if impl == "ours" else 2,
                           label=label(impl))
        plain_log(ax, "x", "y")
        ax.set_xlabel("arithmetic intensity (FLOP / byte)")
        ax.set_ylabel("attained TFLOP/s")
        ax.set_title(DTYPE_SHORT[dtype], fontsize=9)
    fig.suptitle(f"roofline, plain calls, {data.label} (circles: prefill attention; squares: decode)", fontsize=10)
    legend_below(fig, axes, ncol=4)
    return None


LAUNCH_PEER = {"softmax": "torch", "decode": "sdpa_cudnn", "attention": "sdpa_flash"}


def launch_bound(fig, data: FigureData):
    studies = []
    for study in ("softmax", "decode", "attention"):
        frame = data.rows(study, timing=None)
        if not ok(frame[frame["timing"] == KERNEL_TIMING]).empty:
            studies.append((study, frame))
    if not studies:
        return "no kernel-time (cupti) rows: no case small or short enough for them was measured"
    axes = panels(fig, len(studies), width=4.8, height=3.6)
    for ax, (study, frame) in zip(axes, studies):
        keys = ["dtype", *SHAPE_COLUMNS[study]]
        graphed = ok(frame[frame["timing"] == KERNEL_TIMING])
        impls = ["ours"] + [i for i in (LAUNCH_PEER[study],) if i in set(graphed["impl"])]
        for impl in impls:
            g = graphed[graphed["impl"] == impl]
            e = ok(frame[(frame["timing"] == PLAIN_TIMING) & (frame["impl"] == impl)])
            both = e.merge(g, on=keys, suffixes=("_e", "_g"))
            if both.empty:
                continue
            ax.scatter(both["bytes_e"], both["median_ms_e"] * 1e3, marker="o", s=22, facecolors="none",
                       edgecolors=color(impl), label=f"{label(impl)}, plain call (events)")
            ax.scatter(both["bytes_e"], both["median_ms_g"] * 1e3, marker="s", s=18, color=color(impl),
                       label=f"{label(impl)}, kernel alone (CUPTI)")
            host = e.merge(ok(frame[(frame["timing"] == HOST_TIMING) & (frame["impl"] == impl)]), on=keys,
                           suffixes=("_e", "_h"))
            if not host.empty:
                ax.scatter(host["bytes_e"], host["median_ms_h"] * 1e3, marker="x", s=20, color=color(impl),
                           label=f"{label(impl)}, host time of the call")
        for name, style, what in (("launch_us", "-", "empty Triton launch, JIT"),
                                  ("launch_graph_us", "--", "empty kernel, graph node")):
            if data.ceiling(name):
                ax.axhline(data.ceiling(name), color="gray", ls=style, lw=0.9, label=f"{what} ({data.ceiling(name):.2g} us)")
        bytes_axis(ax, [b for coll in ax.collections for b in coll.get_offsets()[:, 0]])
        plain_log(ax, "y")
        ax.set_xlabel("bytes moved")
        ax.set_ylabel("median time per call (us)")
        ax.set_title(f"{study}", fontsize=9)
    fig.suptitle(f"plain call against the kernel alone, {data.label}", fontsize=10)
    legend_below(fig, axes, ncol=3)
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
    legend_below(fig, list(axes), ncol=1)
    return None


def cross_gpu(fig, data: FigureData):
    records = []
    for study in ("softmax", "attention", "decode"):
        for gpu in sorted(set(data.tables["comparisons"]["gpu"])):
            table = select(data.tables["comparisons"], study, "peer", gpu)
            ours = table["ours_frac_plain"].dropna()
            best = list(table["best_frac_plain"].dropna())     # the best peer of each case, its plain calls
            if len(ours):
                records.append(dict(study=study, gpu=gpu, who="ours", med=ours.median(), lo=ours.min(), hi=ours.max()))
            if best:
                s = pd.Series(best)
                records.append(dict(study=study, gpu=gpu, who="best peer", med=s.median(), lo=s.min(), hi=s.max()))
    if not records:
        return "no GPU has rows of ours with a fraction of its measured ceiling"
    table = pd.DataFrame(records)
    studies = list(dict.fromkeys(table["study"]))
    axes = panels(fig, len(studies), sharey=True, width=3.6, height=3.2)
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
        ax.set_ylim(0, top(table["hi"], 1.0))
        ax.set_title(study, fontsize=9)
        ax.set_ylabel("fraction of measured ceiling")
    legend_below(fig, axes, ncol=3)
    return None


# ---------------------------------------------------------------- attention and decode


def reproduction(fig, data: FigureData):
    """rooflab.reproduce.draw over each GPU's reproduction.csv, the paper's GPU first: a panel a GPU."""
    from rooflab import reproduce

    gpus = [g for g in data.agg.lead_first(data.gpu) if data.agg.has_record(g, "reproduction.csv")]
    if not gpus:
        return (f"no reproduction.csv for {data.gpu}: no fresh run was compared with the committed one"
                if data.gpu else "no GPU results, so no reproduction record")
    frames = {g: data.agg.reproduction[data.agg.reproduction["gpu"] == g].drop(columns=["gpu"]) for g in gpus}
    drawn = [g for g in gpus if frames[g]["verdict"].isin(("reproduced", "faster", "slower")).any()]
    if not drawn:
        return f"the reproduction.csv of {', '.join(gpus)} has no case measured in both runs"
    axes = panels(fig, len(drawn), width=5.0, height=4.6)
    for ax, gpu in zip(axes, drawn):
        reproduce.draw(frames[gpu], ax)
        ax.set_title(f"fresh against committed run, {data.label_of(gpu)}", fontsize=9)
    return None
