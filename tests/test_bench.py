"""The harness: statuses (ok, incorrect, unsupported, error, oom), metrics, incremental CSV."""
import math
import types
from pathlib import Path

import pandas as pd
import pytest
import torch

from rooflab import bench
from rooflab.bench import BenchConfig, Ceiling, Sweep, Unsupported, error_metrics, run_sweep
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


class FixedTimer:
    """Stands for rooflab.timing.CudaTimer: every call takes `ms`; records what it timed, in order."""

    def __init__(self, ms=2.0, fail=None):
        self.ms, self.fail, self.calls = ms, fail, []

    def estimate(self, fn, budget_ms):
        fn()
        return self.ms

    def sample(self, fn, n, mode):
        out = fn()
        if self.fail is not None and self.fail(out):
            raise RuntimeError("CUPTI recorded no device work")
        self.calls.append((id(fn), n, mode))
        return [self.ms * (0.99 + 0.02 * i / max(n - 1, 1)) for i in range(n)]




def test_every_status_becomes_a_row_and_the_sweep_goes_on(tmp_path):
    sweep = Sweep(study=_fake_study(fail_inputs_at=64), gpu="test-gpu",
                  shapes=[{"rows": 4, "cols": 1000}, {"rows": 2, "cols": 64}, {"rows": 3, "cols": 5}],
                  dtypes=["float32"], impls=["ours", "torch", "liger", "eager", "torch_compile"],
                  ceilings={"copy_tbps": 4.0, "datasheet_bandwidth_tbps": 4.8}, device="cpu", timer=FixedTimer(),
                  bench=BenchConfig(kernel_below_bytes=0, kernel_below_ms=0))
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
                  device="cpu", timer=FixedTimer(), bench=BenchConfig(rep_ms=1, kernel_below_bytes=0, kernel_below_ms=0))
    run_sweep(sweep, tmp_path / "s.csv", log=open("/dev/null", "w"))
    row = pd.read_csv(tmp_path / "s.csv").iloc[0]
    assert row["median_ms"] == pytest.approx(2.0)
    expected_tbps = 2.0 * 1000 * 1000 * 4 / 2.0e-3 / 1e12
    assert row["bytes"] == 2.0 * 1000 * 1000 * 4
    assert row["tbps"] == pytest.approx(expected_tbps)
    assert row["frac_ceiling"] == pytest.approx(expected_tbps / 4.0)
    assert row["frac_datasheet"] == pytest.approx(expected_tbps / 5.0)
    assert (row["reps"], row["trials"]) == (21, 3)       # min_reps 20 over 3 trials: 7 calls each
    assert row["ci_low_ms"] < row["median_ms"] < row["ci_high_ms"]
    assert row["timing"] == "events"
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


def test_error_metrics_per_row_sees_an_error_the_whole_tensor_hides():
    """A 30% error in a row of small norm is 3e-4 of the whole tensor's norm, 0.3 of its own."""
    ref = torch.tensor([[10.0, 0.0], [0.01, 0.0], [0.0, 0.0]])
    out = torch.tensor([[10.0, 0.0], [0.013, 0.0], [0.0, 0.0]])
    assert error_metrics(out, ref)[1] == pytest.approx(3e-4)
    assert error_metrics(out, ref, per_row=True)[1] == pytest.approx(0.3)
    assert error_metrics(ref, ref, per_row=True) == (0.0, 0.0)
    zero_row_written = ref.clone()
    zero_row_written[2, 1] = 0.5                                  # an all-zero row: its largest |error|
    assert error_metrics(zero_row_written, ref, per_row=True)[1] == pytest.approx(0.5)
    nan_where_torch_gives_nan = torch.tensor([[float("nan"), 1.0]])
    assert error_metrics(nan_where_torch_gives_nan, nan_where_torch_gives_nan, per_row=True) == (0.0, 0.0)
    assert math.isinf(error_metrics(torch.tensor([[0.0, 1.0]]), nan_where_torch_gives_nan, per_row=True)[1])


