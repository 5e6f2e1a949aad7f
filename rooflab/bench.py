"""The benchmark harness every study uses.

A study module (rooflab/studies/<name>.py) describes *what* to measure; this module
decides *how*: inputs built once per shape, each implementation returned as a
zero-argument callable so set-up stays out of the timed region, the output checked
against the study's reference on every row, then the correct implementations timed
together over several trials, in orders balanced against after-effects of the kernel timed
before (rooflab.trial_orders), with a cold L2 (rooflab.timing: plain
calls with CUDA events, and where the host can show, kernel-only device time from CUPTI and the
call's own host time),
with the GPU's clocks read around each case. Host times are taken in a pass of their own over
every case before any CUPTI session in the process (`host_pass`): once torch.profiler has run,
CUPTI stays attached to the process and every later launch pays for it (H200,
probes/softmax_host.py DIAG=profiler, host time of one call as the study takes it, five shapes,
before -> after one profiler session: torch.softmax 6.5-7.0 -> 9.7-9.9 us, kernels.softmax 8.2-9.8
-> 10.4-13.2). Kineto's TEARDOWN_CUPTI=1 undoes it after one session but not after thirty.
Every row carries its own bytes, FLOPs and the ceiling it is judged against. Failures become
rows (`oom`, `error`, `unsupported`, `incorrect`) and the sweep goes on; every case's rows are
flushed to the CSV as soon as they are measured.
"""
from __future__ import annotations

import csv
import math
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import torch

from rooflab.qa import REMEASURED
from rooflab.schema import HOST_TIMING, SHAPE_COLUMNS, columns
from rooflab.timing import Timing, calls_per_trial, summarize
from rooflab.trial_orders import balanced_orders

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Relative error (||out - ref|| / ||ref||, float64 reference) above which a row is `incorrect`.
TOLERANCE = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 3e-2}


class Unsupported(Exception):
    """Raised by an implementation's factory when it cannot run this case (a peer's limit)."""


@dataclass
class BenchConfig:
    warmup_ms: float = 25.0           # warm-up per implementation and case, which also estimates its call time
    rep_ms: float = 20.0              # timing budget per implementation, timing method and trial
    trials: int = 3                   # independent trials; each runs the implementations in its own order (rooflab.trial_orders)
    min_reps: int = 20                # timed calls per row at least, over all trials (whatever the budget)
    max_calls: int = 500              # timed calls per trial at most
    kernel_below_bytes: float = 64e6  # cases moving fewer bytes are also timed kernel-only (`cupti` rows) and on the host (`host`)
    kernel_below_ms: float = 0.05     # ... and so are cases whose fastest call takes less than this
    flush_mib: int = 256              # L2 flush buffer read before every timed call
    host_first: bool = True           # host rows from a pass over every case before any CUPTI session (host_pass)
    clock_drop: float = 0.9           # SM clock below this share of the steady clock: the case is re-measured
    case_timeout_s: float = 300.0     # a case (all impls at one shape) running longer is taken as a hang
    seed: int = 0                     # seeds each trial's order


@dataclass
class Ceiling:
    """What frac_ceiling and frac_datasheet divide by, for one study and dtype."""
    metric: str            # "tbps" or "tflops"
    measured: float | None
    datasheet: float | None
    name: str | None = None   # the ceilings.csv row `measured` comes from


