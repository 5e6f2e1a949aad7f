"""The numbers, tables and lists both paper formats render: one builder, so the Markdown and
the LaTeX paper can never disagree. Every value is formatted here, as text; the templates
only place it in sentences.
"""
from __future__ import annotations

import math

import pandas as pd

from rooflab.report import datasheet
from rooflab.report.analysis import (METRIC, UNIT, ceiling_name, comparisons, geomean, is_ours, primary_gpu,
                                     shape_label)
from rooflab.report.load import MEASURED_CEILINGS, Aggregate
from rooflab.report.markup import Table
from rooflab.report.verdicts import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, TOLERANCE, judge_all, ratio_claims
from rooflab.schema import SHAPE_COLUMNS

DASH = "–"
DTYPE_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
L2_FLUSH_BYTES = 256 * 2**20   # triton.testing.do_bench zeroes a buffer of this size before every timed call
STUDY_TITLES = {"softmax": "Softmax", "attention": "Attention (prefill)", "decode": "Decode attention",
                "e2e": "End-to-end decoder block"}
CEILING_LABELS = {
    "copy_tbps": "copy (read + write)", "read_tbps": "read only", "write_tbps": "write only",
    "matmul_fp16_tflops": "fp16 matmul", "matmul_bf16_tflops": "bf16 matmul", "launch_us": "kernel launch",
    "launch_graph_us": "launch in a CUDA graph", "datasheet_bandwidth_tbps": "datasheet bandwidth",
    "datasheet_fp16_tflops": "datasheet fp16 tensor", "datasheet_bf16_tflops": "datasheet bf16 tensor",
    "datasheet_fp32_tflops": "datasheet fp32", "datasheet_memory_gb": "datasheet memory",
}
ENV_KEYS = ("gpu", "slug", "compute_capability", "sm_count", "memory_gib", "l2_mib", "driver", "cuda", "torch",
            "triton", "python", "platform", "git_commit", "time")
CLOCK_KEYS = ("clocks.sm", "clocks.max.sm", "clocks.mem", "power.draw", "power.limit", "temperature.gpu",
              "clocks_throttle_reasons.active", "persistence_mode")


# ---------------------------------------------------------------- formatting

def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def num(value, sig: int = 3) -> str:
    if _missing(value):
        return DASH
    value = float(value)
    if value != 0 and abs(value) >= 10 ** sig:
        return f"{value:.0f}"
    return f"{value:.{sig}g}"


def ratio(value) -> str:
    return DASH if _missing(value) else f"{float(value):.2f}x"


def pct(value) -> str:
    if _missing(value):
        return DASH
    p = float(value) * 100
    return f"{p:.0f}%" if abs(p) >= 10 else f"{p:.1f}%"


def sci(value) -> str:
    return DASH if _missing(value) else f"{float(value):.2g}"


def dt(dtype: str) -> str:
    return DTYPE_SHORT.get(dtype, dtype)


# ---------------------------------------------------------------- per study

def _status_counts(frame: pd.DataFrame) -> dict:
    counts = frame["status"].value_counts()
    return {s: int(counts.get(s, 0)) for s in ("ok", "incorrect", "oom", "unsupported", "error")}


def _rank(table: pd.DataFrame, col: str, best: bool) -> dict | None:
    part = table.dropna(subset=[col])
    if part.empty:
        return None
    row = part.loc[part[col].idxmax() if best else part[col].idxmin()]
    return {"ratio": ratio(row[col]), "shape": row["shape"], "dtype": dt(row["dtype"]), "peer": row.get("best_impl") or DASH}


