"""The shared tables, derived once from the aggregate and written under results/aggregate/.

cases        every implementation's row of each case in the timing that judges the case
             (rooflab.report.analysis.judged): the kernel alone where measured, else plain calls
comparisons  one line per (GPU, study, dtype, shape, against): our kernel against the fastest correct
             implementation of a group (`peer`: the field's implementations; `seed`: the seed articles'
             designs; `strategy`: our own forced strategies) or against one named implementation, each
             case in the timing that judges it (rooflab.report.analysis.judged), with the speedup (their
             median time over ours), its interval from both rows' 95% confidence intervals and the
             outcome for ours (win / tie / loss, rooflab.report.analysis.outcome)
verdicts     every published claim of the seeds against our measurement (rooflab.report.verdicts)
amdahl       the end-to-end block with our softmax swapped in, against Amdahl's prediction

The figures and the paper read these tables; nothing under rooflab/report/ computes them again.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from rooflab.report.analysis import (E2E_GRAPH_TIMING, METRIC, PLAIN_TIMING, is_ours, is_peer, is_seed, judged,
                                     shape_label, versus)
from rooflab.report.load import BOOL_COLUMNS, SHAPE_UNION, TEXT_COLUMNS, Aggregate, _as_bool
from rooflab.report.verdicts import verdict_table
from rooflab.schema import SHAPE_COLUMNS

TABLES = ("cases", "comparisons", "verdicts", "amdahl")
MEASURED = ("softmax", "attention", "decode")
# The groups ours is compared with as a whole (the fastest correct member of each), besides every
# implementation on its own (`against` = its impl name).
GROUPS = {"peer": is_peer, "seed": is_seed, "strategy": lambda impl: is_ours(impl) and impl != "ours"}
COMPARISON_COLUMNS = (
    "gpu", "study", "dtype", *SHAPE_UNION, "shape", "timing", "against", "ours_status", "ours_ms", "ours_low_ms",
    "ours_high_ms", "ours_metric", "ours_frac", "ours_frac_plain", "ceiling_name", "bytes", "flops", "other_impl", "other_ms",
    "other_metric", "other_frac_plain", "speedup", "speedup_low", "speedup_high", "outcome")
AMDAHL_COLUMNS = (
    "gpu", "dtype", "phase", "seqlen", "cache_len", "width", "heads", "swapped", "share", "part_speedup", "bound",
    "predicted", "measured", "measured_low", "measured_high", "outcome", "graph_measured")


def _ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["status"] == "ok") & frame["median_ms"].notna()]


def comparisons(frame: pd.DataFrame, study: str) -> pd.DataFrame:
    """The comparisons lines of one study's rows (every GPU)."""
    metric = METRIC[study]
    keys = ["gpu", "dtype", *SHAPE_COLUMNS[study]]
    cases = judged(frame, study)
    # every implementation's plain-call share of the ceiling, by case: the figures set ours and the best peer
    # side by side in one timing, whichever timing judged the case
    plain_rows = _ok(frame[frame["timing"] == PLAIN_TIMING])
    shares = {(*k, impl): f for *k, impl, f in plain_rows[[*keys, "impl", "frac_ceiling"]].itertuples(index=False)}
    records = []
    for key, group in cases.groupby(keys, sort=True, dropna=False):
        mine = group[group["impl"] == "ours"]
        if mine.empty:
            continue
        mine = mine.iloc[0]
        ok = mine["status"] == "ok" and pd.notna(mine["median_ms"])
        base = dict(zip(keys, key), study=study, shape=shape_label(mine, study), timing=mine["timing"],
                    ours_status=mine["status"], ceiling_name=mine["ceiling_name"], bytes=mine["bytes"], flops=mine["flops"],
                    ours_frac_plain=shares.get((*key, "ours")))
        if ok:
            base.update(ours_ms=mine["median_ms"], ours_low_ms=mine["ci_low_ms"], ours_high_ms=mine["ci_high_ms"],
                        ours_metric=mine[metric], ours_frac=mine["frac_ceiling"])
        others = _ok(group[group["impl"] != "ours"])
        targets = {name: others[others["impl"].map(keep).astype(bool)] for name, keep in GROUPS.items()}
        targets.update({impl: others[others["impl"] == impl] for impl in sorted(set(group["impl"]) - {"ours"})})
        for against, candidates in targets.items():
            if candidates.empty and against in GROUPS:
                continue
            rec = dict(base, against=against)
            if not candidates.empty:
                best = candidates.loc[candidates["median_ms"].idxmin()]
                rec.update(other_impl=best["impl"], other_ms=best["median_ms"], other_metric=best[metric],
                           other_frac_plain=shares.get((*key, best["impl"])))
                if ok:
                    rec.update(zip(("speedup", "speedup_low", "speedup_high", "outcome"), versus(mine, best)))
            else:
                rec["other_impl"] = against
            records.append(rec)
    table = pd.DataFrame.from_records(records, columns=list(COMPARISON_COLUMNS))
    for col in BOOL_COLUMNS:      # object, so that concatenating the studies keeps True / False (never 1.0)
        table[col] = table[col].astype(object)
    return table


