"""The harness: statuses (ok, incorrect, unsupported, error, oom), metrics, incremental CSV."""
import math
import types
from pathlib import Path

import pandas as pd
import pytest
import torch

from rooflab import bench
from rooflab.bench import BenchConfig, Ceiling, Sweep, Timing, Unsupported, error_metrics, run_sweep
from rooflab.schema import read_results


def _fake_study(fail_inputs_at=None):
    """A softmax-shaped study whose impls exercise every status."""
    def make_inputs(shape, dtype, device):
        if shape["cols"] == fail_inputs_at:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")
        return {"x": torch.randn(shape["rows"], shape["cols"], dtype=dtype)}

    def oom(inputs):
        def call():
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return call

    def boom(inputs):
        def call():
            raise RuntimeError("PassManager::run failed")
        return call

    def unsupported(inputs):
        raise Unsupported("rows over 4 columns are refused")

    return types.SimpleNamespace(
        STUDY="softmax",
        make_inputs=make_inputs,
        reference=lambda inputs: torch.softmax(inputs["x"].double(), -1),
        check=lambda out, ref, inputs: error_metrics(out, ref),
        tolerance=lambda dtype: 1e-4,
        work=lambda shape, dtype: (2.0 * shape["rows"] * shape["cols"] * 4, None),
        ceiling=lambda dtype, ceilings: Ceiling("tbps", ceilings["copy_tbps"], ceilings["datasheet_bandwidth_tbps"]),
        impls=lambda: {
            "ours": lambda inputs: (lambda: torch.softmax(inputs["x"], -1)),
            "torch": lambda inputs: (lambda: torch.softmax(inputs["x"], -1) + 0.5),   # wrong on purpose
            "liger": unsupported,
            "eager": oom,
            "torch_compile": boom,
        },
    )


def _fixed_timer(fn, cfg, mode):
    fn()
    return Timing(median_ms=2.0, p20_ms=1.9, p80_ms=2.2, reps=50)


def test_every_status_becomes_a_row_and_the_sweep_goes_on(tmp_path):
    sweep = Sweep(study=_fake_study(fail_inputs_at=64), gpu="test-gpu",
                  shapes=[{"rows": 4, "cols": 1000}, {"rows": 2, "cols": 64}, {"rows": 3, "cols": 5}],
                  dtypes=["float32"], impls=["ours", "torch", "liger", "eager", "torch_compile"],
                  ceilings={"copy_tbps": 4.0, "datasheet_bandwidth_tbps": 4.8}, device="cpu", timer=_fixed_timer)
    path = tmp_path / "softmax.csv"
    assert run_sweep(sweep, path, log=open("/dev/null", "w")) == 15
    frame = read_results(path)  # the schema accepts every row
    first = frame[frame["cols"] == 1000].set_index("impl")
    assert first.loc["ours", "status"] == "ok"
    assert first.loc["torch", "status"] == "incorrect" and "tolerance" in first.loc["torch", "message"]
    assert first.loc["liger", "status"] == "unsupported"
    assert first.loc["eager", "status"] == "oom"
    assert first.loc["torch_compile", "status"] == "error" and "PassManager" in first.loc["torch_compile", "message"]
    failed_inputs = frame[frame["cols"] == 64]
    assert set(failed_inputs["status"]) == {"oom"} and len(failed_inputs) == 5
    assert (frame[frame["cols"] == 5].set_index("impl").loc["ours", "status"]) == "ok"