def _impl_table(frame: pd.DataFrame, study: str, dtype: str, caption: str) -> Table:
    """Rows: shapes; columns: each implementation's metric (or its failure); then ours / best peer."""
    metric = METRIC[study]
    part = frame[(frame["dtype"] == dtype) & (frame["timing"] == "events")]
    impls = sorted(set(part["impl"]), key=lambda i: (not i == "ours", is_ours(i) is False, i))
    table = comparisons(part, study).set_index(list(SHAPE_COLUMNS[study]))
    rows = []
    for key, group in part.groupby(list(SHAPE_COLUMNS[study]), sort=True):
        cells = {}
        for _, r in group.iterrows():
            cells[r["impl"]] = num(r[metric]) if r["status"] == "ok" and not _missing(r[metric]) else r["status"]
        ours = table.loc[key] if key in table.index else None
        rows.append([shape_label(group.iloc[0], study)] + [cells.get(i, DASH) for i in impls]
                    + [ratio(ours["vs_best"]) if ours is not None else DASH])
    return Table(columns=["shape"] + impls + ["ours / best"], rows=rows,
                 caption=f"{caption} ({UNIT[metric]}, {dt(dtype)}; failures named by status).",
                 align=["l" if study == "softmax" else "p{3.4cm}"] + ["r"] * (len(impls) + 1))


def _losses(table: pd.DataFrame, unit: str) -> list[dict]:
    out = []
    for _, r in table.dropna(subset=["vs_best"]).sort_values("vs_best").iterrows():
        if r["vs_best"] >= 1:
            break
        out.append({"shape": r["shape"], "dtype": dt(r["dtype"]), "ours": num(r["ours_metric"]), "unit": unit,
                    "peer": r["best_impl"], "peer_value": num(r["best_metric"]), "ratio": ratio(r["vs_best"]),
                    "within_spread": bool(not _missing(r["vs_best_high"]) and r["vs_best_high"] >= 1)})
    return out


def study_view(agg: Aggregate, study: str, gpu: str | None) -> dict:
    frame = agg.study(study)
    view = {"name": study, "title": STUDY_TITLES[study], "gpus": sorted(set(frame["gpu"])),
            "has_rows": not frame.empty, "rows": 0}
    frame = frame[frame["gpu"] == gpu]
    view.update(rows=len(frame), counts=_status_counts(frame) if len(frame) else {}, here=not frame.empty)
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
    table = comparisons(frame, study)
    unit = UNIT[metric]
    view.update(
        unit=unit,
        dtypes=[dt(d) for d in sorted(set(frame["dtype"]))], impls=sorted(set(frame["impl"])),
        gm_best=ratio(geomean(table["vs_best"])), gm_baseline=ratio(geomean(table["vs_baseline"])),
        has_baseline=bool(table["vs_baseline"].notna().any()),
        best=_rank(table, "vs_best", True), worst=_rank(table, "vs_best", False),
        wins=int((table["vs_best"] >= 1).sum()), compared=int(table["vs_best"].notna().sum()),
        losses=_losses(table, unit),
        ours_not_ok=int((ours_rows["status"] != "ok").sum()),
        ceiling=CEILING_LABELS.get(ceiling_name(study, "float16") or "", ""),
        tables=[_impl_table(frame, study, d, f"{STUDY_TITLES[study]} on {gpu}") for d in sorted(set(frame["dtype"]))],
    )
    top = table.dropna(subset=["ours_frac"])
    if not top.empty:
        r = top.loc[top["ours_frac"].idxmax()]
        view["max_frac"] = {"frac": pct(r["ours_frac"]), "value": num(r["ours_metric"]), "shape": r["shape"], "dtype": dt(r["dtype"])}
    extra = {"softmax": _softmax_extra, "attention": _attention_extra, "decode": _decode_extra}.get(study)
    if extra:
        view.update(extra(frame, agg.ceiling(gpu)))
    return view


