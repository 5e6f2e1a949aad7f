"""Rule calibrate: measured ceilings and datasheet values -> ceilings.csv (name, value, unit)."""
import csv
import json

from rooflab.gpus import datasheet_rows, measure_ceilings
from rooflab.workflow import log_to

log_to(snakemake.log[0])
with open(snakemake.input.env) as handle:
    device = json.load(handle)["gpu"]
rows = measure_ceilings(snakemake.params.buffer_gib, snakemake.params.matmul_n) + datasheet_rows(device)
with open(snakemake.output.csv, "w", newline="") as handle:
    writer = csv.writer(handle)
    writer.writerow(["name", "value", "unit"])
    for name, value, unit in rows:
        writer.writerow([name, f"{value:.6g}", unit])
        print(f"{name:28} {value:10.4g} {unit}")
