"""Rule env: the env_before record, the clock state after every sweep finished, and each measuring
job's own record (GPU UUID, clocks at its start and end and around every case, other processes on
the GPU, host load), with a check that every job ran on the GPU env_before saw."""
import json
from pathlib import Path

from rooflab.gpus import clock_state, write_json
from rooflab.workflow import log_to

log_to(snakemake.log[0])
with open(snakemake.input.before) as handle:
    record = json.load(handle)
record["clocks_after"] = clock_state()
record["outputs"] = list(snakemake.input.measured)
folder = Path(snakemake.input.before).parent
jobs = {str(p.relative_to(folder)): json.loads(p.read_text()) for p in sorted(folder.glob("*/*.env.json"))}
record["jobs"] = jobs
uuids = {job["start"]["gpu_uuid"] for job in jobs.values() if "start" in job}
record["one_gpu"] = uuids <= {record.get("gpu_uuid")}
write_json(snakemake.output.json, record)
print("clocks before:", record["clocks_before"], "\nclocks after:", record["clocks_after"])
print(f"{len(jobs)} job records; every job on {record.get('gpu_uuid')}: {record['one_gpu']}")
