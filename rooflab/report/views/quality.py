"""The run's quality record (qa.csv), its reproduction record (reproduction.csv) and the interpreter checks."""
from __future__ import annotations

import math
import statistics

import pandas as pd

from rooflab.qa import forced_twin
from rooflab.report.analysis import shape_label
from rooflab.report.fmt import DASH, dt, num, pct, ratio, sci
from rooflab.report.fmt import missing as _missing
from rooflab.report.load import Aggregate, _as_bool
from rooflab.report.markup import Table

# Studies whose forced twin of `ours` runs the kernel ours dispatched to with the same launch settings
# (attention's ours_triton autotunes its own configs, so its pairs are not the same code).
SAME_CODE_STUDIES = ("softmax", "decode")


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


# The quality gates of rooflab/qa.py (qa.csv's `gate`), as the paper names them.
QA_GATES = {
    "ours_vs_strategy": "the dispatched kernel against the same strategy forced (the same code, so medians far "
                        "apart with disjoint intervals mean a noisy run)",
    "dtype_twin": "float16 against bfloat16 for one implementation and shape of a memory-bound study (the same "
                  "bytes move)",
    "above_ceiling": "a row faster than its measured ceiling",
    "few_samples": "a median behind too few timed calls or trials",
    "amdahl": "an end-to-end block sped up more than Amdahl's law allows for the part swapped, even at the "
              "least speedup its intervals allow",
}
REPRODUCTION_MIN_MS = 0.020    # the reproduction summary counts cases whose committed time is at least this
REPRODUCTION_TOLERANCE = 0.05  # medians this close reproduce (the reproduce rule's tolerance)


def _flag(value) -> bool:
    try:
        return not _missing(value) and _as_bool(value)
    except ValueError:
        return False


def same_code_view(agg: Aggregate, tables: dict, gpu: str | None) -> dict | None:
    """The harness's own floor: `ours` against the strategy it dispatched to, forced (the same kernel and
    launch, timed in the same case), over the comparisons of SAME_CODE_STUDIES on the paper's GPU: how far
    apart the two medians lie and how many pairs the tie rule still tells apart. None without pairs."""
    cmp = tables.get("comparisons")
    if gpu is None or cmp is None or cmp.empty:
        return None
    cmp = cmp[cmp["gpu"] == gpu]
    pairs, logs = [], {}
    for study in SAME_CODE_STUDIES:
        frame = agg.study(study)
        ours = frame[(frame["gpu"] == gpu) & (frame["impl"] == "ours") & (frame["status"] == "ok")]
        twins = {(r["dtype"], shape_label(r, study)): forced_twin(study, r["strategy"])
                 for _, r in ours.iterrows() if isinstance(r["strategy"], str) and r["strategy"].strip()}
        for _, c in cmp[cmp["study"] == study].iterrows():
            twin = twins.get((c["dtype"], c["shape"]))
            if twin is not None and c["against"] == twin and not _missing(c["speedup"]):
                log = math.log(float(c["speedup"]))          # log(twin / ours): below 0 where ours is the slower
                logs.setdefault(study, []).append(log)
                pairs.append((log, c["outcome"] != "tie",
                              f"{study} {c['shape']} {dt(c['dtype'])}, {ratio(float(c['speedup']))}"))
    if not pairs:
        return None
    worst = max(pairs, key=lambda p: abs(p[0]))
    by_study = []
    for study, values in logs.items():
        mean = statistics.fmean(values)
        gap = abs(math.expm1(-mean))
        by_study.append({"study": study, "pairs": len(values), "slower": sum(v < 0 for v in values),
                         "faster": sum(v > 0 for v in values), "mean": pct(gap),
                         "mean_side": "apart" if gap < 5e-4 else "slower" if mean < 0 else "faster"})
    return {"pairs": len(pairs), "studies": " and ".join(SAME_CODE_STUDIES),
            "median": pct(math.expm1(statistics.median(abs(p[0]) for p in pairs))), "max": pct(math.expm1(abs(worst[0]))),
            "apart": sum(p[1] for p in pairs), "worst": worst[2], "by_study": by_study}


def qa_view(agg: Aggregate, gpu: str | None) -> dict:
    """The quality record of the paper's GPU: every open flag of its qa.csv, or that it has none; the same
    for each other GPU read (`others`: the claims judged on them and the cross-GPU appendix use their rows)."""
    view = {"gpu": gpu, "gates": [f"{name}, {text}" for name, text in QA_GATES.items()],
            **_record(agg, gpu), "others": [dict(gpu=g, **_record(agg, g)) for g in agg.gpus if g != gpu]}
    return view


def _record(agg: Aggregate, gpu: str | None) -> dict:
    """{present, open, lines, closed} of one GPU's qa.csv: each open flag as one line of text."""
    record = {"present": agg.has_record(gpu, "qa.csv"), "open": [], "lines": 0, "closed": 0}
    if not record["present"]:
        return record
    lines = agg.qa[agg.qa["gpu"] == gpu]
    is_open = lines["open"].map(_flag).astype(bool)
    record.update(lines=len(lines), closed=int((~is_open).sum()))
    for _, r in lines[is_open].iterrows():
        shape = "" if _missing(r["shape"]) else str(r["shape"])
        record["open"].append(
            f"{r['study']}, {r['gate']}: {shape}, {dt(str(r['dtype']))}, {r['impl']}: {num(r['value'])} against a "
            f"limit of {num(r['limit'])}; {'re-measured once and still flagged' if _flag(r['remeasured']) else 'not re-measured'}"
            + (f" ({r['detail']})" if not _missing(r["detail"]) else ""))
    return record


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


def _run_label(run: dict) -> str:
    """`commit 3706b35, full profile, GPU-4673...d12e, 2026-11-30 10:24 UTC` from a run identity."""
    parts = []
    if run.get("git_commit"):
        parts.append(f"commit {str(run['git_commit'])[:7]}")
    if run.get("profile"):
        parts.append(f"{run['profile']} profile")
    if run.get("gpu_uuid"):
        parts.append(f"GPU {run['gpu_uuid']}")
    if run.get("time"):
        parts.append(str(run["time"]).replace("T", " ")[:16] + " UTC")
    return ", ".join(parts) or DASH


def reproduction_view(agg: Aggregate, gpu: str | None) -> dict:
    """This GPU's fresh run against its committed one, per study (rooflab.reproduce.summary)."""
    from rooflab import reproduce

    view = {"gpu": gpu, "present": agg.has_record(gpu, "reproduction.csv"), "min_us": num(REPRODUCTION_MIN_MS * 1e3),
            "rows": 0, "table": None, "studies": [], "runs": None}
    if not view["present"]:
        return view
    sidecar = (agg.envs.get(gpu) or {}).get("reproduction")
    if isinstance(sidecar, dict) and all(isinstance(sidecar.get(k), dict) for k in ("committed", "fresh")):
        view["runs"] = {"committed": _run_label(sidecar["committed"]), "fresh": _run_label(sidecar["fresh"]),
                        "same_gpu": bool(sidecar.get("same_gpu")), "same_commit": bool(sidecar.get("same_commit")),
                        "same_code": sidecar.get("same_measuring_code")}
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
