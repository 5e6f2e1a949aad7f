"""Rule calibrate: measured ceilings and datasheet values -> ceilings.csv (name, value, unit, how)."""
import json

from rooflab.ceilings import measure, write_csv
from rooflab.gpus import datasheet_rows
from rooflab.gpuslots import claim_for_job, keep_as_own
from rooflab.workflow import log_to

log_to(snakemake.log[0])
SLOT = claim_for_job(snakemake.resources)   # this job's own GPU and cores on a multi-GPU host (rooflab/gpuslots.py)
with open(snakemake.input.env) as handle:
    device = json.load(handle)["gpu"]
rows = (measure(snakemake.params.buffer_gib, snakemake.params.matmul_n, snakemake.params.read_sizes_mib,
                snakemake.params.copy_sizes_mib)
        + datasheet_rows(device))
write_csv(snakemake.output.csv, rows)
keep_as_own(SLOT, snakemake.output.csv)   # a run of several GPU slots: this GPU's ceilings for its later jobs