def error_metrics(out: torch.Tensor, ref: torch.Tensor, per_row: bool = False) -> tuple[float, float]:
    """(max |out - ref|, ||out - ref|| / ||ref||) over float64 copies.

    Positions where the reference is not finite must match exactly (same inf, NaN where
    NaN); any other non-finite output makes the relative error infinite. per_row: the
    relative error is the worst over the rows of the last dimension, each against its own
    norm (a row whose reference is all zero: its largest |out - ref|), so a row of small
    norm (decode's output for a long sequence, an average of many V rows) is not hidden by
    rows of large norm in the whole tensor's.
    """
    out = out.detach().to(torch.float64)
    ref = ref.detach().to(device=out.device, dtype=torch.float64)
    if out.shape != ref.shape:
        raise ValueError(f"output shape {tuple(out.shape)} != reference shape {tuple(ref.shape)}")
    finite = torch.isfinite(ref)
    o, r = out[~finite], ref[~finite]
    special_ok = bool(torch.equal(o.isnan(), r.isnan())) and bool(torch.equal(o[~r.isnan()], r[~r.isnan()]))
    if not special_ok or not bool(torch.isfinite(out[finite]).all()):
        return math.inf, math.inf
    if out.numel() == 0 or not bool(finite.any()):
        return 0.0, 0.0
    diff = (out[finite] - ref[finite])
    max_abs = float(diff.abs().max())
    if per_row:
        width = out.shape[-1] if out.dim() else 1
        delta = torch.where(finite, out - ref, 0.0).reshape(-1, width)
        norm = torch.where(finite, ref, 0.0).reshape(-1, width).norm(dim=-1)
        rows = torch.where(norm > 0, delta.norm(dim=-1) / norm.clamp_min(1e-300), delta.abs().amax(dim=-1))
        return max_abs, float(rows.max())
    denom = float(ref[finite].norm())
    rel = float(diff.norm()) / denom if denom > 0 else max_abs
    return max_abs, rel


@dataclass
class Sweep:
    """Everything one sweep job needs; `study` is a module of rooflab.studies."""
    study: object
    gpu: str
    shapes: list[dict]
    dtypes: list[str]
    impls: list[str]
    ceilings: dict[str, float]
    bench: BenchConfig = field(default_factory=BenchConfig)
    device: str = "cuda"
    timer: object | None = None      # CudaTimer-like (estimate, sample); None on CUDA makes one, on CPU checks only
    monitor: object | None = None    # rooflab.gpustate.Monitor: clocks around each case (None: not read)
    steady_mhz: float | None = None  # the SM clock warm_up settled at
    cases_log: list = field(default_factory=list)   # one record per timed case: clocks, attempts

    def __post_init__(self):
        if self.timer is None and self.device == "cuda":
            from rooflab.timing import CudaTimer
            self.timer = CudaTimer(self.bench.flush_mib)


def _blank_row(sweep: Sweep, shape: dict, dtype: str, impl: str, timing: str) -> dict:
    row = dict.fromkeys(columns(sweep.study.STUDY))
    row.update(gpu=sweep.gpu, study=sweep.study.STUDY, impl=impl, dtype=dtype, timing=timing, **shape)
    return row


def _fill_metrics(row: dict, timing: Timing, ceiling: Ceiling) -> None:
    seconds = timing.median_ms * 1e-3
    row.update(median_ms=timing.median_ms, ci_low_ms=timing.ci_low_ms, ci_high_ms=timing.ci_high_ms,
               p20_ms=timing.p20_ms, p80_ms=timing.p80_ms, reps=timing.reps, trials=timing.trials)
    if row["timing"] == HOST_TIMING:     # the call's host time: no throughput, no share of a ceiling
        return
    row["tbps"] = row["bytes"] / seconds / 1e12 if row["bytes"] else None
    row["tflops"] = row["flops"] / seconds / 1e12 if row["flops"] else None
    value = row[ceiling.metric]
    if value is not None:
        row["frac_ceiling"] = value / ceiling.measured if ceiling.measured else None
        row["frac_datasheet"] = value / ceiling.datasheet if ceiling.datasheet else None


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ").strip()
    return text[:300]


def is_oom(exc: BaseException) -> bool:
    """True for CUDA out-of-memory, whether raised as OutOfMemoryError or as a RuntimeError message."""
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def with_note(message: str | None, note: str) -> str:
    """A row's message with `note` appended ("; " between them)."""
    return "; ".join(m for m in (message, note) if m)


def finite_or_none(value: float) -> float | None:
    """An error metric as a row holds it: None where it is not finite (the results schema takes
    numbers or null; `incorrect_message` says why)."""
    return value if math.isfinite(value) else None


def incorrect_message(rel: float, tol: float) -> str:
    """Why a row is `incorrect`: its relative error over the tolerance, or an output that is not
    finite where the reference is (or differs from it where the reference is not)."""
    if not math.isfinite(rel):
        return f"non-finite output where the reference differs (rel_err inf > tolerance {tol:g})"
    return f"rel_err {rel:.3g} > tolerance {tol:g}"