def _softmax_extra(frame: pd.DataFrame, ceilings: dict) -> dict:
    events = frame[(frame["timing"] == "events") & frame["impl"].map(is_ours).astype(bool)]
    strategies = sorted(i for i in set(events["impl"]) if i != "ours")
    rows, crossings = [], []
    for dtype in sorted(set(events["dtype"])):
        part = events[events["dtype"] == dtype]
        winners = []
        for (r_, c_), group in part.groupby(["rows", "cols"], sort=True):
            ok = group[(group["status"] == "ok") & group["impl"].isin(strategies)]
            cells = {g["impl"]: num(g["tbps"]) if g["status"] == "ok" else g["status"] for _, g in group.iterrows()}
            win = ok.loc[ok["tbps"].idxmax()] if not ok.empty else None
            mine = group[(group["impl"] == "ours") & (group["status"] == "ok")]
            eff = float(mine["tbps"].iloc[0]) / float(win["tbps"]) if win is not None and not mine.empty else None
            rows.append([f"rows={r_} cols={c_}", dt(dtype)] + [cells.get(s, DASH) for s in strategies]
                        + [cells.get("ours", DASH), win["impl"] if win is not None else DASH, pct(eff)])
            if win is not None:
                winners.append((int(c_), int(r_), win["impl"]))
        winners.sort()
        for (c0, r0, w0), (c1, r1, w1) in zip(winners, winners[1:]):
            if w0 != w1:
                crossings.append({"dtype": dt(dtype), "before": w0, "after": w1, "from": f"rows={r0} cols={c0}",
                                  "to": f"rows={r1} cols={c1}"})
    strategy_table = Table(columns=["shape", "dtype"] + strategies + ["ours", "fastest strategy", "ours / fastest"],
                           rows=rows, caption="Each softmax strategy forced on its own (TB/s) and the dispatched kernel.",
                           align=["l", "l"] + ["r"] * (len(strategies) + 1) + ["l", "r"]) if strategies else None
    graph = frame[frame["timing"] == "cudagraph"]
    launch_rows = []
    for _, g in graph[graph["status"] == "ok"].iterrows():
        e = frame[(frame["timing"] == "events") & (frame["impl"] == g["impl"]) & (frame["dtype"] == g["dtype"])
                  & (frame["rows"] == g["rows"]) & (frame["cols"] == g["cols"]) & (frame["status"] == "ok")]
        if g["impl"] in ("ours", "torch") and not e.empty:
            launch_rows.append([g["impl"], shape_label(g, "softmax"), dt(g["dtype"]), num(e["median_ms"].iloc[0] * 1e3),
                                num(g["median_ms"] * 1e3), ratio(e["median_ms"].iloc[0] / g["median_ms"])])
    launch = Table(columns=["impl", "shape", "dtype", "events (us)", "CUDA graph (us)", "events / graph"], rows=launch_rows,
                   caption="Launch-bound shapes: plain calls against CUDA-graph replay.",
                   align=["l", "l", "l", "r", "r", "r"]) if launch_rows else None
    return {"strategies": strategies, "strategy_table": strategy_table, "crossings": crossings, "launch_table": launch,
            "launch_us": num(ceilings.get("launch_us")), "launch_graph_us": num(ceilings.get("launch_graph_us"))}


def _attention_extra(frame: pd.DataFrame, ceilings: dict) -> dict:
    ooms = frame[frame["status"] == "oom"]
    table = comparisons(frame, "attention")
    flash = []
    for _, row in table.iterrows():
        peer = frame[(frame["impl"] == "sdpa_flash") & (frame["timing"] == "events") & (frame["status"] == "ok")
                     & (frame["dtype"] == row["dtype"])]
        for col in SHAPE_COLUMNS["attention"]:
            peer = peer[peer[col] == row[col]]
        if not peer.empty and not _missing(row["ours_ms"]):
            flash.append(float(peer["median_ms"].iloc[0]) / float(row["ours_ms"]))
    return {"ooms": [{"impl": r["impl"], "shape": shape_label(r, "attention"), "dtype": dt(r["dtype"])} for _, r in ooms.iterrows()],
            "gm_flash": ratio(geomean(flash)), "n_flash": len(flash)}


