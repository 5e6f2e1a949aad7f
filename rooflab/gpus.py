"""The GPU this run measures: its slug, its environment record and its datasheet values.

The measured ceilings are rooflab.ceilings'; datasheet values ride along (from
data/gpus.yaml) so every row can also be read as a fraction of the vendor's number.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys

from rooflab.datasheet import lookup, slug  # noqa: F401  (slug: the GPU folder name, used through this module)

NVIDIA_SMI_FIELDS = (
    "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "power.draw", "power.limit",
    "temperature.gpu", "clocks_throttle_reasons.active", "persistence_mode", "compute_mode",
)


def cuda_device_name() -> str | None:
    """The name of CUDA device 0, or None when this machine has no usable CUDA GPU."""
    import torch   # here, not at the top: the Snakefile and the report import this module without torch

    try:
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            return torch.cuda.get_device_name(0)
    except RuntimeError:
        pass
    return None


def run_command(cmd: list[str]) -> str | None:
    """A command's stripped stdout, or None when it is missing, fails or takes over 30 s."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def clock_state() -> dict:
    """Clocks, power and throttle reasons as nvidia-smi reports them now (recorded, never changed)."""
    out = run_command(["nvidia-smi", f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader"])
    if not out:
        return {"available": False}
    values = [v.strip() for v in out.splitlines()[0].split(",")]
    state = dict(zip(NVIDIA_SMI_FIELDS, values))
    state["available"] = True
    state["time"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return state


def git_commit() -> str:
    """The commit measured: $ROOFLAB_GIT_COMMIT when the tree was copied without .git."""
    env = os.environ.get("ROOFLAB_GIT_COMMIT")
    if env:
        return env
    out = run_command(["git", "rev-parse", "HEAD"])
    if out and run_command(["git", "status", "--porcelain", "--untracked-files=no"]):
        out += "-dirty"
    return out or "unknown"


def compile_caches() -> dict:
    """Triton's and Inductor's on-disk compile caches and how many files each held when asked: a
    run that starts on warm caches loads its kernels where a fresh machine compiles them, so its
    first calls take less of the wall clock (rooflab.runtime says so beside its table)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    from triton import knobs

    def files(folder: str) -> int:
        return sum(len(names) for _, _, names in os.walk(folder))

    return {name: {"dir": folder, "files": files(folder)}
            for name, folder in (("triton", knobs.cache.dir), ("inductor", cache_dir()))}


def environment(config: dict) -> dict:
    """Everything a reader needs to reproduce or discount a run."""
    import torch

    props = torch.cuda.get_device_properties(0)
    name = torch.cuda.get_device_name(0)
    import triton
    driver = run_command(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return {
        "gpu": name,
        "slug": slug(name),
        "gpu_uuid": "GPU-" + str(props.uuid),
        "sm_count": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 2),
        "l2_mib": round(getattr(props, "L2_cache_size", 0) / 2**20, 2),
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": driver.splitlines()[0] if driver else "unknown",
        "gpus_on_host": (run_command(["nvidia-smi", "-L"]) or "").splitlines(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv[1:],
        "compile_caches": compile_caches(),
        "config": config,
    }


def datasheet_rows(device_name: str) -> list[tuple[str, float, str, str]]:
    """The vendor's numbers for this device from data/gpus.yaml (empty when it is not listed)."""
    entry = lookup(device_name)
    if not entry:
        return []
    units = {"bandwidth_tbps": "TB/s", "fp16_tflops": "TFLOP/s", "bf16_tflops": "TFLOP/s",
             "fp32_tflops": "TFLOP/s", "memory_gb": "GB"}
    return [(f"datasheet_{key}", float(entry[key]), unit, "data/gpus.yaml")
            for key, unit in units.items() if entry.get(key) is not None]


def read_ceilings(path) -> dict[str, float]:
    """ceilings.csv -> {name: value}."""
    import pandas as pd
    frame = pd.read_csv(path)
    return {str(r.name): float(r.value) for r in frame.itertuples()}


def write_json(path, payload: dict) -> None:
    with open(path, "w") as handle:
        json.dump(payload, handle, indent=2, sort_keys=False, default=str)
        handle.write("\n")
