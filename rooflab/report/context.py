"""The numbers, tables and lists both paper formats render: one builder, so the Markdown and
the LaTeX paper can never disagree. Every value is formatted here, as text; the templates
only place it in sentences.
"""
from __future__ import annotations

import math

import pandas as pd

from rooflab import datasheet
from rooflab.report import headline
from rooflab.report.analysis import (E2E_GRAPH_TIMING, KERNEL_TIMING, LAUNCH_BOUND_BYTES, LOSS, METRIC, PLAIN_TIMING,
                                     TIE, TIE_WITHIN, UNIT, bootstrap_geomean, counts, is_ours, is_peer, is_seed,
                                     primary_gpu, shape_label)
from rooflab.report.derive import select
from rooflab.report.fmt import DASH, dt, label, listing, megabytes, num, pct, ratio, sci
from rooflab.report.fmt import missing as _missing
from rooflab.report.load import MEASURED_CEILINGS, Aggregate, _as_bool
from rooflab.report.markup import Strong, Table
from rooflab.report.verdicts import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, TOLERANCE
from rooflab.schema import SHAPE_COLUMNS

L2_FLUSH_BYTES = 256 * 2**20   # the harness writes a buffer of this size before every timed call
# The harness's settings (config/config.yaml's `bench`), where neither the run's env.json nor the
# workflow's config records them: a row pools at least `min_reps` calls from `trials` trials, the L2
# flush writes `flush_mib`, and a case gets a `cupti` row beside its `events` row when it moves less
# than `kernel_below_bytes` or its fastest call takes under `kernel_below_ms`.
HARNESS = {"min_reps": 20, "trials": 3, "flush_mib": L2_FLUSH_BYTES / 2**20, "kernel_below_bytes": 64e6,
           "kernel_below_ms": 0.05}
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
# The commands of the paper's "How to reproduce" section (README.md says the same at more length).
REPRODUCE_COMMANDS = (
    "bash envs/setup.sh                     # .venv: torch, triton, snakemake, the peers",
    ".venv/bin/snakemake --cores 1          # env, ceilings, sweeps, checks, figures, paper",
    ".venv/bin/snakemake --cores 1 --profile config/profiles/quick   # a shorter grid",
    ".venv/bin/snakemake --cores 1 reproduce   # this run against the committed one",
    ".venv/bin/snakemake --cores 1 publish     # copy the run into data/results/<gpu>/",
)
KERNEL_MARK = " [kernel]"      # a table row whose values are the kernel's device time (CUPTI)
DISPATCH_CLOSE = 0.95          # the dispatched softmax counts as matching the fastest forced strategy from here
DISPATCH_MISS = 0.80           # and is listed as a dispatch miss below this


def _bench(config) -> dict:
    """A config's `bench` settings with its profile's (trials, budgets) folded in."""
    config = config if isinstance(config, dict) else {}
    bench = config.get("bench") if isinstance(config.get("bench"), dict) else {}
    profile = bench.get(config.get("profile")) if isinstance(bench.get(config.get("profile")), dict) else {}
    return {**bench, **profile}


def harness(env: dict, rows: pd.DataFrame | None = None, config: dict | None = None) -> dict:
    """The harness settings of one GPU's run as text: the fewest calls and trials behind its correct rows
    where they are recorded; else what its env.json's config says, else the workflow's config, else HARNESS."""
    recorded, workflow = _bench(env.get("config")), _bench(config)
    values = {k: recorded.get(k, workflow.get(k, v)) for k, v in HARNESS.items()}
    ok = rows[rows["status"] == "ok"] if rows is not None else None
    for key, col in (("min_reps", "reps"), ("trials", "trials")):
        if ok is not None and ok[col].notna().any():
            values[key] = ok[col].min()
    return {"min_reps": num(values["min_reps"]), "min_trials": num(values["trials"]),
            "flush_mib": num(values["flush_mib"]), "cupti_mb": num(float(values["kernel_below_bytes"]) / 1e6),
            "cupti_us": num(float(values["kernel_below_ms"]) * 1e3)}


# ---------------------------------------------------------------- per study

