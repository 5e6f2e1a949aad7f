"""Rule e2e: one decoder block, PyTorch defaults vs our kernels, time by part -> e2e.csv.

A case whose measured speed-up exceeds its Amdahl bound (rooflab.qa's `amdahl` gate) is
measured once more; the job records its environment like the sweeps do.
"""
import time

import pandas as pd
import torch

from rooflab import qa
from rooflab.bench import DTYPES
from rooflab.e2e import DecoderBlock, measure
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


def case_rows(phase: str, length: int, note: str | None = None) -> list[dict]:
    rows, clock = [], time.perf_counter()
    case = {"phase": phase, "length": length, "before": monitor.read()}
    for row in measure(block, phase, length, model["batch"], snakemake.params.reps, snakemake.params.trials, dtype,
                       sustain_ms=model["sustain_ms"]):
        if row.get("flops") and row.get("median_ms"):
            row["tflops"] = row["flops"] / (row["median_ms"] * 1e-3) / 1e12
            row["frac_ceiling"] = row["tflops"] / ceiling if ceiling else None
            row["frac_datasheet"] = row["tflops"] / datasheet if datasheet else None
        if note:
            row["message"] = "; ".join(m for m in (row.get("message"), note) if m)
        rows.append(dict(row, gpu=snakemake.params.gpu, study="e2e", dtype=model["dtype"], ceiling_name=ceiling_name))
        print(f"{phase:8} {length:6} {row['impl']:15} {row['part']:12} {row.get('timing', ''):9} {row['status']:9} "
              f"{row.get('median_ms')}", flush=True)
    record["cases"].append(dict(case, after=monitor.read(), seconds=round(time.perf_counter() - clock, 2)))
    return rows


cases = {(phase, length): case_rows(phase, length) for phase in ("prefill", "decode") for length in grid[phase]}
frame = pd.DataFrame([r for rows in cases.values() for r in rows], columns=list(columns("e2e")))
flagged = qa.flags(frame, snakemake.params.qa)
record["flags"] = flagged.to_dict(orient="records")
for _, flag in flagged.drop_duplicates(["phase", "seqlen", "cache_len"]).iterrows():
    key = (flag["phase"], int(flag["seqlen"] if flag["phase"] == "prefill" else flag["cache_len"]))
    print(f"quality flag {flag['gate']} at {key}: {flag['detail']}; measuring the case again")
    cases[key] = case_rows(*key, note=qa.REMEASURED)
frame = pd.DataFrame([r for rows in cases.values() for r in rows], columns=list(columns("e2e")))
validate_frame(frame, snakemake.output.csv).to_csv(snakemake.output.csv, index=False)
record["end"] = job_record(monitor)
write_json(snakemake.output.env, record)
