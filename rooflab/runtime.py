"""Where a measuring run's wall clock goes, job by job.

Reads a results directory (`results/<gpu>/` or `data/results/<gpu>/`): Snakemake's `benchmark:`
files (`benchmarks/<job>.tsv`, the wall clock of each GPU job) and each sweep job's environment
record (`<study>/<dtype>.env.json`), whose `cases` hold the seconds spent per case on inputs and
float64 references, on each implementation's first call (compilation and autotuning; with the
compiling done ahead in parallel processes, `precompile_s`, counted here too), on the
warm-up calls that size the trials, and on the timed trials. What is left of a job's wall clock
is process start-up (interpreter, imports, CUDA context), the GPU warm-up and the CSV writing.

    python -m rooflab.runtime data/results/nvidia-h200      # a Markdown table
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

PHASES = ("start_up", "gpu_warm_up", "inputs_reference", "first_calls", "warm_up", "timing", "other")
HEADERS = {"start_up": "start-up", "gpu_warm_up": "GPU warm-up", "inputs_reference": "inputs + float64 refs",
           "first_calls": "first calls (compile, autotune)", "warm_up": "warm-up calls", "timing": "timed trials",
           "other": "other"}


def job_seconds(results: Path) -> dict[str, float]:
    """{job name: wall-clock seconds} from Snakemake's benchmark files."""
    out = {}
    for tsv in sorted((results / "benchmarks").glob("*.tsv")):
        with tsv.open() as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        if rows:
            out[tsv.stem] = float(rows[-1]["s"])
    return out


def phases(env: dict) -> dict[str, float]:
    """Seconds per phase of one sweep job, summed over its cases (see the module docstring)."""
    out = dict.fromkeys(PHASES[:-1], 0.0)
    compiled_ahead = env.get("precompile_s") or 0.0          # rooflab.precompile, before the job's record
    out["start_up"] = max((env.get("process_age_s") or 0.0) - compiled_ahead, 0.0)
    out["first_calls"] = compiled_ahead
    out["gpu_warm_up"] = (env.get("warm_up") or {}).get("seconds") or 0.0
    for case in env.get("cases", []):
        seconds = case.get("seconds") or {}
        out["inputs_reference"] += seconds.get("inputs_reference", 0.0)
        out["first_calls"] += sum((seconds.get("first_calls") or {}).values())
        out["warm_up"] += seconds.get("warm_up", 0.0)
        out["timing"] += seconds.get("timing", 0.0)
    return out


def breakdown(results: Path) -> list[dict]:
    """One dict per GPU job: `job`, `wall_s` and, for sweep jobs, the seconds of each phase."""
    results = Path(results)
    rows = []
    for job, wall in job_seconds(results).items():
        row = {"job": job, "wall_s": wall}
        if job.startswith("sweep_"):
            study, dtype = job.removeprefix("sweep_").split("_", 1)
            env_path = results / study / f"{dtype}.env.json"
            if env_path.exists():
                row.update(phases(json.loads(env_path.read_text())))
                row["other"] = max(wall - sum(row[p] for p in PHASES[:-1]), 0.0)
        rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    """The breakdown as a Markdown table, with a total line."""
    head = ["job", "wall clock"] + [HEADERS[p] for p in PHASES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    total = dict.fromkeys(("wall_s",) + PHASES, 0.0)
    for row in rows:
        cells = [row["job"], f"{row['wall_s']:.0f} s"]
        cells += [f"{row[p]:.0f} s" if p in row else "" for p in PHASES]
        lines.append("| " + " | ".join(cells) + " |")
        for key in total:
            total[key] += row.get(key, 0.0)
    lines.append("| **all jobs** | **" + f"{total['wall_s']:.0f} s** | "
                 + " | ".join(f"{total[p]:.0f} s" for p in PHASES) + " |")
    return "\n".join(lines)


def cache_note(results: Path) -> str | None:
    """A line saying the run started on warm compile caches (`compile_caches` of env_before.json in a
    fresh run, of env.json in a published one, which carries it over; rooflab.gpus), or None where
    they were empty or not recorded."""
    caches = None
    for name in ("env_before.json", "env.json"):
        path = Path(results) / name
        if path.exists():
            caches = json.loads(path.read_text()).get("compile_caches")
            break
    held = {name: entry.get("files", 0) for name, entry in (caches or {}).items()}
    if not any(held.values()):
        return None
    counts = " and ".join(f"{n} files in {name.capitalize()}'s" for name, n in held.items())
    return (f"The run started with {counts} compile cache: its first calls loaded kernels a fresh "
            "machine compiles, so they took less time than they would there.")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m rooflab.runtime <results directory>")
    print(markdown(breakdown(Path(sys.argv[1]))))
    note = cache_note(Path(sys.argv[1]))
    if note:
        print("\n" + note)