def _decode_extra(frame: pd.DataFrame, ceilings: dict) -> dict:
    keys = ["batch", "heads_q", "heads_kv", "cache_len", "head_dim", "ragged", "dtype"]
    ok = frame[(frame["timing"] == "events") & (frame["status"] == "ok")]
    split = ok[ok["impl"] == "ours"].merge(ok[ok["impl"] == "ours_nosplit"], on=keys, suffixes=("", "_ns"))
    gains = (split["median_ms_ns"] / split["median_ms"]) if not split.empty else pd.Series(dtype=float)
    out = {"split_cases": len(split), "gm_split": ratio(geomean(gains))}
    if len(split):
        hi, lo = split.loc[gains.idxmax()], split.loc[gains.idxmin()]
        out.update(split_best={"ratio": ratio(gains.max()), "shape": shape_label(hi, "decode")},
                   split_worst={"ratio": ratio(gains.min()), "shape": shape_label(lo, "decode")})
    return out


def e2e_view(agg: Aggregate, gpu: str | None) -> dict:
    frame = agg.study("e2e")
    view = {"name": "e2e", "title": STUDY_TITLES["e2e"], "has_rows": not frame.empty, "gpus": sorted(set(frame["gpu"]))}
    frame = frame[frame["gpu"] == gpu] if gpu else frame.iloc[0:0]
    view.update(here=not frame.empty, rows=len(frame), counts=_status_counts(frame) if len(frame) else {})
    if frame.empty:
        return view
    rows, amdahl = [], []
    graphs = frame[(frame["part"] == "total") & (frame["timing"] == "cudagraph") & (frame["status"] == "ok")]
    frame = frame[frame["timing"] == "events"]
    totals = frame[(frame["part"] == "total")]
    for (phase, seqlen, cache_len), group in totals.groupby(["phase", "seqlen", "cache_len"], sort=False):
        length = f"S={seqlen}" if phase == "prefill" else f"L={cache_len}"
        parts = frame[(frame["phase"] == phase) & (frame["seqlen"] == seqlen) & (frame["cache_len"] == cache_len)]
        replay = graphs[(graphs["phase"] == phase) & (graphs["seqlen"] == seqlen) & (graphs["cache_len"] == cache_len)]
        eager = group[(group["impl"] == "eager") & (group["status"] == "ok")]
        eager_ms = float(eager["median_ms"].iloc[0]) if not eager.empty else None

        def part_ms(impl, part):
            sel = parts[(parts["impl"] == impl) & (parts["part"] == part)]["median_ms"].dropna()
            return float(sel.iloc[0]) if not sel.empty else None
        for _, r in group.iterrows():
            ok = r["status"] == "ok" and not _missing(r["median_ms"])
            soft, attn = part_ms(r["impl"], "softmax"), part_ms(r["impl"], "attention")
            graph_ms = replay[replay["impl"] == r["impl"]]["median_ms"].dropna()
            rows.append([phase, length, r["impl"], num(r["median_ms"]) if ok else r["status"],
                         ratio(eager_ms / r["median_ms"]) if ok and eager_ms else DASH,
                         pct(soft / r["median_ms"]) if ok and soft else DASH,
                         pct(attn / r["median_ms"]) if ok and attn else DASH,
                         num(float(graph_ms.iloc[0])) if not graph_ms.empty else DASH])
        mine = group[(group["impl"] == "ours_softmax") & (group["status"] == "ok")]
        s_eager, s_ours = part_ms("eager", "softmax"), part_ms("ours_softmax", "softmax")
        if eager_ms and s_eager and s_ours and not mine.empty:
            share = s_eager / eager_ms
            k = s_eager / s_ours
            amdahl.append({"phase": phase, "length": length, "share": pct(share), "part_speedup": ratio(k),
                           "bound": ratio(1 / (1 - share)), "predicted": ratio(1 / ((1 - share) + share / k)),
                           "measured": ratio(eager_ms / float(mine["median_ms"].iloc[0])), "_share": share})
    view["table"] = Table(columns=["phase", "length", "configuration", "total (ms)", "vs eager", "softmax share",
                                   "attention share", "graph replay (ms)"], rows=rows,
                          align=["l", "l", "l", "r", "r", "r", "r", "r"],
                          caption=f"One decoder block on {gpu}: time of the block timed by part with CUDA events "
                                  "(host launch gaps included), the share of its softmax and attention parts, "
                                  "and, for the launch-bound decode step, the whole block replayed as a CUDA graph.")
    view["amdahl"] = amdahl
    view["amdahl_top"] = max(amdahl, key=lambda a: a["_share"]) if amdahl else None   # where softmax weighs most
    return view