def test_metrics_come_from_the_traffic_count_and_the_ceiling(tmp_path):
    sweep = Sweep(study=_fake_study(), gpu="test-gpu", shapes=[{"rows": 1000, "cols": 1000}],
                  dtypes=["float32"], impls=["ours"], ceilings={"copy_tbps": 4.0, "datasheet_bandwidth_tbps": 5.0},
                  device="cpu", timer=_fixed_timer)
    run_sweep(sweep, tmp_path / "s.csv", log=open("/dev/null", "w"))
    row = pd.read_csv(tmp_path / "s.csv").iloc[0]
    expected_tbps = 2.0 * 1000 * 1000 * 4 / 2.0e-3 / 1e12
    assert row["tbps"] == pytest.approx(expected_tbps)
    assert row["frac_ceiling"] == pytest.approx(expected_tbps / 4.0)
    assert row["frac_datasheet"] == pytest.approx(expected_tbps / 5.0)
    assert (row["median_ms"], row["p20_ms"], row["p80_ms"], row["reps"]) == (2.0, 1.9, 2.2, 50)
    assert math.isnan(row["tflops"])


def test_interpreter_runs_check_without_timing(tmp_path):
    sweep = Sweep(study=_fake_study(), gpu="cpu-interpreter", shapes=[{"rows": 2, "cols": 3}],
                  dtypes=["float32"], impls=["ours"], ceilings={"copy_tbps": 1, "datasheet_bandwidth_tbps": 1},
                  device="cpu")
    (row,) = list(bench.measure_case(sweep, {"rows": 2, "cols": 3}, "float32"))
    assert row["status"] == "ok" and row["median_ms"] is None and row["rel_err"] < 1e-6


@pytest.mark.parametrize("out, ref, finite", [
    ([1.0, 2.0], [1.0, 2.0], True),
    ([float("nan"), 1.0], [float("nan"), 1.0], True),           # NaN where torch gives NaN: fine
    ([0.0, 1.0], [float("nan"), 1.0], False),                   # a number where torch gives NaN
    ([float("nan"), 1.0], [0.5, 1.0], False),                   # NaN where torch gives a number
    ([float("inf"), 1.0], [float("inf"), 1.0], True),
])
def test_error_metrics_treat_non_finite_values_strictly(out, ref, finite):
    max_abs, rel = error_metrics(torch.tensor(out), torch.tensor(ref))
    assert math.isfinite(rel) == finite


def test_quantiles_are_median_p20_p80():
    timing = bench.summarize([float(v) for v in range(1, 11)])
    assert (timing.median_ms, timing.reps) == (5.5, 10)
    assert timing.p20_ms == pytest.approx(2.8) and timing.p80_ms == pytest.approx(8.2)


def test_bench_config_defaults_are_positive():
    cfg = BenchConfig()
    assert cfg.warmup_ms > 0 and cfg.rep_ms > 0 and cfg.graph_rep_ms > 0


def test_a_hung_case_keeps_measured_rows_and_marks_the_rest(tmp_path):
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent(f"""
        import time, torch
        from tests.test_bench import _fake_study, _fixed_timer
        from rooflab.bench import BenchConfig, Sweep, run_sweep
        study = _fake_study()
        slow = study.make_inputs
        def make_inputs(shape, dtype, device):
            if shape["cols"] == 9:
                time.sleep(60)     # stands for a kernel that never returns
            return slow(shape, dtype, device)
        study.make_inputs = make_inputs
        sweep = Sweep(study=study, gpu="test-gpu", shapes=[{{"rows": 2, "cols": 5}}, {{"rows": 2, "cols": 9}},
                      {{"rows": 2, "cols": 11}}], dtypes=["float32"], impls=["ours", "liger"],
                      ceilings={{"copy_tbps": 1, "datasheet_bandwidth_tbps": 1}}, device="cpu",
                      timer=_fixed_timer, bench=BenchConfig(case_timeout_s=2))
        run_sweep(sweep, r"{tmp_path / 'hung.csv'}")
        raise SystemExit(3)   # not reached: the watchdog exits with 0
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=50,
                          cwd=str(Path(__file__).resolve().parent.parent))
    assert done.returncode == 0, done.stderr
    frame = read_results(tmp_path / "hung.csv")
    assert list(frame["status"]) == ["ok", "unsupported", "error", "error", "error", "error"]
    assert "timed out" in frame["message"].iloc[2] and "earlier case" in frame["message"].iloc[4]