def test_bench_config_defaults_meet_the_sampling_floor():
    cfg = BenchConfig()
    assert cfg.trials >= 3 and cfg.min_reps >= 20 and cfg.warmup_ms > 0 and cfg.rep_ms > 0


def _small_sweep(timer, **bench):
    return Sweep(study=_fake_study(), gpu="test-gpu", shapes=[{"rows": 4, "cols": 8}], dtypes=["float32"],
                 impls=["ours", "liger", "torch_compile"], ceilings={"copy_tbps": 4.0, "datasheet_bandwidth_tbps": 5.0},
                 device="cpu", timer=timer, bench=BenchConfig(**bench))


def test_small_cases_get_kernel_only_rows_beside_plain_calls():
    timer = FixedTimer(ms=0.01)
    rows = list(bench.measure_case(_small_sweep(timer), {"rows": 4, "cols": 8}, "float32"))
    ours = [r for r in rows if r["impl"] == "ours"]
    assert [r["timing"] for r in ours] == ["events", "cupti", "host"]
    assert all(r["status"] == "ok" and r["trials"] == 3 and r["reps"] >= 20 for r in ours)
    host = ours[2]     # the call's host time: a time, not a throughput
    assert host["median_ms"] > 0 and host["tbps"] is None and host["frac_ceiling"] is None
    assert ours[1]["tbps"] is not None and ours[1]["frac_ceiling"] is not None
    large = list(bench.measure_case(_small_sweep(FixedTimer(ms=1.0), kernel_below_bytes=0),
                                    {"rows": 4, "cols": 8}, "float32"))
    assert [r["timing"] for r in large if r["impl"] == "ours"] == ["events"]


def test_host_rows_come_from_a_pass_before_any_kernel_only_sample(tmp_path):
    """Every host sample of a sweep is taken before its first CUPTI session (which would stay
    attached to the process and slow every later launch), and only correct implementations get
    host rows."""
    timer = FixedTimer(ms=0.01)
    sweep = Sweep(study=_fake_study(), gpu="test-gpu", shapes=[{"rows": 4, "cols": 8}, {"rows": 3, "cols": 5}],
                  dtypes=["float32"], impls=["ours", "torch", "liger", "eager"],
                  ceilings={"copy_tbps": 4.0, "datasheet_bandwidth_tbps": 5.0}, device="cpu", timer=timer,
                  bench=BenchConfig(max_calls=7))                      # 7 calls a trial, 21 a row
    run_sweep(sweep, tmp_path / "s.csv", log=open("/dev/null", "w"))
    modes = [mode for _, _, mode in timer.calls]
    host = [i for i, mode in enumerate(modes) if mode == "host"]
    assert len(host) == 2 * 2 * sweep.bench.trials          # ours and torch (wrong, still timed), 2 cases
    assert max(host) < modes.index("cupti") and modes.count("host") == len(host)
    frame = read_results(tmp_path / "s.csv")
    rows = frame[frame["timing"] == "host"]
    assert list(rows["impl"]) == ["ours", "ours"] and (rows["reps"] >= 20).all()
    assert set(frame[frame["impl"] == "torch"]["timing"]) == {"events"}          # incorrect: no host row
    assert [c["host_pass"] for c in sweep.cases_log] == [{"ours": 21, "torch": 21}] * 2


def test_without_host_first_each_case_times_its_host_rows_after_its_other_methods(tmp_path):
    timer = FixedTimer(ms=0.01)
    sweep = Sweep(study=_fake_study(), gpu="test-gpu", shapes=[{"rows": 4, "cols": 8}], dtypes=["float32"],
                  impls=["ours"], ceilings={"copy_tbps": 4.0, "datasheet_bandwidth_tbps": 5.0}, device="cpu",
                  timer=timer, bench=BenchConfig(max_calls=7, host_first=False))
    run_sweep(sweep, tmp_path / "s.csv", log=open("/dev/null", "w"))
    assert [mode for _, _, mode in timer.calls] == ["events", "cupti", "host"] * sweep.bench.trials
    assert "host_pass" not in sweep.cases_log[0]
    assert list(read_results(tmp_path / "s.csv")["timing"]) == ["events", "cupti", "host"]