# ---------------------------------------------------------------- claims, cross-GPU, verification

def _claimed_text(v) -> str:
    if v.metric == "status":
        return v.claimed_status
    unit = UNIT.get(v.metric, "")
    return f"{num(v.claimed)} {unit}"


def _gpu_notes(pairs) -> list[str]:
    """'Claims measured on ...; ours on ...' from (claim gpu, source) and our GPUs, for a table's notes."""
    claim_gpus = {}
    for source, gpu in pairs["claims"]:
        claim_gpus.setdefault(gpu, set()).add(source[:3])
    notes = [f"Seed {', '.join(sorted(seeds))}: published on {gpu}." for gpu, seeds in sorted(claim_gpus.items())]
    if pairs["ours"]:
        notes.append(f"Ours: measured on {', '.join(sorted(pairs['ours']))}.")
    return notes


def claims_view(agg: Aggregate, prefer: list[str]) -> dict:
    verdicts = judge_all(agg.published, agg.results, prefer)
    rows = []
    for v in verdicts:
        if v.ours is not None:
            ours = f"{num(v.ours)} {UNIT[v.ours_metric]}"
            if v.ours_low is not None:
                ours += f" [{num(v.ours_low)}, {num(v.ours_high)}]"
        else:
            ours = v.ours_status or DASH
        rows.append([v.source[:3], v.impl, v.shape, dt(v.dtype), _claimed_text(v), ours, ratio(v.ratio),
                     pct(v.claimed_frac), pct(v.ours_frac), v.verdict])
    counts = {k: sum(v.verdict == k for v in verdicts) for k in (REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE)}
    notes = _gpu_notes({"claims": {(v.source, v.claim_gpu) for v in verdicts},
                        "ours": {v.ours_gpu for v in verdicts if v.ours_gpu}})
    table = Table(columns=["seed", "impl", "shape", "dtype", "claimed", "ours [spread]", "ratio",
                           "claim %", "ours %", "verdict"], rows=rows,
                  align=["l", "l", "p{2.5cm}", "l", "r", "p{2.4cm}", "r", "r", "r", "l"],
                  caption="Every published number of the seeds against our measurement of the same implementation, "
                          "shape and dtype. Ratio: our throughput over the claimed one (same GPU only); claim % and "
                          "ours %: each as a share of its own GPU's datasheet peak.", notes=notes)
    ratios = ratio_claims(agg.published, agg.results, prefer)
    ratio_rows = [[r.source[:3], r.shape, dt(r.dtype), f"{r.faster} over {r.slower}", ratio(r.claimed),
                   f"{ratio(r.ours)} [{ratio(r.ours_low)}, {ratio(r.ours_high)}]" if r.ours_gpu else DASH,
                   r.verdict] for r in ratios]
    ratio_notes = _gpu_notes({"claims": {(r.source, r.claim_gpu) for r in ratios},
                              "ours": {r.ours_gpu for r in ratios if r.ours_gpu}})
    ratio_table = Table(columns=["seed", "shape", "dtype", "speedup of", "claimed", "ours [spread]", "verdict"],
                        rows=ratio_rows, align=["l", "p{3.4cm}", "l", "p{3.4cm}", "r", "p{3.0cm}", "l"],
                        caption="The seeds' relative claims (one implementation k times faster than another at one "
                                "shape), measured the same way.", notes=ratio_notes)
    far = [v for v in verdicts if v.claimed_frac is not None and v.ours_frac is not None]
    return {"n": len(verdicts), "counts": {k.replace(" ", "_"): n for k, n in counts.items()}, "table": table,
            "ratio_table": ratio_table, "n_ratios": len(ratios),
            "ratio_compared": sum(r.ours is not None for r in ratios),
            "sources": sorted(set(agg.published["source"])) if len(agg.published) else [],
            "above": [{"impl": v.impl, "shape": v.shape, "dtype": dt(v.dtype), "claim_gpu": v.claim_gpu,
                       "claimed_frac": pct(v.claimed_frac), "ours_gpu": v.ours_gpu, "ours_frac": pct(v.ours_frac)}
                      for v in far if v.claimed_frac > v.ours_frac]}


