"""Parse-time helpers for the Snakefile: which GPU is here, which result folders exist."""
from __future__ import annotations

import subprocess
from pathlib import Path

from rooflab.gpus import slug


def importable_from(root: str) -> None:
    """Put the checkout on PYTHONPATH so every rule's script imports `rooflab` and `kernels`."""
    import os

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))


def detect_gpu(device: str = "auto") -> tuple[str | None, str | None]:
    """(device name, slug) of GPU 0 as nvidia-smi reports it, or (None, None) without one.

    A device name other than "auto" is taken as given (a login node submitting to GPU nodes).

    nvidia-smi is asked rather than torch so that Snakemake's own process never creates a
    CUDA context that would hold GPU memory for the whole run.
    """
    if device != "auto":
        return device, slug(device)
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None, None
    names = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0 or not names:
        return None, None
    return names[0], slug(names[0])


def result_dirs(committed_root: str, fresh: str | None) -> list[str]:
    """Every committed GPU folder, with this run's fresh folder replacing a committed one of the same slug."""
    root = Path(committed_root)
    dirs = sorted(str(p) for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    if fresh:
        dirs = [d for d in dirs if Path(d).name != Path(fresh).name] + [fresh]
    return dirs


class _Tee:
    def __init__(self, *streams):
        self.streams = streams

    def write(self, text):
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self):
        for stream in self.streams:
            stream.flush()


def log_to(path: str):
    """Send this script's stdout and stderr to its rule's log file as well as the console."""
    import sys

    handle = open(path, "w", buffering=1)
    sys.stdout = _Tee(sys.__stdout__, handle)
    sys.stderr = _Tee(sys.__stderr__, handle)
    return handle


def within_budget(study, shapes: list[dict], dtype: str, cfg: dict) -> list[dict]:
    """Drop shapes whose inputs exceed the study's `max_cache_gib` (when it has one), saying which."""
    limit = cfg.get("max_cache_gib")
    if limit is None or not hasattr(study, "input_bytes"):
        return shapes
    kept = []
    for shape in shapes:
        size = study.input_bytes(shape, dtype) / 2**30
        if size > limit:
            print(f"skipped {shape} {dtype}: inputs {size:.1f} GiB > max_cache_gib {limit}")
        else:
            kept.append(shape)
    return kept
