"""The GPU this run measures: its slug, its environment record and its own ceilings.

Ceilings are measured, never assumed: a device-to-device copy, a read-only reduction and
a fill over buffers many times the L2, dense fp16/bf16 matrix products, and the launch
floor of a tiny kernel, plain and inside a CUDA graph. Datasheet values ride along
(from data/gpus.yaml) so every row can also be read as a fraction of the vendor's number.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys

import torch

NVIDIA_SMI_FIELDS = (
    "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "power.draw", "power.limit",
    "temperature.gpu", "clocks_throttle_reasons.active", "persistence_mode", "compute_mode",
)


def slug(device_name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200' (lower-case, runs of other characters become one dash)."""
    text = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")
    if not text:
        raise ValueError(f"cannot make a slug from device name {device_name!r}")
    return text


def cuda_device_name() -> str | None:
    """The name of CUDA device 0, or None when this machine has no usable CUDA GPU."""
    try:
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            return torch.cuda.get_device_name(0)
    except RuntimeError:
        pass
    return None


def _run(cmd: list[str]) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def clock_state() -> dict:
    """Clocks, power and throttle reasons as nvidia-smi reports them now (recorded, never changed)."""
    out = _run(["nvidia-smi", f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}", "--format=csv,noheader"])
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
    out = _run(["git", "rev-parse", "HEAD"])
    if out and _run(["git", "status", "--porcelain", "--untracked-files=no"]):
        out += "-dirty"
    return out or "unknown"


def environment(config: dict) -> dict:
    """Everything a reader needs to reproduce or discount a run."""
    props = torch.cuda.get_device_properties(0)
    name = torch.cuda.get_device_name(0)
    import triton
    driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return {
        "gpu": name,
        "slug": slug(name),
        "sm_count": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 2),
        "l2_mib": round(getattr(props, "L2_cache_size", 0) / 2**20, 2),
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": driver.splitlines()[0] if driver else "unknown",
        "gpus_on_host": (_run(["nvidia-smi", "-L"]) or "").splitlines(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv[1:],
        "config": config,
    }


# ---------------------------------------------------------------- ceilings

def _median_ms(fn, warmup_ms: float = 25, rep_ms: float = 200) -> float:
    import triton.testing
    return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


def _launch_floor_us(launches: int = 2000) -> tuple[float, float]:
    """Per-launch time of a one-element kernel: back-to-back plain launches, then graph replay."""
    x = torch.zeros(1, device="cuda")
    for _ in range(100):
        x.add_(1)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(launches):
        x.add_(1)
    end.record()
    torch.cuda.synchronize()
    plain = start.elapsed_time(end) * 1e3 / launches
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(launches):
                x.add_(1)
    graph.replay()
    torch.cuda.synchronize()
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    return plain, start.elapsed_time(end) * 1e3 / launches


def measure_ceilings(buffer_gib: float = 2.0, matmul_n: int = 8192) -> list[tuple[str, float, str]]:
    """(name, value, unit) rows for ceilings.csv, measured on CUDA device 0."""
    n = int(buffer_gib * 2**30) // 4
    src = torch.rand(n, device="cuda")   # fp32, buffer_gib GiB: many times any L2
    dst = torch.empty_like(src)
    nbytes = src.numel() * src.element_size()
    rows = [
        ("copy_tbps", 2 * nbytes / _median_ms(lambda: dst.copy_(src)) / 1e9, "TB/s"),
        ("read_tbps", nbytes / _median_ms(lambda: torch.sum(src)) / 1e9, "TB/s"),
        ("write_tbps", nbytes / _median_ms(lambda: dst.fill_(1.0)) / 1e9, "TB/s"),
    ]
    del src, dst
    torch.cuda.empty_cache()
    for dtype, label in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        a = torch.randn(matmul_n, matmul_n, device="cuda", dtype=dtype)   # random data, never zeros
        b = torch.randn(matmul_n, matmul_n, device="cuda", dtype=dtype)
        flops = 2.0 * matmul_n ** 3
        rows.append((f"matmul_{label}_tflops", flops / _median_ms(lambda: a @ b) / 1e9, "TFLOP/s"))
        del a, b
    plain, graphed = _launch_floor_us()
    rows += [("launch_us", plain, "us"), ("launch_graph_us", graphed, "us")]
    return rows


def datasheet_rows(device_name: str) -> list[tuple[str, float, str]]:
    """The vendor's numbers for this device from data/gpus.yaml (empty when it is not listed)."""
    from rooflab.report.datasheet import lookup
    entry = lookup(device_name)
    if not entry:
        return []
    units = {"bandwidth_tbps": "TB/s", "fp16_tflops": "TFLOP/s", "bf16_tflops": "TFLOP/s",
             "fp32_tflops": "TFLOP/s", "memory_gb": "GB"}
    return [(f"datasheet_{key}", float(entry[key]), unit) for key, unit in units.items() if entry.get(key) is not None]


def read_ceilings(path) -> dict[str, float]:
    """ceilings.csv -> {name: value}."""
    import pandas as pd
    frame = pd.read_csv(path)
    return {str(r.name): float(r.value) for r in frame.itertuples()}


def write_json(path, payload: dict) -> None:
    with open(path, "w") as handle:
        json.dump(payload, handle, indent=2, sort_keys=False, default=str)
        handle.write("\n")