def is_fault(exc: BaseException) -> bool:
    """True for a CUDA fault (an illegal address, a device-side assert, a launch failure): the
    device's error, never a peer's refusal of a case, whatever type it is raised as."""
    accelerator = getattr(torch, "AcceleratorError", None)
    return (accelerator is not None and isinstance(exc, accelerator)) or str(exc).startswith("CUDA error")


def _first_call(sweep: Sweep, factory, inputs) -> tuple:
    """(callable, its first output): the implementation built from the case's inputs and called
    once, which compiles and autotunes it, the device synchronised after."""
    fn = factory(inputs)
    out = fn()
    if sweep.device == "cuda":
        torch.cuda.synchronize()
    return fn, out


def measure_case(sweep: Sweep, shape: dict, dtype: str, host: HostTimes | None = None) -> Iterable[dict]:
    """Rows for every implementation at one shape and dtype (inputs and reference built once).

    Each implementation is built and checked against the reference first; the correct ones are
    then timed together: warm-up, then `trials` rounds, each running them in its own seeded order
    (`_trial_orders`), so that drift of clocks or temperature falls on all alike and no
    implementation follows the same one twice where their count allows. A case timed under a
    slowdown or a clock drop is timed once more (see `_time_case`). `host`: the case's host
    times from `host_pass`, which become its `host` rows (correct implementations only); None
    times them here, after the other methods.
    """
    study = sweep.study
    nbytes, flops = study.work(shape, dtype)
    ceiling = study.ceiling(dtype, sweep.ceilings)
    seconds = {"inputs_reference": 0.0, "first_calls": {}, "warm_up": 0.0, "timing": 0.0}
    if host is not None:     # the host pass's own seconds, phase by phase
        for phase, value in host.seconds.items():
            seconds[phase] = value if phase != "first_calls" else dict(value)
    clock = time.perf_counter()
    try:
        inputs = study.make_inputs(shape, DTYPES[dtype], sweep.device)
        ref = study.reference(inputs)
        if sweep.device == "cuda":
            torch.cuda.synchronize()
        seconds["inputs_reference"] += time.perf_counter() - clock
    except Exception as exc:  # the case itself cannot be built: one row per impl says why
        status = "oom" if is_oom(exc) else "error"
        _release()
        for impl in sweep.impls:
            row = _blank_row(sweep, shape, dtype, impl, "events")
            row.update(status=status, message=f"inputs/reference: {describe(exc)}")
            yield row
        return
    factories = study.impls()
    rows, fns = {}, {}
    for impl in sweep.impls:
        row = _blank_row(sweep, shape, dtype, impl, "events")
        row.update(bytes=nbytes, flops=flops, ceiling_name=ceiling.name)
        clock = time.perf_counter()
        try:
            fn, out = _first_call(sweep, factories[impl], inputs)   # compiles and autotunes: timed apart
            seconds["first_calls"][impl] = seconds["first_calls"].get(impl, 0.0) + time.perf_counter() - clock
            if impl == "ours" and hasattr(study, "strategy"):   # after the call: what autotuning chose too
                row["strategy"] = study.strategy(shape, dtype, inputs)
            max_abs, rel = study.check(out, ref, inputs)
            del out                                   # free the output before timing
            row.update(max_abs_err=finite_or_none(max_abs), rel_err=finite_or_none(rel))
            tol = study.tolerance(dtype)
            if not rel <= tol:
                row.update(status="incorrect", message=incorrect_message(rel, tol))
            else:
                row["status"] = "ok"
                fns[impl] = fn
        except Unsupported as exc:
            row.update(status="unsupported", message=str(exc)[:300])
        except Exception as exc:  # OOM, compile failure, launch failure: record and go on
            row.update(status="oom" if is_oom(exc) else "error", message=describe(exc))
            _release()
        rows[impl] = row
    del ref
    timed = _time_case(sweep, shape, dtype, nbytes, fns, rows, seconds, host) \
        if sweep.timer is not None and fns else {}
    for impl in sweep.impls:
        samples = timed.get(impl)
        if not samples:
            yield rows[impl]
            continue
        for mode, values in samples.items():
            row = dict(rows[impl], timing=mode)
            _fill_metrics(row, summarize(values, sweep.bench.trials), ceiling)
            yield row
    del inputs, fns
    _release()


