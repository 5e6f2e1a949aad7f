"""Rule env_before: versions, GPU properties and clock state before any measurement."""
import sys
from pathlib import Path

from rooflab import measuring_code
from rooflab.gpus import clock_state, cuda_device_name, environment, write_json
from rooflab.gpuslots import claim_for_job
from rooflab.workflow import log_to, no_gpu_message

log_to(snakemake.log[0])
SLOT = claim_for_job(snakemake.resources)   # this job's own GPU and cores on a multi-GPU host (rooflab/gpuslots.py)
if cuda_device_name() is None:   # the first GPU job: one line rather than a CUDA traceback
    device = snakemake.config["device"]
    sys.exit(no_gpu_message(device) if device != "auto" else
             "nvidia-smi lists a GPU but torch sees no CUDA device: check the driver and torch's CUDA build")
record = environment(dict(snakemake.config))
expected = snakemake.config["device"]
if expected != "auto" and expected != record["gpu"]:
    raise RuntimeError(f"config device {expected!r} but this node has {record['gpu']!r}")
record["clocks_before"] = clock_state()
# which code measures (rooflab.measuring_code); scriptdir may read workflow/rules/../scripts, so resolve
# the ".." before taking the checkout two levels up
record["measuring_code"] = measuring_code.from_tree(Path(snakemake.scriptdir).resolve().parents[1])
write_json(snakemake.output.json, record)
print(f"recorded {record['gpu']} ({record['slug']}), driver {record['driver']}, torch {record['torch']}")