def test_trials_interleave_implementations_in_balanced_orders():
    study = _fake_study()
    impls = {f"impl{i}": (lambda inputs: (lambda: torch.softmax(inputs["x"], -1))) for i in range(6)}
    study.impls = lambda: impls
    timer = FixedTimer(ms=1.0)
    sweep = Sweep(study=study, gpu="test-gpu", shapes=[], dtypes=["float32"], impls=list(impls),
                  ceilings={"copy_tbps": 4.0, "datasheet_bandwidth_tbps": 5.0}, device="cpu", timer=timer,
                  bench=BenchConfig(trials=4, kernel_below_bytes=0, kernel_below_ms=0))
    list(bench.measure_case(sweep, {"rows": 4, "cols": 8}, "float32"))
    rounds = [[fn for fn, _, _ in timer.calls[i * 6:(i + 1) * 6]] for i in range(4)]
    assert len(timer.calls) == 24 and all(len(set(r)) == 6 for r in rounds)   # each impl once per trial
    assert len({tuple(r) for r in rounds}) > 1                                  # orders differ between trials
    sequence = [fn for fn, _, _ in timer.calls]
    pairs = list(zip(sequence, sequence[1:]))
    assert len(pairs) == len(set(pairs))          # 6 impls, 4 trials: nothing follows the same one twice


def test_a_failure_while_timing_one_impl_leaves_the_others_measured():
    timer = FixedTimer(ms=0.01, fail=lambda out: out.shape[-1] == 8 and float(out.sum()) < 0)
    study = _fake_study()
    ok = study.impls()["ours"]
    study.impls = lambda: {"ours": ok, "liger": lambda inputs: (lambda: -ok(inputs)())}
    study.check = lambda out, ref, inputs: (0.0, 0.0)
    sweep = Sweep(study=study, gpu="test-gpu", shapes=[], dtypes=["float32"], impls=["ours", "liger"],
                  ceilings={"copy_tbps": 4.0, "datasheet_bandwidth_tbps": 5.0}, device="cpu", timer=timer)
    rows = {(r["impl"], r["timing"]): r for r in bench.measure_case(sweep, {"rows": 4, "cols": 8}, "float32")}
    assert rows[("ours", "events")]["status"] == "ok" and rows[("ours", "cupti")]["status"] == "ok"
    assert rows[("liger", "events")]["status"] == "error" and "CUPTI" in rows[("liger", "events")]["message"]


class FlakyMonitor:
    """Reports a thermal slowdown on the first `bad` readings, then a steady clock."""

    def __init__(self, bad):
        self.bad, self.reads = bad, 0

    def read(self):
        self.reads += 1
        slow = self.reads <= self.bad
        return {"sm_mhz": 1980, "slowdown": slow, "throttle": ["sw_thermal_slowdown"] if slow else []}


@pytest.mark.parametrize("bad, attempts, note", [(0, 1, False), (2, 2, False), (4, 2, True)])
def test_a_case_timed_under_throttling_is_timed_again(bad, attempts, note):
    sweep = _small_sweep(FixedTimer(ms=1.0), kernel_below_bytes=0)
    sweep.monitor, sweep.steady_mhz = FlakyMonitor(bad), 1980
    rows = list(bench.measure_case(sweep, {"rows": 4, "cols": 8}, "float32"))
    (record,) = sweep.cases_log
    assert len(record["attempts"]) == attempts
    ours = next(r for r in rows if r["impl"] == "ours")
    assert ours["status"] == "ok" and (ours["message"] is not None and "thermal" in ours["message"]) == note


