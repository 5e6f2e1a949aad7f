"""The method section's numbers: the harness settings of a run, the tolerances, the commands that reproduce it."""
from __future__ import annotations

import pandas as pd

from rooflab.report.fmt import dt, num, sci
from rooflab.schema import HOST_TIMING


L2_FLUSH_BYTES = 256 * 2**20   # the harness reads a buffer of this size before every timed call
# The harness's settings (config/config.yaml's `bench`), where neither the run's env.json nor the
# workflow's config records them: a row pools at least `min_reps` calls from `trials` trials, the L2
# flush reads `flush_mib`, and a case gets a `cupti` row beside its `events` row when it moves less
# than `kernel_below_bytes` or its fastest call takes under `kernel_below_ms`.
HARNESS = {"min_reps": 20, "trials": 6, "flush_mib": L2_FLUSH_BYTES / 2**20, "kernel_below_bytes": 64e6,
           "kernel_below_ms": 0.5}
# The commands of the paper's "How to reproduce" section (README.md says the same at more length).
REPRODUCE_COMMANDS = (
    "bash envs/setup.sh                     # .venv: torch, triton, snakemake, the peers",
    ".venv/bin/snakemake --cores 1          # env, ceilings, sweeps, checks, figures, paper",
    ".venv/bin/snakemake --cores 1 --profile config/profiles/quick   # a shorter grid",
    ".venv/bin/snakemake --cores 1 reproduce   # this run against the committed one",
    ".venv/bin/snakemake --cores 1 publish     # copy the run into data/results/<gpu>/",
)
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
            "cupti_us": num(float(values["kernel_below_ms"]) * 1e3),
            # whether the run also timed those calls on the host (`host` rows, the wrapper's own cost)
            "host_rows": bool(rows is not None and "timing" in rows and (rows["timing"] == HOST_TIMING).any()),
            # whether its host rows came from a pass before any CUPTI session (as its own config records)
            "host_first": recorded.get("host_first") is True}


def tolerances(verify: pd.DataFrame | None) -> list[dict]:
    """Each study's relative-error tolerance per dtype, as the interpreter checks recorded it."""
    if verify is None or verify.empty or "tolerance" not in verify:
        return []
    out = []
    for study, part in verify.dropna(subset=["tolerance"]).groupby("study", sort=False):
        limits = part.groupby("dtype", sort=False)["tolerance"].max()
        out.append({"study": study, "limits": ", ".join(f"{dt(d)} {sci(v)}" for d, v in limits.items())})
    return out