def _status_counts(frame: pd.DataFrame) -> dict:
    counts = frame["status"].value_counts()
    return {s: int(counts.get(s, 0)) for s in ("ok", "incorrect", "oom", "unsupported", "error")}


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
    rows, misses, close, compared = [], [], 0, 0
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
            if eff < DISPATCH_MISS:
                misses.append((eff, f"{shape}, {dt(dtype)}{', kernel time' if kernel else ''}: dispatched "
                                    f"{num(mine['tbps'].iloc[0])} TB/s, {win['impl']} {num(win['tbps'])} TB/s ({pct(eff)})"))
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
            "dispatch_compared": compared, "dispatch_misses": [m for _, m in sorted(misses)], "launch_table": launch,
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


def _length(phase, seqlen, cache_len) -> str:
    return f"S={seqlen}" if phase == "prefill" else f"L={cache_len}"


def e2e_view(agg: Aggregate, tables: dict, gpu: str | None) -> dict:
    frame = agg.study("e2e")
    view = {"name": "e2e", "title": STUDY_TITLES["e2e"], "has_rows": not frame.empty, "gpus": sorted(set(frame["gpu"]))}
    frame = frame[frame["gpu"] == gpu] if gpu else frame.iloc[0:0]
    view.update(here=not frame.empty, rows=len(frame), counts=_status_counts(frame) if len(frame) else {})
    if frame.empty:
        return view
    first = frame.iloc[0]
    recorded = (agg.envs.get(gpu, {}).get("config") or {}).get("e2e") or {}     # the run's own config (env.json)
    view["config"] = {"width": num(first["width"]), "heads": num(first["heads"]), "dtype": dt(first["dtype"]),
                      "batch": num(recorded.get("batch")), "kv_heads": num(recorded.get("kv_heads")),
                      "mlp_ratio": num(recorded.get("mlp_ratio")),
                      "prefill": listing(sorted({int(x) for x in frame[frame["phase"] == "prefill"]["seqlen"]})),
                      "decode": listing(sorted({int(x) for x in frame[frame["phase"] == "decode"]["cache_len"]}))}
    rows = []
    graphs = frame[(frame["part"] == "total") & (frame["timing"] == E2E_GRAPH_TIMING) & (frame["status"] == "ok")]
    view["graph"] = headline.e2e_graph(frame)
    frame = frame[frame["timing"] == PLAIN_TIMING]
    totals = frame[(frame["part"] == "total")]
    for (phase, seqlen, cache_len), group in totals.groupby(["phase", "seqlen", "cache_len"], sort=False):
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
            rows.append([phase, _length(phase, seqlen, cache_len), r["impl"], num(r["median_ms"]) if ok else r["status"],
                         ratio(eager_ms / r["median_ms"]) if ok and eager_ms else DASH,
                         pct(soft / r["median_ms"]) if ok and soft else DASH,
                         pct(attn / r["median_ms"]) if ok and attn else DASH,
                         num(float(graph_ms.iloc[0])) if not graph_ms.empty else DASH])
    blocks = tables["amdahl"][tables["amdahl"]["gpu"] == gpu]
    amdahl = [{"phase": a["phase"], "length": _length(a["phase"], a["seqlen"], a["cache_len"]), "share": pct(a["share"]),
               "part_speedup": ratio(a["part_speedup"]), "bound": ratio(a["bound"]), "predicted": ratio(a["predicted"]),
               "measured": ratio(a["measured"]), "_share": a["share"], "outcome": a["outcome"],
               "interval": headline.ratio_interval(a["measured_low"], a["measured_high"]),
               "graph": None if _missing(a["graph_measured"]) else ratio(a["graph_measured"])}
              for _, a in blocks.iterrows()]
    view["table"] = Table(columns=["phase", "length", "configuration", "total (ms)", "vs eager", "softmax share",
                                   "attention share", "graph replay (ms)"], rows=rows,
                          align=["l", "l", "l", "r", "r", "r", "r", "r"],
                          caption=f"One decoder block on {gpu}: time of the block timed by part with CUDA events "
                                  "(host launch gaps included), the share of its softmax and attention parts, "
                                  "and, for the launch-bound decode step, the whole block replayed as a CUDA graph.")
    view["amdahl"] = amdahl
    # where softmax weighs most, among the phases timed part by part without a host-bound step
    timed = [a for a in amdahl if a["graph"] is None] or amdahl
    view["amdahl_top"] = max(timed, key=lambda a: a["_share"]) if timed else None
    return view


# ---------------------------------------------------------------- claims, cross-GPU, verification

CLAIM_UNITS = {**UNIT, "speedup": "x", "shapes": "shapes"}


