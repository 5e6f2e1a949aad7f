"""Rule calibrate: measured ceilings and datasheet values -> ceilings.csv (name, value, unit, how)."""
import csv
import json

from rooflab.ceilings import measure
from rooflab.gpus import datasheet_rows
from rooflab.gpuslots import claim_for_job
from rooflab.workflow import log_to

log_to(snakemake.log[0])
SLOT = claim_for_job(snakemake.resources)   # this job's own GPU and cores on a multi-GPU host (rooflab/gpuslots.py)
with open(snakemake.input.env) as handle:
    device = json.load(handle)["gpu"]
rows = measure(snakemake.params.buffer_gib, snakemake.params.matmul_n) + datasheet_rows(device)
with open(snakemake.output.csv, "w", newline="") as handle:
    writer = csv.writer(handle)
    writer.writerow(["name", "value", "unit", "how"])
    for name, value, unit, how in rows:
        writer.writerow([name, f"{value:.6g}", unit, how])
        print(f"{name:28} {value:10.4g} {unit:8} {how}")