def amdahl(frame: pd.DataFrame) -> pd.DataFrame:
    """Per end-to-end block (phase, length): the block with our softmax swapped in (`ours_softmax`) against
    eager, next to Amdahl's prediction from the softmax part's share of the eager block and its own speedup."""
    records = []
    parts = _ok(frame[frame["timing"] == PLAIN_TIMING])
    graphs = _ok(frame[(frame["timing"] == E2E_GRAPH_TIMING) & (frame["part"] == "total")])
    keys = ["gpu", "dtype", "phase", "seqlen", "cache_len", "width", "heads"]
    for key, block in parts.groupby(keys, sort=True, dropna=False):
        def row(impl, part):
            sel = block[(block["impl"] == impl) & (block["part"] == part)]
            return sel.iloc[0] if not sel.empty else None
        eager, mine = row("eager", "total"), row("ours_softmax", "total")
        s_eager, s_mine = row("eager", "softmax"), row("ours_softmax", "softmax")
        if any(r is None for r in (eager, mine, s_eager, s_mine)):
            continue
        share = float(s_eager["median_ms"]) / float(eager["median_ms"])
        k = float(s_eager["median_ms"]) / float(s_mine["median_ms"])
        measured, low, high, result = versus(mine, eager)
        replay = graphs.merge(pd.DataFrame([dict(zip(keys, key))]), on=keys)
        g = {i: replay[replay["impl"] == i]["median_ms"] for i in ("eager", "ours_softmax")}
        records.append(dict(zip(keys, key), swapped="softmax", share=share, part_speedup=k, bound=1 / (1 - share),
                            predicted=1 / ((1 - share) + share / k), measured=measured, measured_low=low,
                            measured_high=high, outcome=result,
                            graph_measured=float(g["eager"].iloc[0]) / float(g["ours_softmax"].iloc[0])
                            if len(g["eager"]) and len(g["ours_softmax"]) else None))
    return pd.DataFrame.from_records(records, columns=list(AMDAHL_COLUMNS))


def derive(agg: Aggregate, prefer: list[str] | None = None) -> dict[str, pd.DataFrame]:
    """Every shared table of the aggregate; `prefer` orders the GPUs a claim from another GPU is set beside."""
    studies = {s: agg.study(s) for s in MEASURED}
    parts = [comparisons(frame, s) for s, frame in studies.items() if not frame.empty]
    parts = [p for p in parts if not p.empty]
    table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    cases = [judged(frame, s) for s, frame in studies.items() if not frame.empty]
    cases = pd.concat([c for c in cases if not c.empty] or [agg.results.iloc[0:0]], ignore_index=True)
    blocks = amdahl(agg.study("e2e"))
    return {"cases": cases.reindex(columns=agg.results.columns), "comparisons": table,
            "verdicts": verdict_table(agg.published, agg.results, prefer, blocks), "amdahl": blocks}


def write(tables: dict[str, pd.DataFrame], paths: dict[str, str | Path]) -> None:
    for name in TABLES:
        Path(paths[name]).parent.mkdir(parents=True, exist_ok=True)
        tables[name].to_csv(paths[name], index=False)


def read(paths: dict[str, str | Path]) -> dict[str, pd.DataFrame]:
    """The tables back from their CSVs, shape columns typed as the aggregate types them."""
    text = {c: object for c in BOOL_COLUMNS + TEXT_COLUMNS + ("shape", "note", "claim", "section", "message",
                                                              "strategy", "convention", "versus")}
    out = {}
    for name in TABLES:
        frame = pd.read_csv(paths[name], keep_default_na=True, na_values=[""], dtype=text)
        for col in BOOL_COLUMNS:
            if col in frame:
                frame[col] = frame[col].map(lambda v: None if pd.isna(v) else _as_bool(v)).astype(object)
        for col in set(SHAPE_UNION) & set(frame.columns) - set(BOOL_COLUMNS) - set(TEXT_COLUMNS):
            frame[col] = pd.to_numeric(frame[col]).astype("Int64")
        out[name] = frame
    return out


# select()'s names for the comparison's columns: the fastest of the group is the "best", ours against it "vs_best".
AS_BEST = {"other_impl": "best_impl", "other_ms": "best_ms", "other_metric": "best_metric",
           "other_frac_plain": "best_frac_plain", "speedup": "vs_best",
           "speedup_low": "vs_best_low", "speedup_high": "vs_best_high", "outcome": "vs_best_outcome"}


def select(table: pd.DataFrame, study: str, against: str, gpu: str | None = None) -> pd.DataFrame:
    """The comparisons lines of one study against one group or implementation (on one GPU), with the study's
    shape columns, the compared one's columns named best_* and the speedup vs_best*."""
    part = table[(table["study"] == study) & (table["against"] == against)]
    if gpu is not None:
        part = part[part["gpu"] == gpu]
    cols = [c for c in COMPARISON_COLUMNS if c not in SHAPE_UNION or c in SHAPE_COLUMNS[study]]
    return part[cols].rename(columns=AS_BEST).reset_index(drop=True)