def _value(value, metric) -> str:
    if _missing(value):
        return DASH
    return ratio(value) if metric == "speedup" else f"{num(value)} {CLAIM_UNITS.get(metric, '')}".strip()


def _claim_cells(v) -> list[str]:
    """(what is claimed, the claimed number, ours with its interval) of one line of the verdicts table."""
    what = {"value": f"{v['impl']}, {v['shape']}, {dt(v['dtype'])}",
            "ratio": f"{v['impl']} over {v['versus']}, {v['shape']}, {dt(v['dtype'])}"}.get(v["kind"], v["claim"])
    claimed = v["claimed_status"] if v["metric"] == "status" else _value(v["claimed"], v["metric"])
    if v["kind"] == "slower_below":
        claimed, ours = "every shape", f"{num(v['ours'])} of {num(v['claimed'])} shapes"
    elif not _missing(v["ours"]):
        ours = _value(v["ours"], v["ours_metric"])
        if not _missing(v["ours_low"]):
            ours += f" [{_value(v['ours_low'], v['ours_metric']).removesuffix(' ' + CLAIM_UNITS.get(v['ours_metric'], ''))}, " \
                    f"{_value(v['ours_high'], v['ours_metric']).removesuffix(' ' + CLAIM_UNITS.get(v['ours_metric'], ''))}]"
    else:
        ours = v["ours_status"] if not _missing(v["ours_status"]) else DASH
    return [what, claimed, ours]


def claims_view(tables: dict) -> dict:
    """The verdicts table (rooflab.report.derive) as the paper prints it: the judged claims in the main text,
    every claim with its note in the appendix."""
    verdicts = tables["verdicts"].copy()
    for col in ("note", "convention", "claim", "versus", "ours_status", "claimed_status"):
        verdicts[col] = verdicts[col].map(lambda x: "" if _missing(x) else str(x))
    counts = {k.replace(" ", "_"): int((verdicts["verdict"] == k).sum()) for k in (REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE)}
    rows, judged_rows = [], []
    for _, v in verdicts.iterrows():
        line = [v["source"][:3], v["kind"]] + _claim_cells(v) + [pct(v["claimed_frac"]), pct(v["ours_frac"]), v["verdict"],
                                                                 v["note"]]
        rows.append(line)
        if v["verdict"] != NOT_COMPARABLE or v["kind"] not in ("value",):
            judged_rows.append(line[:5] + line[7:])
    by_seed = []
    for source, part in verdicts.groupby("source", sort=True):
        c = part["verdict"].value_counts()
        by_seed.append([source[:3], str(len(part)), str(int(c.get(REPRODUCED, 0))), str(int(c.get(NOT_REPRODUCED, 0))),
                        str(int(c.get(NOT_COMPARABLE, 0))), listing(sorted(set(part["claim_gpu"])))])
    full = Table(columns=["seed", "kind", "claim", "claimed", "ours [interval]", "claim %", "ours %", "verdict", "note"],
                 rows=rows, align=["l", "l", "p{2.8cm}", "r", "p{2.0cm}", "r", "r", "p{1.6cm}", "p{4.2cm}"],
                 caption="Every claim of the seeds against our measurement: published numbers (value), ratios between "
                         "two implementations (ratio) and claims made in words. Claim % and ours %: each as a share of "
                         "its own GPU's datasheet peak.")
    main = Table(columns=["seed", "kind", "claim", "claimed", "ours [interval]", "verdict", "note"], rows=judged_rows,
                 align=["l", "l", "p{2.7cm}", "r", "p{2.0cm}", "p{1.6cm}", "p{4.9cm}"],
                 caption="The claims our measurements can judge: numbers published for the same GPU or a compute twin, "
                         "ratios between implementations, and claims made in words, each with its note.")
    summary = Table(columns=["seed", "claims", "reproduced", "not reproduced", "not comparable", "published on"],
                    rows=by_seed, caption="Verdicts per seed article.")
    above = verdicts.dropna(subset=["claimed_frac", "ours_frac"])
    return {"n": len(verdicts), "counts": counts, "table": full, "main_table": main, "summary": summary,
            "n_ratios": int((verdicts["kind"] == "ratio").sum()),
            "ratio_compared": int(((verdicts["kind"] == "ratio") & verdicts["ours"].notna()).sum()),
            "conventions": sorted({f"seed {s[:3]}: {c}" for s, c in zip(verdicts["source"], verdicts["convention"]) if c}),
            "sources": sorted(set(verdicts["source"])),
            "above": [{"impl": v["impl"], "shape": v["shape"], "dtype": dt(v["dtype"]), "claim_gpu": v["claim_gpu"],
                       "claimed_frac": pct(v["claimed_frac"]), "ours_gpu": v["ours_gpu"], "ours_frac": pct(v["ours_frac"])}
                      for _, v in above.iterrows() if v["claimed_frac"] > v["ours_frac"]]}


