"""The benchmark harness every study uses.

A study module (rooflab/studies/<name>.py) describes *what* to measure; this module
decides *how*: inputs built once per shape, each implementation returned as a
zero-argument callable so set-up stays out of the timed region, the output checked
against the study's reference on every row, then timed with CUDA events over many
calls with a cold L2 (triton.testing.do_bench zeroes a 256 MB buffer before every
timed call). Failures become rows (`oom`, `error`, `unsupported`, `incorrect`) and the
sweep goes on; every row is flushed to the CSV as soon as it is measured.
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
from typing import Callable, Iterable

import torch

from rooflab.schema import SHAPE_COLUMNS, columns

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Relative error (||out - ref|| / ||ref||, float64 reference) above which a row is `incorrect`.
TOLERANCE = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 3e-2}


class Unsupported(Exception):
    """Raised by an implementation's factory when it cannot run this case (a peer's limit)."""


@dataclass
class BenchConfig:
    warmup_ms: float = 25.0          # do_bench warm-up budget per row
    rep_ms: float = 100.0            # do_bench timing budget per row
    graph_below_bytes: float = 8e6   # also time CUDA-graph replay when a case moves fewer bytes
    graph_rep_ms: float = 50.0       # timing budget for the graph replay rows
    case_timeout_s: float = 300.0    # a case (all impls at one shape) running longer is taken as a hang


@dataclass
class Ceiling:
    """What frac_ceiling and frac_datasheet divide by, for one study and dtype."""
    metric: str            # "tbps" or "tflops"
    measured: float | None
    datasheet: float | None


@dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int


def error_metrics(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(max |out - ref|, ||out - ref|| / ||ref||) over float64 copies.

    Positions where the reference is not finite must match exactly (same inf, NaN where
    NaN); any other non-finite output makes the relative error infinite.
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
    denom = float(ref[finite].norm())
    rel = float(diff.norm()) / denom if denom > 0 else max_abs
    return max_abs, rel


def summarize(times: list[float]) -> Timing:
    """Median, p20 and p80 (ms) of timed samples, and their count."""
    ordered = torch.tensor(times, dtype=torch.float64)
    q = torch.quantile(ordered, torch.tensor([0.5, 0.2, 0.8], dtype=torch.float64)).tolist()
    return Timing(q[0], q[1], q[2], len(times))


def time_callable(fn: Callable[[], object], cfg: BenchConfig, mode: str = "events") -> Timing:
    """Median and p20/p80 of many timed calls; cold L2 for `events`, graph replay for `cudagraph`."""
    import triton.testing

    if mode == "cudagraph":
        times = triton.testing.do_bench_cudagraph(fn, rep=cfg.graph_rep_ms, return_mode="all")
    else:
        times = triton.testing.do_bench(fn, warmup=cfg.warmup_ms, rep=cfg.rep_ms, return_mode="all")
    return summarize(list(times))


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
    timer: Callable[..., Timing] | None = None   # None: check correctness only (interpreter runs)

    def __post_init__(self):
        if self.timer is None and self.device == "cuda":
            self.timer = time_callable


def _blank_row(sweep: Sweep, shape: dict, dtype: str, impl: str, timing: str) -> dict:
    row = dict.fromkeys(columns(sweep.study.STUDY))
    row.update(gpu=sweep.gpu, study=sweep.study.STUDY, impl=impl, dtype=dtype, timing=timing, **shape)
    return row


def _fill_metrics(row: dict, timing: Timing, nbytes: float | None, flops: float | None, ceiling: Ceiling) -> None:
    seconds = timing.median_ms * 1e-3
    row.update(median_ms=timing.median_ms, p20_ms=timing.p20_ms, p80_ms=timing.p80_ms, reps=timing.reps)
    row["tbps"] = nbytes / seconds / 1e12 if nbytes else None
    row["tflops"] = flops / seconds / 1e12 if flops else None
    value = row[ceiling.metric]
    if value is not None:
        row["frac_ceiling"] = value / ceiling.measured if ceiling.measured else None
        row["frac_datasheet"] = value / ceiling.datasheet if ceiling.datasheet else None


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ").strip()
    return text[:300]


def is_oom(exc: BaseException) -> bool:
    """True for CUDA out-of-memory, whether raised as OutOfMemoryError or as a RuntimeError message."""
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def measure_case(sweep: Sweep, shape: dict, dtype: str) -> Iterable[dict]:
    """Rows for every implementation at one shape and dtype (inputs and reference built once)."""
    study = sweep.study
    nbytes, flops = study.work(shape, dtype)
    ceiling = study.ceiling(dtype, sweep.ceilings)
    modes = ["events"]
    if sweep.device == "cuda" and nbytes is not None and nbytes < sweep.bench.graph_below_bytes:
        modes.append("cudagraph")
    try:
        inputs = study.make_inputs(shape, DTYPES[dtype], sweep.device)
        ref = study.reference(inputs)
    except Exception as exc:  # the case itself cannot be built: one row per impl says why
        status = "oom" if is_oom(exc) else "error"
        _release()
        for impl in sweep.impls:
            row = _blank_row(sweep, shape, dtype, impl, "events")
            row.update(status=status, message=f"inputs/reference: {_describe(exc)}")
            yield row
        return
    factories = study.impls()
    for impl in sweep.impls:
        for mode in modes:
            row = _blank_row(sweep, shape, dtype, impl, mode)
            try:
                fn = factories[impl](inputs)
                out = fn()
                if sweep.device == "cuda":
                    torch.cuda.synchronize()
                max_abs, rel = study.check(out, ref, inputs)
                del out                                   # free the output before timing
                row.update(max_abs_err=max_abs, rel_err=rel)
                tol = study.tolerance(dtype)
                if not rel <= tol:
                    row.update(status="incorrect", message=f"rel_err {rel:.3g} > tolerance {tol:g}")
                    continue
                if sweep.timer is not None:
                    _fill_metrics(row, sweep.timer(fn, sweep.bench, mode), nbytes, flops, ceiling)
                row["status"] = "ok"
            except Unsupported as exc:
                row.update(status="unsupported", message=str(exc)[:300])
            except Exception as exc:  # OOM, compile failure, launch failure: record and go on
                row.update(status="oom" if is_oom(exc) else "error", message=_describe(exc))
                _release()
            finally:
                yield row
    del inputs, ref
    _release()


def _release() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _progress(done: int, total: int, started: float, row: dict, log) -> None:
    elapsed = time.perf_counter() - started
    eta = elapsed / done * (total - done) if done else 0.0
    metric = row.get("tbps") or row.get("tflops")
    value = f"{metric:8.3f}" if metric else f"{'':8}"
    shape = " ".join(f"{c}={row[c]}" for c in SHAPE_COLUMNS[row["study"]])
    print(f"[{done}/{total} {elapsed:5.0f}s eta {eta:4.0f}s] {row['study']} {row['dtype']} "
          f"{row['impl']:<18} {row['timing']:<9} {row['status']:<11} {value} {shape}", file=log, flush=True)


def run_sweep(sweep: Sweep, out_path: str | Path, log=sys.stderr) -> int:
    """Measure every (shape, dtype, impl); write rows to out_path as they come. Returns row count.

    A watchdog guards against a kernel that never returns: if one case runs past
    `case_timeout_s`, the rows not yet measured are written as `error` rows saying so, and
    the process exits with status 0, keeping every row already measured (the driver ends
    the hung kernel with the process).
    """
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    cases = [(shape, dtype) for dtype in sweep.dtypes for shape in sweep.shapes]
    started = time.perf_counter()
    state = {"case": 0, "since": time.perf_counter(), "done": set(), "written": 0}
    lock = threading.Lock()
    handle = out_path.open("w", newline="")
    writer = csv.DictWriter(handle, fieldnames=columns(sweep.study.STUDY))
    writer.writeheader()

    def write(row: dict) -> None:
        writer.writerow(row)
        handle.flush()
        state["written"] += 1

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
                for impl in sweep.impls:
                    if impl not in state["done"]:
                        write(dict(_blank_row(sweep, shape, dtype, impl, "events"), status="error",
                                   message=f"timed out: the case ran past {sweep.bench.case_timeout_s:g} s"))
                for shape, dtype in cases[index + 1:]:
                    for impl in sweep.impls:
                        write(dict(_blank_row(sweep, shape, dtype, impl, "events"), status="error",
                                   message="not measured: the sweep stopped after an earlier case timed out"))
                handle.close()
                print(f"case {index + 1} timed out; {state['written']} rows kept in {out_path}", file=log, flush=True)
                os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    for index, (shape, dtype) in enumerate(cases):
        with lock:
            state.update(case=index, since=time.perf_counter(), done=set())
        for row in measure_case(sweep, shape, dtype):
            with lock:
                write(row)
                state["done"].add(row["impl"])
            _progress(index + 1, len(cases), started, row, log)
    with lock:
        state["case"] = len(cases)
        handle.close()
    return state["written"]
