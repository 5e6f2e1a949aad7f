"""The measured studies (softmax, attention, decode): their summaries, per-shape tables (Appendix A), the
softmax strategies and the attention table by head dimension, mask and length; and each GPU against its own
ceilings. Every comparison is read from the derived table (rooflab.report.derive)."""
from __future__ import annotations

import pandas as pd

from rooflab import datasheet
from rooflab.report import headline
from rooflab.report.analysis import (KERNEL_TIMING, LAUNCH_BOUND_BYTES, LOSS, METRIC, PLAIN_TIMING, TIE, TIE_WITHIN,
                                     UNIT, bootstrap_geomean, counts, is_ours, is_peer, is_seed, shape_label)
from rooflab.report.derive import select
from rooflab.report.fmt import DASH, dt, label, listing, megabytes, num, pct, ratio
from rooflab.report.fmt import missing as _missing
from rooflab.report.load import Aggregate
from rooflab.report.markup import Strong, Table
from rooflab.schema import SHAPE_COLUMNS
from rooflab.report.views.environment import CEILING_LABELS, status_counts


STUDY_TITLES = {"softmax": "Softmax", "attention": "Attention (prefill)", "decode": "Decode attention",
                "e2e": "End-to-end decoder block"}
KERNEL_MARK = " [kernel]"      # a table row whose values are the kernel's device time (CUPTI)
DISPATCH_CLOSE = 0.95          # the dispatched softmax counts as matching the fastest forced strategy from here
DISPATCH_MISS = 0.80           # the floor the paper checks every shape against


def _rank(table: pd.DataFrame, col: str, best: bool) -> dict | None:
    part = table.dropna(subset=[col])
    if part.empty:
        return None
    row = part.loc[part[col].idxmax() if best else part[col].idxmin()]
    return {"ratio": ratio(row[col]), "shape": row["shape"], "dtype": dt(row["dtype"]), "peer": row.get("best_impl") or DASH,
            "kernel": row["timing"] == KERNEL_TIMING, "outcome": row[f"{col}_outcome"],
            "interval": headline.ratio_interval(row[f"{col}_low"], row[f"{col}_high"])}


def _impl_order(impl: str) -> tuple:
    """ours first, then our forced strategies, the peers, the seeds' designs."""
    return (impl != "ours", not is_ours(impl), is_seed(impl), impl)


def _gm(table: pd.DataFrame, col: str = "vs_best") -> tuple[str, str]:
    """('1.05x', '[1.01x, 1.09x]'): a selection's geometric mean and its bootstrap interval over the shapes."""
    gm, low, high = bootstrap_geomean(table[col])
    return ratio(gm), headline.ratio_interval(low, high)


def _impl_table(cases: pd.DataFrame, cmp: pd.DataFrame, study: str, dtype: str, caption: str) -> Table:
    """Rows: shapes, each in the timing that judges it (the derived `cases`); columns: each
    implementation's metric (or its failure), then ours / best peer and ours / best seed design."""
    metric = METRIC[study]
    part = cases[cases["dtype"] == dtype]
    impls = sorted(set(part["impl"]), key=_impl_order)
    keys = list(SHAPE_COLUMNS[study])
    peers = select(cmp, study, "peer").query("dtype == @dtype").set_index(keys)
    has_seeds = any(is_seed(i) for i in impls)
    seeds = select(cmp, study, "seed").query("dtype == @dtype").set_index(keys) if has_seeds else None
    rows, kernel_rows = [], False
    for key, group in part.groupby(keys, sort=True):
        cells = {r["impl"]: num(r[metric]) if r["status"] == "ok" and not _missing(r[metric]) else r["status"]
                 for _, r in group.iterrows()}
        key = key if isinstance(key, tuple) else (key,)
        kernel = (group["timing"] == KERNEL_TIMING).any()
        kernel_rows |= bool(kernel)
        row = [shape_label(group.iloc[0], study) + (KERNEL_MARK if kernel else "")] + [cells.get(i, DASH) for i in impls]
        row.append(_versus_cell(peers.loc[key]) if key in peers.index else DASH)
        if has_seeds:
            row.append(_versus_cell(seeds.loc[key]) if key in seeds.index else DASH)
        rows.append(row)
    note = (f" Shapes marked{KERNEL_MARK} are small or short enough that a plain call times the host as well: "
            "their values are the kernel's device time (CUPTI), L2 flushed before each call.") if kernel_rows else ""
    columns = ["shape"] + impls + ["ours / best peer"] + (["ours / best seed"] if has_seeds else [])
    tallied = headline.outcome_text(counts(peers["vs_best_outcome"].dropna())) if len(peers) else DASH
    return Table(columns=columns, rows=rows,
                 caption=f"{caption} ({UNIT[metric]}, {dt(dtype)}; failures named by status). Ours / best: the "
                         "fastest one's median time over ours with its interval from both rows' 95% confidence "
                         f"intervals, and the outcome for ours (against the best peer: {tallied}).{note}",
                 align=["p{2.1cm}" if study == "softmax" else "p{3.2cm}"] + ["r"] * (len(columns) - 1))