def _kernel_only(cfg: BenchConfig, nbytes, estimates: dict) -> bool:
    """Whether a case is also timed kernel-only and on the host: it moves fewer than
    kernel_below_bytes, or its fastest call is under kernel_below_ms (host time can hide the kernel)."""
    return (nbytes is not None and nbytes < cfg.kernel_below_bytes) or min(estimates.values()) < cfg.kernel_below_ms


def _warm_up(fns: dict, cfg: BenchConfig, timer, failed) -> dict:
    """{impl: estimated ms a call} after each implementation's warm-up; an implementation that
    raises is dropped from fns and handed to failed(impl, exc)."""
    estimates = {}
    for impl, fn in list(fns.items()):
        try:
            estimates[impl] = timer.estimate(fn, cfg.warmup_ms)
        except Exception as exc:
            failed(impl, exc)
            del fns[impl]
            _release()
    return estimates


def _calls(cfg: BenchConfig, estimates: dict) -> dict:
    """Timed calls a trial for each implementation (its budget over its estimated call time)."""
    min_calls = math.ceil(cfg.min_reps / cfg.trials)
    return {impl: calls_per_trial(ms, cfg.rep_ms, min_calls, cfg.max_calls) for impl, ms in estimates.items()}


def _trial_orders(cfg: BenchConfig, impls, shape: dict, dtype: str, attempt) -> list[list]:
    """Each trial's order of the implementations, seeded by the case and attempt, balanced so
    that no implementation follows the same one in two trials where their count allows
    (rooflab.trial_orders: the kernel timed before moves the next one's time)."""
    return balanced_orders(impls, cfg.trials, f"{cfg.seed}|{shape}|{dtype}|{attempt}")


@dataclass
class HostTimes:
    """One case's host times from `host_pass`: {impl: samples (ms)}, and the pass's seconds."""
    samples: dict
    seconds: dict


def host_pass(sweep: Sweep, shape: dict, dtype: str) -> HostTimes | None:
    """Host times of one case's implementations, taken before any CUPTI session (see the module
    docstring); None where nothing is timed (no timer) or bench.host_first is off. Each
    implementation is built and called once (which compiles it), warmed up, and, where the case
    is timed kernel-only (`_kernel_only`), called in `trials` rounds on the host, in `_trial_orders`
    (CudaTimer.host: the call's own wall-clock time, the L2 flush queued before it). No reference
    is built or checked here: `measure_case` checks every implementation and keeps the host rows
    of the correct ones. A case or implementation that fails here gets no host times;
    `measure_case` records its failure."""
    cfg, timer, study = sweep.bench, sweep.timer, sweep.study
    if timer is None or not cfg.host_first:
        return None
    nbytes, _ = study.work(shape, dtype)
    seconds = {"inputs_reference": 0.0, "first_calls": {}, "warm_up": 0.0, "timing": 0.0}
    clock = time.perf_counter()
    try:
        inputs = study.make_inputs(shape, DTYPES[dtype], sweep.device)
    except Exception:
        _release()
        return HostTimes({}, seconds)
    seconds["inputs_reference"] = time.perf_counter() - clock
    factories, fns = study.impls(), {}
    for impl in sweep.impls:
        clock = time.perf_counter()
        try:
            fns[impl] = _first_call(sweep, factories[impl], inputs)[0]      # its output freed at once
        except Exception:
            _release()
        seconds["first_calls"][impl] = time.perf_counter() - clock
    clock = time.perf_counter()
    estimates = _warm_up(fns, cfg, timer, lambda impl, exc: None)
    seconds["warm_up"] = time.perf_counter() - clock
    samples = {}
    if fns and _kernel_only(cfg, nbytes, estimates):
        clock = time.perf_counter()
        calls = _calls(cfg, estimates)
        samples = {impl: [] for impl in fns}
        for order in _trial_orders(cfg, fns, shape, dtype, "host"):
            for impl in order:
                if impl not in samples:
                    continue
                try:
                    samples[impl].extend(timer.sample(fns[impl], calls[impl], HOST_TIMING))
                except Exception:
                    del samples[impl]
                    _release()
        seconds["timing"] = time.perf_counter() - clock
    del inputs, fns
    _release()
    return HostTimes(samples, seconds)


