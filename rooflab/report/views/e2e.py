"""The end-to-end block: its configuration, the time of each configuration by part, and the Amdahl checks
(read from the derived table)."""
from __future__ import annotations


from rooflab.report import headline
from rooflab.report.analysis import E2E_GRAPH_TIMING, PLAIN_TIMING
from rooflab.report.fmt import DASH, dt, listing, num, pct, ratio
from rooflab.report.fmt import missing as _missing
from rooflab.report.load import Aggregate
from rooflab.report.markup import Table
from rooflab.report.views.environment import status_counts
from rooflab.report.views.studies import STUDY_TITLES


def _length(phase, seqlen, cache_len) -> str:
    return f"S={seqlen}" if phase == "prefill" else f"L={cache_len}"


def e2e_view(agg: Aggregate, tables: dict, gpu: str | None) -> dict:
    frame = agg.study("e2e")
    view = {"name": "e2e", "title": STUDY_TITLES["e2e"], "has_rows": not frame.empty, "gpus": sorted(set(frame["gpu"]))}
    frame = frame[frame["gpu"] == gpu] if gpu else frame.iloc[0:0]
    view.update(here=not frame.empty, rows=len(frame), counts=status_counts(frame) if len(frame) else {})
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
                                  "and the whole block replayed as one CUDA graph (its GPU time, without the host's launch gaps).")
    view["amdahl"] = amdahl
    # where softmax weighs most, among the phases timed part by part without a host-bound step
    timed = [a for a in amdahl if a["graph"] is None] or amdahl
    view["amdahl_top"] = max(timed, key=lambda a: a["_share"]) if timed else None
    return view