def _versus_cell(r) -> str:
    """'0.91x [0.90x, 0.92x] loss' for one row of a comparisons table."""
    if _missing(r["vs_best"]):
        return DASH
    return f"{ratio(r['vs_best'])} [{float(r['vs_best_low']):.2f}, {float(r['vs_best_high']):.2f}] {r['vs_best_outcome']}"


def _losses(table: pd.DataFrame, unit: str, which: str = LOSS) -> list[dict]:
    """The rows of a comparisons table whose outcome for ours is `which` (a loss or a tie), worst first."""
    out = []
    for _, r in table.dropna(subset=["vs_best"]).sort_values("vs_best").iterrows():
        if r["vs_best_outcome"] != which:
            continue
        out.append({"shape": r["shape"], "dtype": dt(r["dtype"]), "ours": num(r["ours_metric"]), "unit": unit,
                    "peer": r["best_impl"], "peer_value": num(r["best_metric"]), "ratio": ratio(r["vs_best"]),
                    "interval": headline.ratio_interval(r["vs_best_low"], r["vs_best_high"]),
                    "kernel": r["timing"] == KERNEL_TIMING})
    return out


def _loss_line(loss: dict) -> str:
    timing = ", kernel time" if loss["kernel"] else ""
    return (f"{loss['shape']}, {loss['dtype']}{timing}: ours {loss['ours']} {loss['unit']}, {loss['peer']} "
            f"{loss['peer_value']} {loss['unit']} (ours at {loss['ratio']} {loss['interval']} of it)")


def study_view(agg: Aggregate, tables: dict, study: str, gpu: str | None) -> dict:
    frame = agg.study(study)
    view = {"name": study, "title": STUDY_TITLES[study], "gpus": sorted(set(frame["gpu"])),
            "has_rows": not frame.empty, "rows": 0}
    frame = frame[frame["gpu"] == gpu]
    view.update(rows=len(frame), counts=status_counts(frame) if len(frame) else {}, here=not frame.empty)
    if frame.empty:
        return view
    metric = METRIC[study]
    ours_rows = frame[frame["impl"] == "ours"]
    view["incorrect"] = [{"impl": r["impl"], "shape": shape_label(r, study), "dtype": dt(r["dtype"]),
                          "message": r["message"] or ""} for _, r in frame[frame["status"] == "incorrect"].iterrows()]
    view["failed"] = [{"impl": r["impl"], "shape": shape_label(r, study), "dtype": dt(r["dtype"]), "status": r["status"],
                       "message": (r["message"] or "")[:160]}
                      for _, r in frame[frame["status"].isin(["error", "oom"])].iterrows()]
    if metric is None:
        return view
    cmp = tables["comparisons"][tables["comparisons"]["gpu"] == gpu]
    cases = tables["cases"][(tables["cases"]["gpu"] == gpu) & (tables["cases"]["study"] == study)]
    table = select(cmp, study, "peer")
    seeds = select(cmp, study, "seed")
    baseline = select(cmp, study, "torch") if study == "softmax" else table.iloc[0:0]
    unit = UNIT[metric]
    threshold = LAUNCH_BOUND_BYTES
    view.update(
        unit=unit, threshold=megabytes(threshold),
        dtypes=[dt(d) for d in sorted(set(frame["dtype"]))], impls=sorted(set(frame["impl"]), key=_impl_order),
        peers=sorted({i for i in frame["impl"] if is_peer(i)}), seeds=sorted({i for i in frame["impl"] if is_seed(i)}),
        peers_text=listing(sorted({i for i in frame["impl"] if is_peer(i)})),
        gm_best=_gm(table)[0], gm_best_interval=_gm(table)[1],
        gm_baseline=_gm(baseline)[0], gm_baseline_interval=_gm(baseline)[1],
        baseline_outcomes=headline.outcome_text(counts(baseline["vs_best_outcome"])),
        has_baseline=bool(baseline["vs_best"].notna().any()),
        n_kernel=int((table["timing"] == KERNEL_TIMING).sum()),
        best=_rank(table, "vs_best", True), worst=_rank(table, "vs_best", False),
        compared=int(table["vs_best"].notna().sum()), outcomes=headline.outcome_text(counts(table["vs_best_outcome"])),
        tie_within=f"{TIE_WITHIN:.0%}",
        losses=[_loss_line(x) for x in _losses(table, unit)], ties=[_loss_line(x) for x in _losses(table, unit, TIE)],
        seed_tally=headline.tally(seeds), seed_losses=[_loss_line(x) for x in _losses(seeds, unit)],
        ours_not_ok=int((ours_rows["status"] != "ok").sum()),
        tables=[_impl_table(cases, cmp, study, d, f"{STUDY_TITLES[study]} on {gpu}") for d in sorted(set(frame["dtype"]))],
    )
    top = table.dropna(subset=["ours_frac_plain"])      # shares of a DRAM ceiling only from plain-call rows
    if not top.empty:
        r = top.loc[top["ours_frac_plain"].idxmax()]
        view["max_frac"] = {"frac": pct(r["ours_frac_plain"]), "value": num(r["ours_metric"]), "shape": r["shape"],
                            "dtype": dt(r["dtype"]), "ceiling": CEILING_LABELS.get(str(r["ceiling_name"]), "")}
    ceilings = agg.ceiling(gpu)
    view["headline"] = {"softmax": lambda: headline.softmax(cmp, frame, threshold, ceilings),
                        "attention": lambda: headline.attention(cmp, frame),
                        "decode": lambda: headline.decode(cmp, frame, ceilings)}[study]()
    if study == "softmax":
        view.update(_softmax_extra(frame, cases, ceilings, threshold))
    if study == "attention":
        view.update(_attention_extra(frame), grid=attention_grid(cases))
    return view