def _time_case(sweep: Sweep, shape: dict, dtype: str, nbytes, fns: dict, rows: dict, seconds: dict,
               host: HostTimes | None = None) -> dict:
    """{impl: {mode: samples}} for the correct implementations; failures go into `rows`.

    Modes: `events` always; `cupti` and `host` too when the case moves fewer than
    kernel_below_bytes or its fastest call is under kernel_below_ms, where host time can hide the
    kernel (`host`: the call's own host time, the wrapper's overhead). With `host` (the host
    pass's times) the host rows are those times, for the implementations it timed, and the case
    is not timed on the host again. The SM clock
    and throttle reasons are read before and after; when either shows a slowdown or the clock
    fell below clock_drop x the steady clock, the case is timed once more and the rows say so
    if the second attempt was disturbed too.
    """
    cfg, timer, monitor = sweep.bench, sweep.timer, sweep.monitor

    def warm_up_failed(impl, exc):
        rows[impl].update(status="oom" if is_oom(exc) else "error", message=f"warm-up: {describe(exc)}")

    clock = time.perf_counter()
    estimates = _warm_up(fns, cfg, timer, warm_up_failed)
    seconds["warm_up"] += time.perf_counter() - clock
    if not fns:
        return {}
    modes = ["events"]
    if _kernel_only(cfg, nbytes, estimates):
        modes += ["cupti"] + ([HOST_TIMING] if host is None else [])
    calls = _calls(cfg, estimates)
    record = {"study": sweep.study.STUDY, "dtype": dtype, **shape, "modes": modes, "calls_per_trial": calls,
              "attempts": [], "seconds": seconds}
    if host is not None:
        record["host_pass"] = {impl: len(values) for impl, values in host.samples.items()}
    clock = time.perf_counter()
    for attempt in range(2):
        before = _settle(sweep)
        samples = {impl: {mode: [] for mode in modes} for impl in fns}
        failed = {}
        for order in _trial_orders(cfg, fns, shape, dtype, attempt):
            for impl in order:
                if impl in failed:
                    continue
                for mode in modes:
                    try:
                        samples[impl][mode].extend(timer.sample(fns[impl], calls[impl], mode))
                    except Exception as exc:
                        # (oom?, text), not the exception: its traceback would hold the call's tensors
                        failed[impl] = (is_oom(exc), describe(exc))
                    if impl in failed:
                        _release()                 # outside the handler, the failing frames gone
                        break
        after = monitor.read() if monitor is not None else None
        disturbed = _disturbance(sweep, before, after)
        record["attempts"].append({"before": before, "after": after, "disturbed": disturbed})
        if not disturbed:
            break
    seconds["timing"] += time.perf_counter() - clock
    sweep.cases_log.append(record)
    for impl, (oom, text) in failed.items():
        rows[impl].update(status="oom" if oom else "error", message=f"timing: {text}")
        samples.pop(impl)
    if host is not None:
        for impl in samples:
            if host.samples.get(impl):
                samples[impl][HOST_TIMING] = host.samples[impl]
    if disturbed:
        for impl in samples:
            rows[impl]["message"] = f"measured twice, both under {disturbed}"
    return samples


def _settle(sweep: Sweep) -> dict | None:
    """Clock reading before a case; if the SM clock has fallen from the steady clock (the GPU idled
    while inputs and references were built), run dense matmuls for up to 2 s to bring it back."""
    monitor = sweep.monitor
    if monitor is None:
        return None
    state = monitor.read()
    if sweep.steady_mhz and (state.get("sm_mhz") or 0) < sweep.bench.clock_drop * sweep.steady_mhz:
        a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
        stop = time.perf_counter() + 2.0
        while time.perf_counter() < stop and (state.get("sm_mhz") or 0) < sweep.bench.clock_drop * sweep.steady_mhz:
            for _ in range(32):
                a @ a
            torch.cuda.synchronize()
            state = monitor.read()
        del a
    return state


