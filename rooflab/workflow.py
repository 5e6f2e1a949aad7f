"""Parse-time helpers for the Snakefile: which GPU is here, which result folders exist."""
from __future__ import annotations

import subprocess
from pathlib import Path

from rooflab.gpus import slug


def importable_from(root: str) -> None:
    """Put the checkout on PYTHONPATH so every rule's script imports `rooflab` and `kernels`."""
    import os

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))


def gpu_query(field: str) -> list[str]:
    """One nvidia-smi field (name, uuid, ...) per GPU on this machine (empty without a driver or a GPU)."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def gpu_names() -> list[str]:
    """Names of the GPUs nvidia-smi lists on this machine (empty without a driver or a GPU)."""
    return gpu_query("name")


def detect_gpu(device: str = "auto") -> tuple[str | None, str | None]:
    """(device name, slug) of GPU 0 as nvidia-smi reports it, or (None, None) without one.

    A device name other than "auto" is taken as given (a login node submitting to GPU nodes);
    `preflight` refuses it before any job runs when the jobs would run on this machine and it
    has no GPU.

    nvidia-smi is asked rather than torch so that Snakemake's own process never creates a
    CUDA context that would hold GPU memory for the whole run.
    """
    if device != "auto":
        return device, slug(device)
    names = gpu_names()
    if not names:
        return None, None
    return names[0], slug(names[0])


# Targets that only exist for a fresh run on this machine's GPU (workflow/rules/publish.smk,
# reproduce.smk); without a GPU, workflow/rules/no_fresh_run.smk defines them to fail.
FRESH_RUN_TARGETS = {"publish": "publish", "reproduce": "compare with the committed results"}


def no_gpu_message(device: str) -> str:
    """Why a measuring run cannot start on a machine without a CUDA GPU, in one line."""
    return (f"device forced to {device!r} but this machine has no CUDA GPU: run on the GPU node, "
            "or submit with the slurm profile")


def no_fresh_run_message(target: str) -> str:
    """Why `publish` / `reproduce` cannot run on a machine without a CUDA GPU, in one line."""
    what = FRESH_RUN_TARGETS.get(target, target)
    return (f"{target}: there is no fresh run to {what}: this machine has no CUDA GPU, so nothing "
            f"is measured here; run `snakemake --cores 1 {target}` on the GPU node after its run")


def preflight(device: str, fresh_slug: str | None, local: bool, targets, gpu_rules) -> str | None:
    """The one-line reason this run cannot do what was asked, or None when it can.

    device: config["device"]; fresh_slug: the GPU slug of this run (None without a GPU);
    local: whether jobs run on this machine (False under a cluster executor, whose GPU rules run
    on GPU nodes); targets: the rule names asked for; gpu_rules: the rule names of jobs to run that
    need a GPU. Called from the Snakefile's onstart, after the DAG is built, so a dry run
    (`snakemake -n`) still lists the jobs.
    """
    if fresh_slug is None:
        for target in FRESH_RUN_TARGETS:
            if target in targets:
                return no_fresh_run_message(target)
    if device != "auto" and local and gpu_rules and not gpu_names():
        return no_gpu_message(device)
    return None


def stale_pdf_message(has_latex: bool, pdf: str, rendered: bool) -> str | None:
    """A warning, in one line, when the paper was rendered (`rendered`: its Markdown and LaTeX were
    written by this run) on a machine without latexmk while an earlier PDF is still at `pdf`: that
    PDF was not rebuilt and may describe other results than paper.md. None otherwise."""
    if has_latex or not rendered or not Path(pdf).exists():
        return None
    return (f"latexmk is not on PATH, so {pdf} is not rebuilt with paper.md and paper.tex and may "
            "describe an earlier run: install latexmk (README) and run again, or do not commit it")


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
