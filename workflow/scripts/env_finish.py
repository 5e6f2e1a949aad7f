"""Rule env: the env_before record plus the clock state after every sweep finished."""
import json

from rooflab.gpus import clock_state, write_json
from rooflab.workflow import log_to

log_to(snakemake.log[0])
with open(snakemake.input.before) as handle:
    record = json.load(handle)
record["clocks_after"] = clock_state()
record["outputs"] = list(snakemake.input.measured)
write_json(snakemake.output.json, record)
print("clocks before:", record["clocks_before"], "\nclocks after:", record["clocks_after"])