def test_remeasure_replaces_a_cases_rows_and_says_so(tmp_path):
    sweep = _small_sweep(FixedTimer(ms=1.0), kernel_below_bytes=0)
    sweep.shapes = [{"rows": 4, "cols": 8}, {"rows": 2, "cols": 3}]
    run_sweep(sweep, tmp_path / "s.csv", log=open("/dev/null", "w"))
    before = read_results(tmp_path / "s.csv")
    rows = before.astype(object).where(before.notna(), None).to_dict(orient="records")
    after = bench.remeasure(sweep, rows, [({"rows": 2, "cols": 3}, "float32")], log=open("/dev/null", "w"))
    assert len(after) == len(rows)
    again = [r for r in after if r["cols"] == 3]
    assert again and all(bench.REMEASURED in r["message"] for r in again)
    assert all(bench.REMEASURED not in (r["message"] or "") for r in after if r["cols"] == 8)
    # a remeasure that fails keeps the first measurement, saying so, and leaves the caller's rows alone
    study = sweep.study
    sweep.study = types.SimpleNamespace(**{**vars(study), "work": lambda shape, dtype: 1 / 0})
    kept = bench.remeasure(sweep, rows, [({"rows": 2, "cols": 3}, "float32")], log=open("/dev/null", "w"))
    assert [r["status"] for r in kept] == [r["status"] for r in rows]
    assert all("remeasure failed: ZeroDivisionError" in r["message"] for r in kept if r["cols"] == 3)
    assert all("remeasure failed" not in (r["message"] or "") for r in rows)