def _softmax_extra(frame: pd.DataFrame, cases: pd.DataFrame, ceilings: dict, threshold: float) -> dict:
    cases = cases[cases["impl"].map(is_ours).astype(bool)]
    strategies = sorted(i for i in set(cases["impl"]) if i != "ours")
    rows, outside, close, compared = [], [], 0, 0
    for (dtype, r_, c_), group in cases.groupby(["dtype", "rows", "cols"], sort=True):
        ok = group[(group["status"] == "ok") & group["impl"].isin(strategies)]
        cells = {g["impl"]: num(g["tbps"]) if g["status"] == "ok" else g["status"] for _, g in group.iterrows()}
        win = ok.loc[ok["tbps"].idxmax()] if not ok.empty else None
        mine = group[(group["impl"] == "ours") & (group["status"] == "ok")]
        eff = float(mine["tbps"].iloc[0]) / float(win["tbps"]) if win is not None and not mine.empty else None
        kernel = (group["timing"] == KERNEL_TIMING).any()
        shape = f"rows={r_} cols={c_}"
        rows.append([shape + (KERNEL_MARK if kernel else ""), dt(dtype)] + [cells.get(s, DASH) for s in strategies]
                    + [cells.get("ours", DASH), win["impl"] if win is not None else DASH, pct(eff)])
        if eff is not None:
            compared += 1
            close += eff >= DISPATCH_CLOSE
            if eff < DISPATCH_CLOSE:
                outside.append((eff, f"{shape}, {dt(dtype)}{', kernel time' if kernel else ''}: dispatched "
                                     f"{num(mine['tbps'].iloc[0])} TB/s, {win['impl']} {num(win['tbps'])} TB/s ({eff:.1%})"))
    strategy_table = Table(columns=["shape", "dtype"] + strategies + ["ours", "fastest strategy", "ours / fastest"],
                           rows=rows, caption="Each softmax strategy forced on its own (TB/s) and the dispatched kernel"
                                              f"; shapes marked{KERNEL_MARK} in kernel time (CUPTI).",
                           align=["p{2.6cm}", "l"] + ["r"] * (len(strategies) + 1) + ["l", "r"]) if strategies else None
    kernel = frame[frame["timing"] == KERNEL_TIMING]
    launch_rows = []
    for _, g in kernel[kernel["status"] == "ok"].iterrows():
        e = frame[(frame["timing"] == PLAIN_TIMING) & (frame["impl"] == g["impl"]) & (frame["dtype"] == g["dtype"])
                  & (frame["rows"] == g["rows"]) & (frame["cols"] == g["cols"]) & (frame["status"] == "ok")]
        if g["impl"] in ("ours", "torch") and not e.empty and (e.iloc[0]["bytes"] or 0) < threshold:
            launch_rows.append([g["impl"], shape_label(g, "softmax"), dt(g["dtype"]), num(e["median_ms"].iloc[0] * 1e3),
                                num(g["median_ms"] * 1e3), ratio(e["median_ms"].iloc[0] / g["median_ms"])])
    launch = Table(columns=["impl", "shape", "dtype", "plain call (us)", "kernel (us)", "call / kernel"], rows=launch_rows,
                   caption="Launch-bound shapes: a plain call timed with CUDA events against the kernel's device "
                           "time from CUPTI, both L2 flushed.",
                   align=["l", "l", "l", "r", "r", "r"]) if launch_rows else None
    return {"strategies": strategies, "strategy_names": [f"{s} ({label(s).split(', ', 1)[-1]})" for s in strategies],
            "strategy_table": strategy_table, "dispatch_close": close,
            "close_pct": pct(1 - DISPATCH_CLOSE), "miss_pct": pct(DISPATCH_MISS),
            "dispatch_compared": compared, "dispatch_outside": [m for _, m in sorted(outside)],
            "dispatch_floor_ok": all(eff >= DISPATCH_MISS for eff, _ in outside), "launch_table": launch,
            "launch_us": num(ceilings.get("launch_us")), "launch_graph_us": num(ceilings.get("launch_graph_us"))}


