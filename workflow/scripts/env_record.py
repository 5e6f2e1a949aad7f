"""Rule env_before: versions, GPU properties and clock state before any measurement."""
from rooflab.gpus import clock_state, environment, write_json
from rooflab.workflow import log_to

log_to(snakemake.log[0])
record = environment(dict(snakemake.config))
expected = snakemake.config["device"]
if expected != "auto" and expected != record["gpu"]:
    raise RuntimeError(f"config device {expected!r} but this node has {record['gpu']!r}")
record["clocks_before"] = clock_state()
write_json(snakemake.output.json, record)
print(f"recorded {record['gpu']} ({record['slug']}), driver {record['driver']}, torch {record['torch']}")