def cross_gpu_view(agg: Aggregate) -> dict:
    rows = []
    for study in ("softmax", "attention", "decode"):
        frame = agg.study(study)
        for gpu, part in frame.groupby("gpu", sort=True):
            table = comparisons(part, study)
            if table.empty:
                continue
            sheet = datasheet.for_slug(gpu)
            rows.append([gpu, study, str(int(table["vs_best"].notna().sum())), ratio(geomean(table["vs_best"])),
                         pct(table["ours_frac"].median()), pct(table["ours_frac"].max()),
                         sheet["label"] if sheet else "not in data/gpus.yaml"])
    table = Table(columns=["GPU", "study", "shapes", "ours / best peer (geomean)", "median share of ceiling",
                           "highest share", "datasheet entry"], rows=rows,
                  align=["l", "l", "r", "r", "r", "r", "p{3.2cm}"],
                  caption="Each GPU against its own measured ceiling.")
    return {"table": table, "gpus": sorted(set(agg.results["gpu"]))}


def verify_view(frame: pd.DataFrame | None) -> dict:
    if frame is None or frame.empty:
        return {"rows": 0}
    counts = frame["status"].value_counts()
    table = Table(columns=["study", "impl", "shape", "dtype", "rel. error", "tolerance", "status", "seconds"],
                  rows=[[r["study"], r["impl"], r["shape"], dt(r["dtype"]), sci(r["rel_err"]), sci(r["tolerance"]),
                         r["status"], num(r["seconds"])] for _, r in frame.iterrows()],
                  align=["l", "l", "p{5.2cm}", "l", "r", "r", "l", "r"],
                  caption="Every kernel variant in Triton's CPU interpreter against the float64 reference.")
    bad = frame[frame["status"] != "ok"]
    return {"rows": len(frame), "counts": {str(k): int(v) for k, v in counts.items()}, "ok": int(counts.get("ok", 0)),
            "studies": sorted(set(frame["study"])), "seconds": num(frame["seconds"].sum()), "table": table,
            "failures": [{"study": r["study"], "impl": r["impl"], "shape": r["shape"], "dtype": dt(r["dtype"]),
                          "status": r["status"], "message": r.get("message") if not _missing(r.get("message")) else ""}
                         for _, r in bad.iterrows()]}


# ---------------------------------------------------------------- method, limits, environment

def _ceiling_table(agg: Aggregate) -> Table:
    gpus = agg.gpus
    names = list(MEASURED_CEILINGS) + sorted({n for g in gpus for n in agg.ceiling(g)} - set(MEASURED_CEILINGS))
    units = dict(zip(agg.ceilings["name"], agg.ceilings["unit"]))
    rows = [[CEILING_LABELS.get(n, n), str(units.get(n, ""))] + [num(agg.ceiling(g).get(n)) for g in gpus] for n in names]
    return Table(columns=["ceiling", "unit"] + gpus, rows=rows, caption="Ceilings measured on each GPU, with its datasheet values.")


def _spread(frame: pd.DataFrame) -> dict | None:
    ok = frame[(frame["status"] == "ok") & frame["p20_ms"].notna() & frame["p80_ms"].notna() & frame["median_ms"].notna()]
    if ok.empty:
        return None
    rel = (ok["p80_ms"] - ok["p20_ms"]) / ok["median_ms"]
    worst = ok.loc[rel.idxmax()]
    study = worst["study"]
    return {"median": pct(rel.median()), "max": pct(rel.max()), "rows": len(ok),
            "worst": f"{study} {worst['impl']} {shape_label(worst, study)} {dt(worst['dtype'])} ({worst['timing']})"}