def attention_grid(cases: pd.DataFrame) -> Table | None:
    """TFLOP/s over head dimension x mask x sequence length, one line per implementation (FlashAttention-3's
    table layout), square sequences of the most measured (B, Hq, Hkv) in fp16 (else the first dtype), the
    best correct value of each column of each block in bold."""
    square = cases[(cases["seqlen_q"] == cases["seqlen_k"])]
    if square.empty:
        return None
    dtype = "float16" if "float16" in set(square["dtype"]) else sorted(set(square["dtype"]))[0]
    square = square[square["dtype"] == dtype]
    heads = square.groupby(["batch", "heads_q", "heads_kv"]).size().idxmax()
    square = square[(square["batch"] == heads[0]) & (square["heads_q"] == heads[1]) & (square["heads_kv"] == heads[2])]
    lengths = sorted({int(n) for n in square["seqlen_q"]})
    rows = []
    for (d, causal), block in square.groupby(["head_dim", "causal"], sort=True):
        ok = block[block["status"] == "ok"]
        best = ok.groupby("seqlen_q")["tflops"].max()
        for impl in sorted(set(block["impl"]), key=_impl_order):
            line = block[block["impl"] == impl].set_index("seqlen_q")
            cells = []
            for n in lengths:
                if n not in line.index:
                    cells.append(DASH)
                elif line.loc[n, "status"] != "ok":
                    cells.append(str(line.loc[n, "status"]))
                else:
                    value = float(line.loc[n, "tflops"])
                    cells.append(Strong(num(value)) if value == best.get(n) else num(value))
            rows.append([str(int(d)), "causal" if causal else "non-causal", impl] + cells)
    return Table(columns=["D", "mask", "implementation"] + [f"N={num(n)}" for n in lengths], rows=rows,
                 align=["r", "l", "l"] + ["r"] * len(lengths),
                 caption=f"Attention forward TFLOP/s (causal FLOPs halved), B={heads[0]} Hq={heads[1]} Hkv={heads[2]}, "
                         f"{dt(dtype)}, Nq = Nk = N, each case in the timing that judges it; bold: the fastest "
                         "correct implementation of each column.")


def _attention_extra(frame: pd.DataFrame) -> dict:
    ooms = frame[frame["status"] == "oom"]
    return {"ooms": [{"impl": r["impl"], "shape": shape_label(r, "attention"), "dtype": dt(r["dtype"])}
                     for _, r in ooms.iterrows()]}


def cross_gpu_view(agg: Aggregate, tables: dict, lead: str | None = None) -> dict:
    agreement = [line for other in sorted(set(tables["comparisons"]["gpu"]) - {lead}) if lead
                 for study in ("softmax", "attention", "decode")
                 for line in [_agreement(agg, tables["comparisons"], study, lead, other)] if line]
    rows = []
    for study in ("softmax", "attention", "decode"):
        for gpu in sorted(set(tables["comparisons"]["gpu"])):
            table = select(tables["comparisons"], study, "peer", gpu)
            if table.empty:
                continue
            sheet = datasheet.for_slug(gpu)
            c = counts(table["vs_best_outcome"])
            gm, interval = _gm(table)
            rows.append([gpu, study, str(int(table["vs_best"].notna().sum())), f"{gm} {interval}",
                         f"{c['win']} / {c['tie']} / {c['loss']}",
                         pct(table["ours_frac_plain"].median()), pct(table["ours_frac_plain"].max()),
                         sheet["label"] if sheet else "not in data/gpus.yaml"])
    table = Table(columns=["GPU", "study", "shapes", "ours / best peer (geomean)", "win / tie / loss",
                           "median share of ceiling", "highest share", "datasheet entry"], rows=rows,
                  align=["l", "l", "r", "p{2.2cm}", "p{1.4cm}", "p{2cm}", "p{1.4cm}", "p{3.2cm}"],
                  caption="Each GPU against its own measured ceiling (shares from plain-call rows; ratios "
                          "in the timing that judges each shape, the geometric mean with its bootstrap interval over "
                          "the shapes, and the outcomes for ours).")
    return {"table": table, "gpus": sorted(set(agg.results["gpu"])), "agreement": agreement,
            "code": _measuring_code(agg, sorted(set(tables["comparisons"]["gpu"])))}


