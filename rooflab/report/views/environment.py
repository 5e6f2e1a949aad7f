"""Each GPU's environment record, clocks, uncertainty and measured ceilings (Appendix G)."""
from __future__ import annotations

import pandas as pd

from rooflab import datasheet
from rooflab.report.analysis import KERNEL_TIMING, LAUNCH_BOUND_BYTES, shape_label
from rooflab.report.fmt import DASH, dt, num, pct
from rooflab.report.load import MEASURED_CEILINGS, Aggregate
from rooflab.report.markup import Table
from rooflab.sized_ceilings import SIZED


CEILING_LABELS = {
    "copy_tbps": "copy (read + write)", "read_tbps": "read only", "write_tbps": "write only",
    "matmul_fp16_tflops": "fp16 matmul", "matmul_bf16_tflops": "bf16 matmul", "launch_us": "kernel launch",
    "launch_graph_us": "launch in a CUDA graph", "datasheet_bandwidth_tbps": "datasheet peak: bandwidth",
    "datasheet_fp16_tflops": "datasheet peak: fp16 tensor", "datasheet_bf16_tflops": "datasheet peak: bf16 tensor",
    "datasheet_fp32_tflops": "datasheet peak: fp32", "datasheet_memory_gb": "datasheet memory",
}
ENV_KEYS = ("gpu", "slug", "compute_capability", "sm_count", "memory_gib", "l2_mib", "driver", "cuda", "torch",
            "triton", "python", "platform", "git_commit", "time")
CLOCK_KEYS = ("clocks.sm", "clocks.max.sm", "clocks.mem", "power.draw", "power.limit", "temperature.gpu",
              "clocks_throttle_reasons.active", "persistence_mode")


def status_counts(frame: pd.DataFrame) -> dict:
    counts = frame["status"].value_counts()
    return {s: int(counts.get(s, 0)) for s in ("ok", "incorrect", "oom", "unsupported", "error")}


SIZED_LABELS = {"read": "read only, {} MiB", "copy": "copy, {} MiB moved"}


def _label(name: str) -> str:
    sized = SIZED.fullmatch(name)
    return SIZED_LABELS[sized.group(1)].format(sized.group(2)) if sized else CEILING_LABELS.get(name, name)


def _order(name: str):
    """Sized reads first, then sized copies, each by size; the other names alphabetically."""
    sized = SIZED.fullmatch(name)
    return (0, sized.group(1) != "read", int(sized.group(2)), "") if sized else (1, False, 0, name)


def _ceiling_table(agg: Aggregate) -> Table:
    gpus = agg.gpus
    extra = {n for g in gpus for n in agg.ceiling(g)} - set(MEASURED_CEILINGS)
    names = list(MEASURED_CEILINGS) + sorted(extra, key=_order)
    units = dict(zip(agg.ceilings["name"], agg.ceilings["unit"]))
    rows = [[_label(n), str(units.get(n, ""))] + [num(agg.ceiling(g).get(n)) for g in gpus] for n in names]
    return Table(columns=["ceiling or peak", "unit"] + gpus, rows=rows,
                 caption="The ceilings measured on each GPU (calibrate rule), then its datasheet peaks (data/gpus.yaml).")


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
            "studies": sorted(set(rows["study"])), "counts": status_counts(rows) if len(rows) else {},
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