def _disturbance(sweep: Sweep, before: dict | None, after: dict | None) -> str | None:
    """Why a case's timing cannot be trusted (a slowdown reason, a clock drop), or None."""
    for state in (before, after):
        if state and state.get("slowdown"):
            return "throttling (" + ", ".join(state.get("throttle", [])) + ")"
    floor = sweep.bench.clock_drop * sweep.steady_mhz if sweep.steady_mhz else None
    for state in (before, after):
        if floor and state and state.get("sm_mhz") and state["sm_mhz"] < floor:
            return f"a clock drop (SM {state['sm_mhz']:.0f} MHz < {floor:.0f})"
    return None


def _release() -> None:
    """Wait for the GPU and hand the allocator's free blocks back; never raises (a failure here is
    the CUDA context's, which `context_broken` tells after the case)."""
    if torch.cuda.is_available():
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001  a sticky CUDA error: the sweep checks the context next
            pass


def context_broken() -> str | None:
    """Why this process's CUDA context can run nothing more (a sticky error: an illegal address, a
    device-side assert), or None where it still works (or there is no GPU)."""
    if not torch.cuda.is_available():
        return None
    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
        return None
    except Exception as exc:  # noqa: BLE001
        return describe(exc)


def _progress(done: int, total: int, started: float, row: dict, log) -> None:
    elapsed = time.perf_counter() - started
    eta = elapsed / done * (total - done) if done else 0.0
    metric = row.get("tbps") or row.get("tflops")
    value = f"{metric:8.3f}" if metric else f"{'':8}"
    shape = " ".join(f"{c}={row[c]}" for c in SHAPE_COLUMNS[row["study"]])
    print(f"[{done}/{total} {elapsed:5.0f}s eta {eta:4.0f}s] {row['study']} {row['dtype']} "
          f"{row['impl']:<18} {row['timing']:<9} {row['status']:<11} {value} {shape}", file=log, flush=True)


def remeasure(sweep: Sweep, rows: list[dict], cases: list[tuple[dict, str]], log=None) -> list[dict]:
    """`rows` with every row of each (shape, dtype) case replaced by a new measurement of the case,
    whose messages say so (rooflab.qa flags the cases; the merge step calls this once)."""
    def key(row, shape):
        return tuple(row[c] for c in shape)

    log = log or sys.stderr
    out = list(rows)
    host = []
    for shape, dtype in cases:
        try:
            host.append(host_pass(sweep, shape, dtype))
        except Exception:  # noqa: BLE001  the case is measured without host rows
            host.append(None)
    for (shape, dtype), case_host in zip(cases, host):
        wanted = tuple(shape.values())
        try:
            again = list(measure_case(sweep, shape, dtype, case_host))
        except Exception as exc:  # noqa: BLE001  the first measurement stays, saying so
            print(f"remeasure of {shape} {dtype} failed: {describe(exc)}", file=log, flush=True)
            note = f"remeasure failed: {describe(exc)}"
            out = [dict(r, message=with_note(r.get("message"), note))
                   if r["dtype"] == dtype and key(r, shape) == wanted else r for r in out]
            _release()
            if context_broken():
                break
            continue
        out = [r for r in out if not (r["dtype"] == dtype and key(r, shape) == wanted)]
        for row in again:
            row["message"] = with_note(row.get("message"), REMEASURED)
            out.append(row)
            _progress(1, 1, time.perf_counter(), row, log)
    return out