def cross_gpu_view(agg: Aggregate, tables: dict) -> dict:
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
    return {"table": table, "gpus": sorted(set(agg.results["gpu"]))}


def verify_view(frame: pd.DataFrame | None) -> dict:
    if frame is None or frame.empty:
        return {"rows": 0}
    counts = frame["status"].value_counts()
    # No seconds: how long a check took differs from run to run, and the paper is the same for the same data.
    table = Table(columns=["study", "impl", "shape", "dtype", "rel. error", "tolerance", "status"],
                  rows=[[r["study"], r["impl"], r["shape"], dt(r["dtype"]), sci(r["rel_err"]), sci(r["tolerance"]),
                         r["status"]] for _, r in frame.iterrows()],
                  align=["l", "l", "p{5.2cm}", "l", "r", "r", "l"],
                  caption="Every kernel variant in Triton's CPU interpreter against the float64 reference.")
    bad = frame[frame["status"] != "ok"]
    failed = frame[~frame["status"].isin(["ok", "unsupported"])]
    return {"rows": len(frame), "counts": {str(k): int(v) for k, v in counts.items()}, "ok": int(counts.get("ok", 0)),
            "unsupported": int(counts.get("unsupported", 0)), "failed": len(failed),
            "failed_names": sorted({f"{r['study']} {r['impl']} {dt(r['dtype'])}" for _, r in failed.iterrows()}),
            "studies": sorted(set(frame["study"])), "table": table,
            "failures": [{"study": r["study"], "impl": r["impl"], "shape": r["shape"], "dtype": dt(r["dtype"]),
                          "status": r["status"], "message": r.get("message") if not _missing(r.get("message")) else ""}
                         for _, r in bad.iterrows()]}


# ---------------------------------------------------------------- quality record and reproduction

# The quality gates of rooflab/qa.py (qa.csv's `gate`), as the paper names them.
QA_GATES = {
    "ours_vs_strategy": "the dispatched kernel against the same strategy forced (the same code, so medians far "
                        "apart with disjoint intervals mean a noisy run)",
    "dtype_twin": "float16 against bfloat16 for one implementation and shape of a memory-bound study (the same "
                  "bytes move)",
    "above_ceiling": "a row faster than its measured ceiling",
    "few_samples": "a median behind too few timed calls or trials",
    "amdahl": "an end-to-end block sped up more than Amdahl's law allows for the part swapped",
}
REPRODUCTION_MIN_MS = 0.020    # the reproduction summary counts cases whose committed time is at least this
REPRODUCTION_TOLERANCE = 0.05  # medians this close reproduce (the reproduce rule's tolerance)


def _flag(value) -> bool:
    try:
        return not _missing(value) and _as_bool(value)
    except ValueError:
        return False


def qa_view(agg: Aggregate, gpu: str | None) -> dict:
    """The quality record of the paper's GPU: every open flag of its qa.csv, or that it has none."""
    view = {"gpu": gpu, "present": agg.has_record(gpu, "qa.csv"),
            "gates": [f"{name}, {text}" for name, text in QA_GATES.items()], "open": [], "lines": 0, "closed": 0}
    if not view["present"]:
        return view
    lines = agg.qa[agg.qa["gpu"] == gpu]
    is_open = lines["open"].map(_flag).astype(bool)
    view.update(lines=len(lines), closed=int((~is_open).sum()))
    for _, r in lines[is_open].iterrows():
        shape = "" if _missing(r["shape"]) else str(r["shape"])
        view["open"].append(
            f"{r['study']}, {r['gate']}: {shape}, {dt(str(r['dtype']))}, {r['impl']}: {num(r['value'])} against a "
            f"limit of {num(r['limit'])}; {'re-measured once and still flagged' if _flag(r['remeasured']) else 'not re-measured'}"
            + (f" ({r['detail']})" if not _missing(r["detail"]) else ""))
    return view