def _clock(state) -> dict:
    state = state if isinstance(state, dict) else {}
    return {k: str(state[k]) for k in CLOCK_KEYS if k in state}


def gpu_views(agg: Aggregate) -> list[dict]:
    out = []
    for gpu in agg.gpus:
        env = agg.envs.get(gpu, {})
        rows = agg.results[agg.results["gpu"] == gpu]
        config = env.get("config") if isinstance(env.get("config"), dict) else {}
        profile = config.get("profile")
        bench = (config.get("bench") or {}).get(profile) if profile else None
        sheet = datasheet.for_slug(gpu)
        before, after = _clock(env.get("clocks_before")), _clock(env.get("clocks_after"))
        env_rows = [[k, str(env[k])] for k in ENV_KEYS if k in env and env[k] not in (None, "")]
        if profile:
            env_rows.append(["profile", str(profile)])
        if sheet:
            env_rows.append(["datasheet values", f"{sheet['label']}: {sheet['source']}"])
        env_rows += [[f"before: {k}", v] for k, v in before.items()] + [[f"after: {k}", v] for k, v in after.items()]
        reps = rows["reps"].dropna()
        out.append({
            "slug": gpu, "name": str(env.get("gpu") or gpu), "rows": len(rows),
            "studies": sorted(set(rows["study"])), "counts": _status_counts(rows) if len(rows) else {},
            "datasheet": sheet["label"] if sheet else None,
            "reps_min": num(reps.min()) if len(reps) else DASH, "reps_max": num(reps.max()) if len(reps) else DASH,
            "bench": {k: num(v) for k, v in bench.items()} if isinstance(bench, dict) else {},
            "graph_below": num((config.get("bench") or {}).get("graph_below_bytes", 8e6) / 1e6),
            "clocks_before": before, "clocks_after": after, "spread": _spread(rows),
            "env_table": Table(columns=["key", "value"], rows=env_rows, align=["l", "p{10cm}"],
                               caption=f"Environment of the {gpu} results (env.json)."),
        })
    return out


def tolerances() -> list[dict]:
    """Each study's relative-error tolerance per dtype, from its own module."""
    from rooflab import studies
    from rooflab.bench import DTYPES

    out = []
    for name in studies.NAMES:
        try:
            module = studies.load(name)
        except ImportError:      # a study whose kernels are not importable here
            continue
        values = []
        for dtype in DTYPES:
            try:
                values.append(f"{dt(dtype)} {sci(module.tolerance(dtype))}")
            except (KeyError, ValueError):
                continue
        out.append({"study": name, "limits": ", ".join(values)})
    return out


def build(agg: Aggregate, figures: list[dict], verify: pd.DataFrame | None = None, fresh_slug: str | None = None,
          figure_base: str = "../figures") -> dict:
    """Everything the templates print."""
    gpu = primary_gpu(agg.results, fresh_slug)
    gpus = gpu_views(agg)
    studies = {s: study_view(agg, s, gpu) for s in ("softmax", "attention", "decode")}
    studies["e2e"] = e2e_view(agg, gpu)
    figs = {f["name"]: f for f in figures}
    return {
        "title": "Roofline Lab: fused softmax, flash attention and split-KV decode in Triton, measured against the best peers",
        "primary": next((g for g in gpus if g["slug"] == gpu), None),
        "gpus": gpus,
        "studies": studies,
        "claims": claims_view(agg, [gpu] if gpu else []),
        "cross": cross_gpu_view(agg),
        "verify": verify_view(verify),
        "ceilings": _ceiling_table(agg) if agg.gpus else None,
        "tolerances": tolerances(),
        "flush_mib": num(L2_FLUSH_BYTES / 2**20),
        "verdict_tolerance": pct(TOLERANCE),
        "problems": list(agg.problems),
        "figures": figs,
        "figure_base": figure_base,
    }