@pytest.mark.parametrize("hang_in", ["reference", "make_inputs"])
def test_a_hung_case_keeps_measured_rows_and_marks_the_rest(tmp_path, hang_in):
    """A case hung in the measuring pass (its reference) keeps the rows measured before it; one
    hung in the host-time pass (its inputs, built there first) leaves every case an error row."""
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent(f"""
        import time, torch
        from tests.test_bench import _fake_study, FixedTimer
        from rooflab.bench import BenchConfig, Sweep, run_sweep
        study = _fake_study()
        slow = study.{hang_in}
        def hang(*args):
            if (args[0]["cols"] if "{hang_in}" == "make_inputs" else args[0]["x"].shape[1]) == 9:
                time.sleep(60)     # stands for a kernel that never returns
            return slow(*args)
        study.{hang_in} = hang
        sweep = Sweep(study=study, gpu="test-gpu", shapes=[{{"rows": 2, "cols": 5}}, {{"rows": 2, "cols": 9}},
                      {{"rows": 2, "cols": 11}}], dtypes=["float32"], impls=["ours", "liger"],
                      ceilings={{"copy_tbps": 1, "datasheet_bandwidth_tbps": 1}}, device="cpu",
                      timer=FixedTimer(), bench=BenchConfig(case_timeout_s=2, kernel_below_bytes=0, kernel_below_ms=0))
        def before_exit():     # the job's other outputs (sweep.py: its env.json), written before the exit
            open(r"{tmp_path / 'env.json'}", "w").write("{{}}")
        run_sweep(sweep, r"{tmp_path / 'hung.csv'}", before_exit=before_exit)
        raise SystemExit(3)   # not reached: the watchdog exits with 0
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=50,
                          cwd=str(Path(__file__).resolve().parent.parent))
    assert done.returncode == 0, done.stderr
    frame = read_results(tmp_path / "hung.csv")
    assert list(frame["cols"]) == [5, 5, 9, 9, 11, 11]
    if hang_in == "reference":
        assert list(frame["status"]) == ["ok", "unsupported", "error", "error", "error", "error"]
        assert "timed out" in frame["message"].iloc[2] and "host-time" not in frame["message"].iloc[2]
    else:
        assert set(frame["status"]) == {"error"}
        assert "later case timed out in the host-time pass" in frame["message"].iloc[0]
        assert "timed out" in frame["message"].iloc[2] and "host-time pass" in frame["message"].iloc[2]
    assert "earlier case" in frame["message"].iloc[4]
    assert (tmp_path / "env.json").read_text() == "{}"       # so Snakemake keeps the CSV it would delete


def _three_cases(study, host_first=False):
    return Sweep(study=study, gpu="test-gpu", shapes=[{"rows": 2, "cols": c} for c in (5, 9, 11)],
                 dtypes=["float32"], impls=["ours", "liger"], ceilings={"copy_tbps": 1, "datasheet_bandwidth_tbps": 1},
                 device="cpu", timer=FixedTimer(),
                 bench=BenchConfig(host_first=host_first, kernel_below_bytes=0, kernel_below_ms=0))


def test_a_sticky_cuda_error_ends_the_sweep_with_every_case_a_row(tmp_path, monkeypatch):
    """An illegal address at one case leaves the context unusable: that case's rows say so, every
    later case is an error row saying why it was not measured, the earlier rows stay, and run_sweep
    returns (the job ends with its outputs instead of a traceback)."""
    study, poisoned = _fake_study(), []
    impls = study.impls()

    def ours(inputs):
        if inputs["x"].shape[1] == 9:
            poisoned.append(True)
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return impls["ours"](inputs)
    study.impls = lambda: {**impls, "ours": ours}
    monkeypatch.setattr(bench, "context_broken", lambda: "CUDA error: an illegal memory access" if poisoned else None)
    run_sweep(_three_cases(study), tmp_path / "s.csv", log=open("/dev/null", "w"))
    frame = read_results(tmp_path / "s.csv")
    assert list(frame["cols"]) == [5, 5, 9, 9, 11, 11]
    assert list(frame["status"]) == ["ok", "unsupported", "error", "unsupported", "error", "error"]
    assert "illegal memory access" in frame["message"].iloc[2]
    assert all("not measured: the CUDA context failed at an earlier case" in m for m in frame["message"].iloc[4:])


def test_a_case_that_raises_past_measure_case_is_rows_and_the_sweep_goes_on(tmp_path):
    """An error outside measure_case's own handling (here the study's work count) makes that case's
    rows `error` and the next case is measured as usual (the context still works)."""
    study = _fake_study()
    work = study.work
    study.work = lambda shape, dtype: (_ for _ in ()).throw(ValueError("no work")) if shape["cols"] == 9 \
        else work(shape, dtype)
    run_sweep(_three_cases(study), tmp_path / "s.csv", log=open("/dev/null", "w"))
    frame = read_results(tmp_path / "s.csv")
    assert list(frame["cols"]) == [5, 5, 9, 9, 11, 11]
    assert list(frame["status"]) == ["ok", "unsupported", "error", "error", "ok", "unsupported"]
    assert all(m.startswith("case failed: ") and "no work" in m for m in frame["message"].iloc[2:4])


def test_a_context_lost_in_the_host_pass_leaves_every_case_a_row(tmp_path, monkeypatch):
    study = _fake_study()
    real = bench.host_pass

    def host_pass(sweep, shape, dtype):
        if shape["cols"] == 9:
            raise RuntimeError("CUDA error: unspecified launch failure")
        return real(sweep, shape, dtype)
    monkeypatch.setattr(bench, "host_pass", host_pass)
    monkeypatch.setattr(bench, "context_broken", lambda: "CUDA error: unspecified launch failure")
    run_sweep(_three_cases(study, host_first=True), tmp_path / "s.csv", log=open("/dev/null", "w"))
    frame = read_results(tmp_path / "s.csv")
    assert list(frame["cols"]) == [5, 5, 9, 9, 11, 11] and set(frame["status"]) == {"error"}
    assert all("the CUDA context failed in the host-time pass" in m for m in frame["message"])


def test_the_context_check_passes_without_a_gpu():
    assert bench.context_broken() is None


def test_the_softmax_copy_bound_is_checked_against_x_and_timed_in_the_same_trials():
    """`copy` is not a softmax: its output must equal x (a wrong copy is `incorrect`), and it is timed
    with the case's implementations, never counted as a peer."""
    from rooflab.report.analysis import is_bound, is_peer
    from rooflab.studies import softmax as study
    timer = FixedTimer(ms=1.0)
    sweep = Sweep(study=study, gpu="test-gpu", shapes=[], dtypes=["float32"], impls=["torch", "copy"],
                  ceilings={"copy_tbps": 4.0, "datasheet_bandwidth_tbps": 5.0}, device="cpu", timer=timer,
                  bench=BenchConfig(trials=3, kernel_below_bytes=0, kernel_below_ms=0))
    rows = {r["impl"]: r for r in bench.measure_case(sweep, {"rows": 3, "cols": 7}, "float32")}
    assert rows["copy"]["status"] == "ok" and rows["copy"]["rel_err"] == 0.0
    assert rows["copy"]["tbps"] == rows["torch"]["tbps"]             # the same bytes over the same time
    assert is_bound("copy") and not is_peer("copy") and is_peer("torch")
    inputs = study.make_inputs({"rows": 3, "cols": 7}, torch.float32, "cpu")
    out = study.impls()["copy"](inputs)()
    out[0, 0] += 1.0                                                  # a copy that is not x
    assert study.check(out, study.reference(inputs), inputs)[1] == float("inf")
    assert study.check(torch.softmax(inputs["x"], -1), study.reference(inputs), inputs)[1] < 1e-6