def _worst_ratio(part: pd.DataFrame, min_ms: float) -> str:
    """The fresh / committed ratio farthest from 1 among the compared cases of at least min_ms, with its case."""
    both = part[part["verdict"].isin(("reproduced", "faster", "slower"))]
    both = both[pd.to_numeric(both["committed_ms"], errors="coerce") >= min_ms]
    ratios = pd.to_numeric(both["fresh_ms"], errors="coerce") / pd.to_numeric(both["committed_ms"], errors="coerce")
    ratios = ratios[ratios > 0]
    if ratios.empty:
        return DASH
    r = both.loc[ratios.map(lambda x: abs(math.log(x))).idxmax()]
    return f"{ratio(ratios[r.name])} ({r['impl']} {r['shape']} {dt(str(r['dtype']))}, {r['timing']})"


def reproduction_view(agg: Aggregate, gpu: str | None) -> dict:
    """This GPU's fresh run against its committed one, per study (rooflab.reproduce.summary)."""
    from rooflab import reproduce

    view = {"gpu": gpu, "present": agg.has_record(gpu, "reproduction.csv"), "min_us": num(REPRODUCTION_MIN_MS * 1e3),
            "rows": 0, "table": None, "studies": []}
    if not view["present"]:
        return view
    frame = agg.reproduction[agg.reproduction["gpu"] == gpu].drop(columns=["gpu"])
    summary = reproduce.summary(frame, min_ms=REPRODUCTION_MIN_MS)
    rows = []
    for _, r in summary.iterrows():
        entry = {"study": r["study"], "compared": int(r["compared"]), "large": int(r["compared_at_least_min"]),
                 "reproduced": int(r["reproduced_at_least_min"]), "share": pct(r["share_reproduced"]),
                 "faster": int(r["faster"]), "slower": int(r["slower"]), "new": int(r["new"]),
                 "missing": int(r["missing"]), "worst": _worst_ratio(frame[(frame["study"] == r["study"])
                                                                           & frame["kernel_time"].astype(bool)],
                                                                     REPRODUCTION_MIN_MS),
                 "calls": int(r["calls_at_least_min"]), "calls_share": pct(r["calls_share_reproduced"])}
        view["studies"].append(entry)
        rows.append([entry["study"], str(entry["compared"]), str(entry["large"]),
                     f"{entry['share']} ({entry['reproduced']} of {entry['large']})", str(entry["faster"]),
                     str(entry["slower"]), str(entry["new"]), str(entry["missing"]), entry["worst"]])
    view["rows"] = len(frame)
    view["table"] = Table(
        columns=["study", "compared", f"at least {view['min_us']} us", "reproduced", "faster", "slower", "new",
                 "missing", "worst fresh / committed"], rows=rows,
        align=["l", "r", "r", "r", "r", "r", "r", "r", "p{4.4cm}"],
        caption=f"A fresh run on {gpu} against the committed results, per study: cases (implementation, shape, "
                f"dtype and timing) measured in both runs, those whose committed median is at least {view['min_us']} us, "
                "the share of those reproduced, the cases measured faster or slower (all lengths), new and missing "
                "cases, and the ratio farthest from 1 among the longer ones.")
    return view


# ---------------------------------------------------------------- method, limits, environment

def _ceiling_table(agg: Aggregate) -> Table:
    gpus = agg.gpus
    names = list(MEASURED_CEILINGS) + sorted({n for g in gpus for n in agg.ceiling(g)} - set(MEASURED_CEILINGS))
    units = dict(zip(agg.ceilings["name"], agg.ceilings["unit"]))
    rows = [[CEILING_LABELS.get(n, n), str(units.get(n, ""))] + [num(agg.ceiling(g).get(n)) for g in gpus] for n in names]
    return Table(columns=["ceiling", "unit"] + gpus, rows=rows, caption="Ceilings measured on each GPU, with its datasheet values.")


