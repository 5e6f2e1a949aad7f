"""Rule e2e: one decoder block, PyTorch defaults vs our kernels, time by part -> e2e.csv.

A case whose measured speed-up exceeds its Amdahl bound (rooflab.qa's `amdahl` gate) is
measured once more; the job records its environment like the sweeps do.
"""
import time

import pandas as pd
import torch

from rooflab import qa
from rooflab.bench import DTYPES, context_broken, describe, is_oom, with_note
from rooflab.e2e import CONFIGS, DecoderBlock, measure, row_base
from rooflab.gpus import read_ceilings, write_json
from rooflab.gpuslots import claim_for_job, own_ceilings
from rooflab.gpustate import job_record, start_job
from rooflab.schema import columns, validate_frame
from rooflab.workflow import log_to

log_to(snakemake.log[0])
SLOT = claim_for_job(snakemake.resources)   # this job's own GPU and cores on a multi-GPU host (rooflab/gpuslots.py)
model, grid = snakemake.params.model, snakemake.params.grid
dtype = DTYPES[model["dtype"]]
ceilings = read_ceilings(own_ceilings(SLOT, snakemake.input.ceilings, snakemake.config))
label = "bf16" if model["dtype"] == "bfloat16" else "fp16"
ceiling_name = f"matmul_{label}_tflops"
ceiling, datasheet = ceilings.get(ceiling_name), ceilings.get(f"datasheet_{label}_tflops")
monitor, record = start_job()
record["cases"] = []          # clocks before and after each case, and its seconds
torch.manual_seed(0)
block = DecoderBlock(model["width"], model["heads"], model["kv_heads"], model["mlp_ratio"], dtype, "cuda")


def _row(row: dict) -> dict:
    return dict(row, gpu=snakemake.params.gpu, study="e2e", dtype=model["dtype"], ceiling_name=ceiling_name)


def failed_rows(phase: str, length: int, have: set, status: str, message: str) -> list[dict]:
    """A `total` row for each configuration of the case that has no row, saying why."""
    return [_row(dict(row_base(block, config, phase, length), part="total", timing="events", status=status,
                      message=message[:300]))
            for config in CONFIGS[phase] if config not in have]


def case_rows(phase: str, length: int, note: str | None = None) -> list[dict]:
    """The case's rows; a case that fails past measure's own handling keeps the rows it made, and
    every configuration without one gets an error row saying why."""
    rows, clock = [], time.perf_counter()
    case = {"phase": phase, "length": length, "before": monitor.read()}
    try:
        _measure_into(rows, phase, length, note)
    except Exception as exc:  # noqa: BLE001  a CUDA fault or an unforeseen failure: the rows say so
        rows += failed_rows(phase, length, {r["impl"] for r in rows}, "oom" if is_oom(exc) else "error",
                            f"case failed: {describe(exc)}")
        case["failed"] = describe(exc)
    record["cases"].append(dict(case, after=monitor.read(), seconds=round(time.perf_counter() - clock, 2)))
    return rows


def _measure_into(rows: list, phase: str, length: int, note: str | None) -> None:
    for row in measure(block, phase, length, model["batch"], snakemake.params.reps, snakemake.params.trials, dtype,
                       sustain_ms=model["sustain_ms"]):
        if row.get("flops") and row.get("median_ms"):
            row["tflops"] = row["flops"] / (row["median_ms"] * 1e-3) / 1e12
            row["frac_ceiling"] = row["tflops"] / ceiling if ceiling else None
            row["frac_datasheet"] = row["tflops"] / datasheet if datasheet else None
        if note:
            row["message"] = with_note(row.get("message"), note)
        rows.append(_row(row))
        print(f"{phase:8} {length:6} {row['impl']:15} {row['part']:12} {row.get('timing', ''):9} {row['status']:9} "
              f"{row.get('median_ms')}", flush=True)


cases, broken = {}, None
for phase, length in [(phase, length) for phase in ("prefill", "decode") for length in grid[phase]]:
    if broken:                 # the CUDA context failed at an earlier case: nothing more can run
        cases[(phase, length)] = failed_rows(phase, length, set(), "error",
                                             f"not measured: the CUDA context failed at an earlier case ({broken})")
        continue
    cases[(phase, length)] = case_rows(phase, length)
    if any(r["status"] == "error" for r in cases[(phase, length)]):
        broken = context_broken()
frame = pd.DataFrame([r for rows in cases.values() for r in rows], columns=list(columns("e2e")))
flagged = qa.flags(frame, snakemake.params.qa)
record["flags"] = flagged.to_dict(orient="records")
for _, flag in ([] if broken else flagged.drop_duplicates(["phase", "seqlen", "cache_len"]).iterrows()):
    key = (flag["phase"], int(flag["seqlen"] if flag["phase"] == "prefill" else flag["cache_len"]))
    print(f"quality flag {flag['gate']} at {key}: {flag['detail']}; measuring the case again")
    again = case_rows(*key, note=qa.REMEASURED)
    failed = record["cases"][-1].get("failed")
    if failed:                 # the first measurement stays, saying so
        note = f"remeasure failed: {failed}"
        cases[key] = [dict(r, message=with_note(r.get("message"), note)) for r in cases[key]]
    else:
        cases[key] = again
frame = pd.DataFrame([r for rows in cases.values() for r in rows], columns=list(columns("e2e")))
validate_frame(frame, snakemake.output.csv).to_csv(snakemake.output.csv, index=False)
record["end"] = job_record(monitor)
write_json(snakemake.output.env, record)