def _measuring_code(agg: Aggregate, gpus: list[str]) -> str | None:
    """Which code measured each GPU's run (env.json's commit and measuring-code id, rooflab.measuring_code), as a
    sentence; where the ids differ, a difference between the GPUs can be the code's as well as the GPU's."""
    runs = {g: (env.get("git_commit"), env.get("measuring_code")) for g in gpus for env in [agg.envs.get(g, {})]}
    if len(runs) < 2:
        return None
    text = "Measured at " + "; ".join(f"{g} commit {str(c)[:7] if c else 'unrecorded'}, measuring code {m or 'unrecorded'}"
                                       for g, (c, m) in runs.items())
    codes = {m for _, m in runs.values()}
    if None in codes:
        return text + ": a run without a measuring-code id cannot be matched to the others' code."
    if len(codes) == 1:
        return text + ": the same kernels, harness and studies measured every GPU."
    return text + (": the kernels, harness or studies differ between the runs, so a shape whose outcome differs "
                   "between GPUs may differ through the code as well as the GPU.")


def _agreement(agg: Aggregate, comparisons: pd.DataFrame, study: str, lead: str, other: str) -> str | None:
    """One study's shapes measured on both GPUs, as a sentence: whether ours's outcome against the fastest peer
    is the same on both, how the two differ where it is not, and ours's time on `other` over its time on
    `lead` at the shapes judged in one timing on both (softmax and decode: of LAUNCH_BOUND_BYTES or more),
    beside the ratio of the two GPUs' measured ceilings for those shapes."""
    keys = ["dtype", *SHAPE_COLUMNS[study]]
    a, b = select(comparisons, study, "peer", lead), select(comparisons, study, "peer", other)
    both = a.merge(b, on=keys, suffixes=("_lead", "_other"))
    both = both[both["vs_best_outcome_lead"].notna() & both["vs_best_outcome_other"].notna()]
    if both.empty:
        return None
    alike = both[both["vs_best_outcome_lead"] == both["vs_best_outcome_other"]]
    unlike = both[both["vs_best_outcome_lead"] != both["vs_best_outcome_other"]]
    kinds = unlike.groupby(["vs_best_outcome_lead", "vs_best_outcome_other"]).size().sort_values(ascending=False)
    text = f"{study}, {other} against {lead}: {len(both)} shapes measured on both; the same outcome at {len(alike)}"
    if len(alike):
        text += " (" + ", ".join(f"{n} {o}" for o, n in alike["vs_best_outcome_lead"].value_counts().items()) + ")"
    if len(kinds):
        text += ", another at " + "; ".join(f"{n} ({o1} on {lead}, {o2} on {other})" for (o1, o2), n in kinds.items())
    text += "."
    timed = both[(both["timing_lead"] == both["timing_other"]) & both["ours_ms_lead"].notna()
                 & both["ours_ms_other"].notna()]
    if study != "attention":
        timed = timed[timed["bytes_lead"] >= LAUNCH_BOUND_BYTES]
    names = timed["ceiling_name_lead"].dropna()
    if names.empty:
        return text
    name = names.mode().iloc[0]
    here, there = agg.ceiling(lead).get(name), agg.ceiling(other).get(name)
    times = timed["ours_ms_other"] / timed["ours_ms_lead"]
    scope = "" if study == "attention" else f" of {megabytes(LAUNCH_BOUND_BYTES)} or more"
    text += (f" On {other} ours takes a median {ratio(times.median())} its time on {lead} ({ratio(times.min())} to "
             f"{ratio(times.max())} over {len(timed)} shapes{scope})")
    if here and there:
        factor, side = (here / there, "lower") if here >= there else (there / here, "higher")
        text += f", where the measured {CEILING_LABELS.get(name, name)} ceiling is {ratio(factor)} {side}"
    return text + "."