def _spread(frame: pd.DataFrame) -> dict | None:
    """How wide the rows' 95% confidence intervals of the median are, relative to the median."""
    ok = frame[(frame["status"] == "ok") & frame["ci_low_ms"].notna() & frame["ci_high_ms"].notna()
               & frame["median_ms"].notna()]
    if ok.empty:
        return None
    rel = (ok["ci_high_ms"] - ok["ci_low_ms"]) / ok["median_ms"]
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
        layout = env.get("run_layout") if isinstance(env.get("run_layout"), dict) else {}
        env_rows += [[f"run layout: {k}", str(v)] for k, v in layout.items()]
        reps, trials = rows["reps"].dropna(), rows["trials"].dropna()
        out.append({
            "slug": gpu, "name": str(env.get("gpu") or gpu), "rows": len(rows),
            "commit": str(env["git_commit"]) if env.get("git_commit") else None,
            "studies": sorted(set(rows["study"])), "counts": _status_counts(rows) if len(rows) else {},
            "datasheet": sheet["label"] if sheet else None,
            "reps_min": num(reps.min()) if len(reps) else DASH, "reps_max": num(reps.max()) if len(reps) else DASH,
            "trials_min": num(trials.min()) if len(trials) else DASH,
            "trials_max": num(trials.max()) if len(trials) else DASH,
            "cupti_rows": int((rows["timing"] == KERNEL_TIMING).sum()),
            "bench": {k: num(v) for k, v in bench.items()} if isinstance(bench, dict) else {},
            "launch_bound_mb": num(LAUNCH_BOUND_BYTES / 1e6),
            "layout": [f"{k}: {v}" for k, v in layout.items()],
            "clocks_before": before, "clocks_after": after, "spread": _spread(rows),
            "env_table": Table(columns=["key", "value"], rows=env_rows, align=["l", "p{10cm}"],
                               caption=f"Environment of the {gpu} results (env.json)."),
        })
    return out


def tolerances(verify: pd.DataFrame | None) -> list[dict]:
    """Each study's relative-error tolerance per dtype, as the interpreter checks recorded it."""
    if verify is None or verify.empty or "tolerance" not in verify:
        return []
    out = []
    for study, part in verify.dropna(subset=["tolerance"]).groupby("study", sort=False):
        limits = part.groupby("dtype", sort=False)["tolerance"].max()
        out.append({"study": study, "limits": ", ".join(f"{dt(d)} {sci(v)}" for d, v in limits.items())})
    return out


def build(agg: Aggregate, tables: dict, figures: list[dict], verify: pd.DataFrame | None = None,
          fresh_slug: str | None = None, figure_base: str = "../figures", config: dict | None = None,
          lead: str | None = None) -> dict:
    """Everything the templates print; `config` is the workflow's (its `bench` settings where the results'
    env.json does not record them); `lead` the GPU the paper leads with (config `report: lead_gpu`, read
    from `config` when not given; see analysis.primary_gpu)."""
    if lead is None:
        report = (config or {}).get("report")
        lead = report.get("lead_gpu", "auto") if isinstance(report, dict) else "auto"
    gpu = primary_gpu(agg.results, fresh_slug, lead, agg.gpus)
    gpus = gpu_views(agg)
    gpus_by_slug = {g["slug"]: g for g in gpus}
    studies = {s: study_view(agg, tables, s, gpu) for s in ("softmax", "attention", "decode")}
    studies["e2e"] = e2e_view(agg, tables, gpu)
    figs = {f["name"]: f for f in figures}
    return {
        "title": "Roofline Lab: fused softmax, flash attention and split-KV decode in Triton, measured against the best peers",
        "primary": next((g for g in gpus if g["slug"] == gpu), None),
        "gpus": gpus,
        "studies": studies,
        "claims": claims_view(tables),
        "qa": qa_view(agg, gpu),
        "reproduction": reproduction_view(agg, gpu),
        "cross": cross_gpu_view(agg, tables),
        "verify": verify_view(verify),
        "ceilings": _ceiling_table(agg) if agg.gpus else None,
        "tolerances": tolerances(verify),
        "harness": harness(agg.envs.get(gpu, {}), agg.results[agg.results["gpu"] == gpu], config) if gpu
        else harness({}, None, config),
        "verdict_tolerance": f"{TOLERANCE:.0%}",
        "tie_within": f"{TIE_WITHIN:.0%}",
        "reproduction_tolerance": f"{REPRODUCTION_TOLERANCE:.0%}",
        "ci_level": "95%",
        "problems": list(agg.problems),
        "figures": figs,
        "figure_base": figure_base,
        "reproduce_commands": ([f"git checkout {gpus_by_slug[gpu]['commit']}   # the commit the results were measured at"]
                               if gpu and gpus_by_slug.get(gpu, {}).get("commit") else []) + list(REPRODUCE_COMMANDS),
    }