def test_a_cuda_fault_is_never_taken_for_a_peers_refusal():
    """The SDPA peers turn a backend's RuntimeError into Unsupported; a CUDA fault must stay an error."""
    from rooflab.studies import attention
    fault = RuntimeError("CUDA error: an illegal memory access was encountered")
    assert bench.is_fault(fault) and not bench.is_fault(RuntimeError("No available kernel. Aborting execution."))

    def faulting():
        raise fault
    with pytest.raises(RuntimeError, match="illegal memory access"):
        attention._first_run(faulting, "sdpa_flash")
    with pytest.raises(Unsupported, match="sdpa_flash: No available kernel"):
        attention._first_run(lambda: (_ for _ in ()).throw(RuntimeError("No available kernel.")), "sdpa_flash")


def test_an_output_of_nan_is_an_incorrect_row_the_schema_accepts(tmp_path):
    """error_metrics gives inf where an output is NaN and the reference is finite: the row is
    `incorrect`, its error columns null (the schema takes numbers or null), and its message says why."""
    study = _fake_study()
    impls = study.impls()
    study.impls = lambda: {**impls, "ours": lambda inputs: (lambda: torch.full_like(inputs["x"], float("nan")))}
    run_sweep(_three_cases(study), tmp_path / "s.csv", log=open("/dev/null", "w"))
    frame = read_results(tmp_path / "s.csv")
    ours = frame[frame["impl"] == "ours"]
    assert set(ours["status"]) == {"incorrect"} and ours["rel_err"].isna().all() and ours["max_abs_err"].isna().all()
    assert all(m.startswith("non-finite output") for m in ours["message"])


def test_a_failed_case_is_written_once_even_if_the_watchdog_fires_after_it(tmp_path):
    """A case that raised past measure_case has its rows written and marked done before the GPU is
    synchronised: a watchdog firing while that sync hangs writes no second row for it."""
    import subprocess
    import sys
    import textwrap
    script = textwrap.dedent(f"""
        import time
        from tests.test_bench import _fake_study, _three_cases
        from rooflab import bench
        from rooflab.bench import BenchConfig, run_sweep
        study = _fake_study()
        work = study.work
        def failing(shape, dtype):
            if shape["cols"] == 9:
                bench._release = lambda: time.sleep(30)     # the sync after the failure hangs
                raise ValueError("no work")
            return work(shape, dtype)
        study.work = failing
        sweep = _three_cases(study)
        sweep.bench = BenchConfig(host_first=False, kernel_below_bytes=0, kernel_below_ms=0, case_timeout_s=2)
        run_sweep(sweep, r"{tmp_path / 's.csv'}", log=open("/dev/null", "w"))
        raise SystemExit(3)   # not reached: the watchdog exits with 0
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=str(Path(__file__).resolve().parent.parent))
    assert done.returncode == 0, done.stderr
    frame = read_results(tmp_path / "s.csv")
    keys = list(zip(frame["impl"], frame["cols"], frame["timing"]))
    assert len(keys) == len(set(keys)) and sorted(set(frame["cols"])) == [5, 9, 11]
    assert all(m.startswith("case failed") for m in frame[frame["cols"] == 9]["message"])