def run_sweep(sweep: Sweep, out_path: str | Path, log=None, before_exit=None) -> int:
    """Measure every (shape, dtype, impl); write rows to out_path as they come. Returns row count.

    The host pass (`host_pass`, with bench.host_first) goes over every case first, then each case
    is measured and its rows written. A watchdog guards against a kernel that never returns: if
    one case runs past `case_timeout_s` (in either pass), the rows not yet measured are written
    as `error` rows saying so, `before_exit()` runs (the job's other outputs), and the process
    exits with status 0, keeping every row already measured (the driver ends the hung kernel with
    the process). A case that raises past measure_case's own handling gets `error` rows for the
    implementations it had not written; where the CUDA context is then broken (a sticky error),
    every later case gets `error` rows saying so and the sweep ends, keeping what it measured.
    """
    log = log or sys.stderr          # looked up now: a rule's script may have redirected it
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    cases = [(shape, dtype) for dtype in sweep.dtypes for shape in sweep.shapes]
    started = time.perf_counter()
    state = {"case": 0, "since": time.perf_counter(), "done": set(), "written": 0, "pass": "host"}
    lock = threading.Lock()
    handle = out_path.open("w", newline="")
    writer = csv.DictWriter(handle, fieldnames=columns(sweep.study.STUDY))
    writer.writeheader()

    def write(row: dict) -> None:
        writer.writerow(row)
        handle.flush()
        state["written"] += 1

    def not_measured(span: list, why: str) -> None:
        for shape, dtype in span:
            for impl in sweep.impls:
                write(dict(_blank_row(sweep, shape, dtype, impl, "events"), status="error",
                           message=f"not measured: {why}"))

    def watchdog() -> None:
        while True:
            time.sleep(1.0)
            with lock:
                if state["case"] >= len(cases):
                    return
                if time.perf_counter() - state["since"] < sweep.bench.case_timeout_s:
                    continue
                index = state["case"]
                shape, dtype = cases[index]
                hung = f"timed out: the case ran past {sweep.bench.case_timeout_s:g} s"
                if state["pass"] == "host":     # nothing written yet: every case is a row
                    hung += " in the host-time pass"
                    not_measured(cases[:index], "the sweep stopped after a later case timed out in the host-time pass")
                for impl in sweep.impls:
                    if impl not in state["done"]:
                        write(dict(_blank_row(sweep, shape, dtype, impl, "events"), status="error", message=hung))
                not_measured(cases[index + 1:], "the sweep stopped after an earlier case timed out")
                handle.close()
                print(f"case {index + 1} timed out; {state['written']} rows kept in {out_path}", file=log, flush=True)
                if before_exit is not None:
                    try:
                        before_exit()
                    except Exception as exc:  # noqa: BLE001  the rows are kept whatever happens here
                        print(f"before_exit failed: {describe(exc)}", file=log, flush=True)
                os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    host, broken = [], None
    for index, (shape, dtype) in enumerate(cases):
        with lock:
            state.update(case=index, since=time.perf_counter())
        try:
            host.append(host_pass(sweep, shape, dtype))
        except Exception as exc:  # noqa: BLE001  measure_case records the case's own failure
            host.append(None)
            broken = context_broken()
            if broken:
                print(f"the CUDA context failed in the host-time pass at case {index + 1}: {broken}", file=log, flush=True)
                with lock:
                    state["case"] = len(cases)
                    not_measured(cases, f"the CUDA context failed in the host-time pass ({describe(exc)})")
                    handle.close()
                return state["written"]
    for index, (shape, dtype) in enumerate(cases):
        with lock:
            state.update(case=index, since=time.perf_counter(), done=set(), **{"pass": "measure"})
        failed = None
        try:
            for row in measure_case(sweep, shape, dtype, host[index]):
                with lock:
                    write(row)
                    state["done"].add(row["impl"])
                if row["status"] == "error":
                    failed = failed or row["message"]
                _progress(index + 1, len(cases), started, row, log)
        except Exception as exc:  # noqa: BLE001  the case's unwritten impls say why; then the context
            failed = describe(exc)
            with lock:
                for impl in sweep.impls:
                    if impl not in state["done"]:
                        write(dict(_blank_row(sweep, shape, dtype, impl, "events"),
                                   status="oom" if is_oom(exc) else "error", message=f"case failed: {failed}"))
                        state["done"].add(impl)          # the watchdog must not write it again
            _release()
        broken = context_broken() if failed else None      # after an error: can the GPU still run?
        if broken:
            print(f"the CUDA context failed at case {index + 1}: {broken}", file=log, flush=True)
            with lock:
                state["case"] = len(cases)                 # the watchdog stands down before the rows go out
                not_measured(cases[index + 1:], f"the CUDA context failed at an earlier case ({failed})")
            break
    with lock:
        state["case"] = len(cases)
        handle.close()
    return state["written"]
