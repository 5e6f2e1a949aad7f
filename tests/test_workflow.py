"""Parse-time helpers (rooflab/workflow.py) and the one-line refusals of a CPU-only machine."""
import subprocess
import sys
from pathlib import Path

import pytest

from rooflab import workflow

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
no_gpu_here = pytest.mark.skipif(bool(workflow.gpu_names()), reason="this machine has a GPU")


def test_no_gpu_message_is_the_documented_line():
    assert workflow.no_gpu_message("NVIDIA H200") == (
        "device forced to 'NVIDIA H200' but this machine has no CUDA GPU: run on the GPU node, "
        "or submit with the slurm profile")


@pytest.mark.parametrize("target", ["publish", "reproduce"])
def test_preflight_refuses_fresh_run_targets_without_a_gpu(target):
    problem = workflow.preflight("auto", None, True, targets={target}, gpu_rules=set())
    assert problem.startswith(f"{target}: there is no fresh run") and "\n" not in problem


def test_preflight_refuses_a_forced_device_with_no_gpu_here(monkeypatch):
    monkeypatch.setattr(workflow, "gpu_names", lambda: [])
    args = dict(device="NVIDIA H200", fresh_slug="nvidia-h200", targets={"all"})
    assert workflow.preflight(local=True, gpu_rules={"env_before"}, **args) == workflow.no_gpu_message("NVIDIA H200")
    assert workflow.preflight(local=False, gpu_rules={"env_before"}, **args) is None   # slurm: GPU nodes
    assert workflow.preflight(local=True, gpu_rules=set(), **args) is None             # no GPU job to run


def test_preflight_lets_a_gpu_machine_run(monkeypatch):
    monkeypatch.setattr(workflow, "gpu_names", lambda: ["NVIDIA H200"])
    for device in ("auto", "NVIDIA H200"):
        assert workflow.preflight(device, "nvidia-h200", True, targets={"publish"}, gpu_rules={"sweep"}) is None


def test_detect_gpu_takes_a_forced_name_as_given(monkeypatch):
    monkeypatch.setattr(workflow, "gpu_names", lambda: [])
    assert workflow.detect_gpu("auto") == (None, None)
    name, slug = workflow.detect_gpu("NVIDIA H200")
    assert name == "NVIDIA H200" and slug


def _snakemake(*args, timeout=120):
    return subprocess.run([*SNAKEMAKE, "--cores", "1", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@no_gpu_here
@pytest.mark.parametrize("target", ["publish", "reproduce"])
def test_fresh_run_targets_fail_with_one_line_on_a_cpu_machine(target):
    assert _snakemake("-n", target).returncode == 0          # the target exists: a dry run lists it
    run = _snakemake(target)
    assert run.returncode != 0
    assert f"{target}: there is no fresh run" in run.stderr
    assert "Traceback" not in run.stderr and "No rule to produce" not in run.stderr


@no_gpu_here
def test_forced_device_fails_with_one_line_on_a_cpu_machine():
    run = _snakemake("--config", "device=NVIDIA H200")
    assert run.returncode != 0
    assert run.stderr.strip().splitlines()[-1] == workflow.no_gpu_message("NVIDIA H200")


def test_config_cross_field_error_stops_the_parse(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("e2e:\n  heads: 30\n")
    run = _snakemake("-n", "--configfile", str(bad))
    assert run.returncode != 0
    assert "e2e: heads 30 is not a multiple of kv_heads 8" in run.stdout + run.stderr


def test_stale_pdf_message_only_where_the_paper_was_rendered_without_latex(tmp_path):
    pdf = tmp_path / "paper.pdf"
    assert workflow.stale_pdf_message(False, str(pdf), True) is None          # no PDF to go stale
    pdf.write_bytes(b"%PDF-1.5")
    message = workflow.stale_pdf_message(False, str(pdf), True)
    assert message.startswith("latexmk is not on PATH") and str(pdf) in message and "\n" not in message
    assert workflow.stale_pdf_message(True, str(pdf), True) is None           # rebuilt with the rest
    assert workflow.stale_pdf_message(False, str(pdf), False) is None         # the paper was not rendered
