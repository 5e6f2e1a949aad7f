"""Attention figure: TFLOP/s against sequence length per head dimension and mask, with the matmul ceiling;
grouped-query and Nq != Nk shapes in a panel of their own."""
from __future__ import annotations

import pandas as pd

from rooflab.report.analysis import is_seed
from rooflab.report.figures.inputs import FigureData
from rooflab.report.figures.style import (DTYPE_SHORT, color, impl_lines, legend_below, mark_failed, ok, panels,
                                          pow2_axis, top)
from rooflab.report.fmt import label

SHOWN = ("ours", "sdpa_cudnn", "sdpa_flash", "seed_attention", "sdpa_efficient", "eager")


def _order(impl: str) -> tuple:
    return (SHOWN.index(impl) if impl in SHOWN else len(SHOWN), impl)


def _short(case) -> str:
    """'Hkv=8/32\nN=8192\nD=128\ncausal': what sets a shape apart (KV heads / query heads, lengths, head
    dimension, mask), on short lines that fit a bar group."""
    heads = f"Hkv={case['heads_kv']}/{case['heads_q']}"
    length = f"N={case['seqlen_q']}" if case["seqlen_q"] == case["seqlen_k"] else f"Nq={case['seqlen_q']}\nNk={case['seqlen_k']}"
    return f"{heads}\n{length}\nD={case['head_dim']}\n{'causal' if case['causal'] else 'non-causal'}"


def _others(ax, frame: pd.DataFrame, highest: float) -> None:
    """Grouped bars, one group per shape outside the sweeps over N (grouped-query, Nq != Nk, a single N)."""
    cases = frame.drop_duplicates(["batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal"])
    impls = sorted(set(frame["impl"]), key=_order)
    width = 0.8 / max(len(impls), 1)
    for k, impl in enumerate(impls):
        xs, ys = [], []
        for x, (_, case) in enumerate(cases.iterrows()):
            row = ok(frame[(frame["impl"] == impl) & (frame["head_dim"] == case["head_dim"])
                           & (frame["heads_kv"] == case["heads_kv"]) & (frame["seqlen_q"] == case["seqlen_q"])
                           & (frame["seqlen_k"] == case["seqlen_k"]) & (frame["causal"] == case["causal"])])
            if not row.empty:
                xs.append(x - 0.4 + width * (k + 0.5))
                ys.append(float(row["tflops"].iloc[0]))
        ax.bar(xs, ys, width=width, color=color(impl, k), label=label(impl), hatch="//" if is_seed(impl) else None)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([_short(c) for _, c in cases.iterrows()], fontsize=6)
    ax.set_ylim(0, highest)
    ax.set_title("other shapes: grouped-query (Hkv/Hq heads), Nq != Nk, one N", fontsize=9)


def tflops(fig, data: FigureData):
    frame = data.cases("attention")
    if ok(frame).empty:
        return "no correct attention rows"
    dtype = "float16" if "float16" in set(frame["dtype"]) else sorted(set(frame["dtype"]))[0]
    frame = frame[frame["dtype"] == dtype]
    heads = frame.groupby(["batch", "heads_q", "heads_kv"]).size().idxmax()
    main = (frame["batch"] == heads[0]) & (frame["heads_q"] == heads[1]) & (frame["heads_kv"] == heads[2]) \
        & (frame["seqlen_q"] == frame["seqlen_k"])
    sweeps = frame[main].groupby(["head_dim", "causal"])["seqlen_q"].nunique()
    keys = [k for k, n in sweeps.items() if n >= 2]
    in_sweep = main & pd.Series([(d, c) in keys for d, c in zip(frame["head_dim"], frame["causal"])], index=frame.index)
    others = frame[~in_sweep]
    _, roof = data.ceiling_of(frame)
    highest = top(ok(frame)["tflops"], roof)
    axes = panels(fig, len(keys) + (not others.empty), sharey=True, width=4.0, height=3.1)
    for ax, (d, causal) in zip(axes, keys):
        part = frame[in_sweep & (frame["head_dim"] == d) & (frame["causal"] == causal)]
        impl_lines(ax, part, "seqlen_q", "tflops")
        for _, row in part[part["status"] == "oom"].iterrows():
            ax.plot(row["seqlen_q"], 0, marker="v", color=color(row["impl"]), ms=8, ls="none", clip_on=False,
                    label=f"out of memory ({label(row['impl'])})")
        mark_failed(ax, part, "seqlen_q", set())
        pow2_axis(ax, sorted({int(n) for n in part["seqlen_q"]}))
        ax.set_ylim(0, highest)
        ax.set_title(f"D={d}, {'causal' if causal else 'non-causal'}", fontsize=9)
        ax.set_xlabel("sequence length N = Nq = Nk")
        ax.set_ylabel("TFLOP/s (causal FLOPs halved)")
    if not others.empty:
        _others(axes[-1], others, highest)
    for ax in axes:
        if roof:
            ax.axhline(roof, color="black", lw=1.2, label=f"measured {DTYPE_SHORT.get(dtype, dtype)} matmul ceiling ({roof:.3g})")
    fig.suptitle(f"attention forward, B={heads[0]} Hq={heads[1]} Hkv={heads[2]} unless marked, "
                 f"{DTYPE_SHORT.get(dtype, dtype)}, {data.label}", fontsize=10)
    legend_below(fig, axes, ncol=4)
    return None
