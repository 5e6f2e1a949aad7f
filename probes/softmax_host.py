"""Probe: where a repeat call of kernels.softmax spends its host time, against torch.softmax.

The committed run at d789a27 has plain calls below 8 MB at a median 1.25x torch.softmax's host time
(ours 21.8 us, torch 17.6, the empty Triton launch 19.3 us from Python on that host). The repeat
path (kernels.fused_softmax.softmax) builds the plan key, looks the plan up, asks for the current
stream, allocates the output, checks its alignment and launches through Triton's C launcher
(kernels._plans.Launch). This probe times each of those steps alone, the whole call, torch.softmax
and the empty kernel through the same launcher, per shape: the median over ROUNDS rounds of the mean
host time (time.perf_counter_ns) of CALLS calls each, synchronised between rounds so that the
launch queue never fills. Steps: the stream from Triton's driver (torch.cuda.current_device, whose
lazy-initialisation check runs each call) and from torch's C getters (the plan's `fast_stream`);
the launch with the tensors (Triton's launcher calls data_ptr() and cuPointerGetAttribute for each)
and with their addresses as ints; `softmax_prev` is the repeat path with the driver's stream and
tensor arguments, `softmax` the wrapper as it stands. STUDY steps are also timed the way the study
times host rows (rooflab.timing.CudaTimer.host: one call right after the L2 flush is queued, the
median of STUDY_CALLS), rows `study_<step>`.

DIAG=profiler: the study's host rows before and after one torch.profiler session in the process
(`after_profiler`).
DIAG=lean: the repeat path through kernels._lean_launch against Triton's C launcher (`lean`).
DIAG=outliers: the shapes whose plain call was above 1.2x torch's in a committed run, beside their
other dtypes.
DIAG=native: the repeat call in C++ (kernels._native_replay) against the same call replayed from
Python and torch.softmax, at the sweep's 21 cases under 8 MB and two split plans.
DIAG=alloc: the output's allocation alone, six ways (torch.empty_like, with contiguous_format,
Tensor.new_empty, torch.empty_strided, torch.empty, aten.empty_like through torch.ops), beside the
whole repeat call and torch.softmax.

Measured (H200 hosts, us; `study_` as the study times host rows, one call after the L2 flush is queued,
the median of STUDY_CALLS; otherwise the mean of CALLS back to back, the median of ROUNDS):
- DIAG=profiler (GPU-4c8bd13c, five shapes, before -> after one profiler session): softmax 7.75-10.82 ->
  9.98-12.62, torch.softmax 5.85-8.34 -> 8.98-9.17, the empty kernel through the C launcher 4.00-4.61 ->
  4.70-4.91 and through Triton 9.66-9.91 -> 11.07-11.61; study_softmax 8.18-9.79 -> 10.41-13.22,
  study_torch 6.54-6.98 -> 9.67-9.92. With TEARDOWN_CUPTI=1 in the environment (another host) the
  after-values came back to the before-values (study_torch 6.32-6.64), but in a process that ran
  thirty profiler sessions one call of torch.softmax took 9.58 us again against 7.16 fresh, so the
  study takes its host rows before any session instead (rooflab.bench.host_pass).
- DIAG=lean (f1e3c3a, GPU-host of that call, eight shapes, every output checked first): the kernel's
  launch through Triton's C launcher 5.28-7.77, through the lean one 4.28-5.79; the empty kernel
  5.34-7.75 against 4.43-6.06; the whole repeat call 10.85-15.63 against 9.22-15.10 (torch.softmax
  7.95-12.26), study_softmax 12.62-19.35 against 12.19-15.12 (study_torch 8.26-13.61).
- DIAG=outliers at 58bac8a, softmax through the lean launcher (softmax_prev: Triton's C launcher),
  seven shapes: softmax 7.01-10.89 against softmax_prev 8.21-13.36 and torch.softmax 6.20-9.87, so
  0.88-1.19x torch's; study_softmax 7.98-13.31 against study_torch 7.15-11.10, 0.80-1.33x (512x512
  fp16 1.33, 1048576x1 bf16 1.25, 512x512 bf16 1.20; the others 0.80-1.17).
- DIAG=alloc at c770d99 (GPU-64317612's host, six shapes, us a call): torch.empty_like 1.21-1.52, with
  contiguous_format 1.35-1.72, torch.empty_strided 1.40-1.65, aten.empty_like 2.04-2.40, new_empty
  2.18-2.47, torch.empty 2.83-3.40; the whole repeat call 5.56-6.15 against torch.softmax 5.15-5.38
  (1.04-1.14x). The output's allocation is already the cheapest of the six.
- DIAG=native at 8d50095 (GPU-3b1b49c3's host; the module built in 22.8 s; every native output equal
  to the first call's and close to torch's), the 21 cases under 8 MB: study_softmax 6.77-10.54 us
  through the native replay, 7.85-14.62 replayed from Python, study_torch 7.08-10.64: native over
  torch a median 0.97x (0.73-1.07x, none above 1.2x), Python over torch 1.15x (0.90-1.42x, five
  above 1.2x); the native call saves a median 1.78 us (0.96-4.07) of the Python one. Back to back,
  native 6.02-9.70 against torch 5.95-9.41 (a median 1.01x; 4096x1 and 4096x7 bf16 1.40x and
  1.35x, where the Python path took 8.17 and 7.78 us against native's 8.68 and 8.79, and where the
  study's timing had native at 0.96x torch) and Python 7.30-11.78 (1.21x). Split plans (stream-bound,
  cooperative) replay natively too: 8x262144 fp16 study 7.69 against 9.35 from Python (torch 7.41),
  16x4194304 fp32 7.13 against 8.61 (7.54).
- DIAG=native at acd613b on an H100 host (GPU-00648679, 23 shapes, every native output equal to
  the first call's): study_softmax 6.61-9.57 us, Python replay 7.63-11.63, study_torch 6.80-9.69;
  native over torch a median 0.94x, at most 1.20x (4096x1 fp16: 9.57 against 8.00), none above
  1.2x; the Python replay a median 1.09x, at most 1.55x (4096x7 fp16), 3 above 1.2x (4096x7 fp16,
  8x262144 fp16, 16x4194304 fp32); the native call saves a median 1.2 us of the Python one.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/softmax_host.py
Writes $OUT/softmax_host.csv (OUT defaults to ./probe_out) and prints us per step and shape last.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402
from kernels._plans import ALIGN, Launch, new_output  # noqa: E402
from rooflab.timing import CudaTimer  # noqa: E402
from triton.runtime import driver  # noqa: E402
from rooflab.ceilings import _empty_kernel  # noqa: E402
from probe_csv import write_csv  # noqa: E402  (probes/, the script's directory)

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
ROUNDS, CALLS = 15, 200
STUDY_CALLS = 400
SHAPES = [(256, 256, torch.float32), (1024, 1024, torch.float16), (4096, 1, torch.float16),
          (8, 2048, torch.bfloat16), (1024, 128, torch.bfloat16)]
if os.environ.get("DIAG") == "outliers":   # plain calls above 1.2x torch's host time in a run (a188f76,
    # e1fb521, 190e707) beside their other dtypes
    SHAPES = [(512, 512, d) for d in (torch.float16, torch.bfloat16, torch.float32)] \
        + [(1048576, 1, d) for d in (torch.float16, torch.bfloat16)] + [(4096, 1, torch.bfloat16)] \
        + [(1024, 128, torch.bfloat16)]


def per_call_us(fn) -> float:
    """Median over ROUNDS of the mean host time (us) of CALLS back-to-back calls of fn."""
    means = []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        for _ in range(CALLS):
            fn()
        means.append((time.perf_counter_ns() - start) / CALLS / 1e3)
    torch.cuda.synchronize()
    return statistics.median(means)


def steps(x: torch.Tensor) -> dict:
    """{step: zero-argument callable} of one repeat call of fs.softmax(x), and the references."""
    dim = -1
    fs.softmax(x, dim)                                 # plan, compile
    fs.softmax(x, dim)                                 # the plan's direct launch
    key = (x.shape, x.stride(), x.dtype, x.device, dim, type(dim), x.data_ptr() % ALIGN)
    plan = fs._PLANS[key]
    if plan.fast is None:
        raise RuntimeError(f"no direct launch for {tuple(x.shape)} {x.dtype}")
    launch, rest = plan.fast
    stream = plan.fast_stream()
    out = new_output(x, plan.like)
    empty = Launch(_empty_kernel[(1,)](x), (1,))

    def stream_driver():                               # the stream as Triton's driver gives it
        active = driver.active
        return active.get_current_stream(active.get_current_device())

    def softmax_prev():                                # the repeat path before int addresses
        key = (x.shape, x.stride(), x.dtype, x.device, dim, type(dim), x.data_ptr() % ALIGN)
        plan = fs._PLANS.get(key)
        s = stream_driver()
        out = new_output(x, plan.like)
        if out.data_ptr() % ALIGN == 0:
            launch(s, out, x, *rest)
        return out

    return {
        "key": lambda: (x.shape, x.stride(), x.dtype, x.device, dim, type(dim), x.data_ptr() % ALIGN),
        "lookup": lambda: fs._PLANS.get(key),
        "stream_driver": stream_driver,
        "stream": plan.fast_stream,
        "output": lambda: new_output(x, plan.like),
        "launch_tensors": lambda: launch(stream, out, x, *rest),
        "launch_ints": lambda: launch(stream, out.data_ptr(), x.data_ptr(), *rest),
        "softmax_prev": softmax_prev,
        "softmax": lambda: fs.softmax(x, dim),
        "torch": lambda: torch.softmax(x, dim),
        "empty_launch": lambda: empty(stream, x),
        "empty_triton": lambda: _empty_kernel[(1,)](x),
    }


STUDY = ("softmax_prev", "softmax", "torch", "empty_triton")   # also timed as the study times host


def study_us(timer: CudaTimer, fn) -> float:
    """Median host time (us) of STUDY_CALLS single calls, each right after the study's L2 flush."""
    return statistics.median(timer.host(fn, STUDY_CALLS)) * 1e3


def after_profiler(timer: CudaTimer) -> None:
    """DIAG=profiler: the study's host rows of softmax, torch.softmax and the empty Triton launch,
    before and after one torch.profiler (CUPTI) session in this process, as a sweep runs its
    `cupti` rows before its `host` rows; CALLS-call means and STUDY_CALLS single calls."""
    rows = []
    for phase in ("before", "after"):
        if phase == "after":
            x = torch.randn(256, 256, device="cuda")
            timer.cupti(lambda: torch.softmax(x, -1), 20)
        for n_rows, cols, dtype in SHAPES:
            x = torch.randn(n_rows, cols, device="cuda").to(dtype)
            calls = steps(x)
            shape = f"{n_rows}x{cols} {str(dtype).removeprefix('torch.')}"
            for name in ("softmax", "torch", "empty_launch", "empty_triton"):
                rows.append({"shape": shape, "step": f"{phase}_{name}", "us": round(per_call_us(calls[name]), 3),
                             "ok": True})
            for name in ("softmax", "torch"):
                rows.append({"shape": shape, "step": f"{phase}_study_{name}",
                             "us": round(study_us(timer, calls[name]), 3), "ok": True})
    report(rows, "softmax_host_profiler.csv")


def report(rows: list, name: str) -> None:
    """Write rows to $OUT/name and print them, a line a shape, a column a step (us), and `ok`."""
    path = os.path.join(OUT, name)
    write_csv(path, rows)
    names = list(dict.fromkeys(r["step"] for r in rows))
    print(f"\nhost us per call (mean of {CALLS}, median of {ROUNDS} rounds; study_: median of {STUDY_CALLS} "
          f"single calls) -> {path}")
    print(f"{'shape':>20} " + " ".join(f"{n:>13}" for n in names) + "  ok")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        mine = {r["step"]: r for r in rows if r["shape"] == shape}
        print(f"{shape:>20} " + " ".join(f"{mine[n]['us']:>13.2f}" for n in names) + f"  {mine[names[0]]['ok']}")


LEAN_SHAPES = [(256, 256, torch.float32), (512, 512, torch.float16), (1024, 1024, torch.float16),
               (4096, 1, torch.float16), (1048576, 1, torch.bfloat16), (1024, 128, torch.bfloat16),
               (8, 262144, torch.float16), (16, 4194304, torch.float32)]


def lean() -> None:
    """DIAG=lean: the repeat path through kernels._lean_launch (the plan's fixed arguments packed
    once, the output and input addresses passed per call) against Triton's C launcher, per shape:
    each output checked against torch.softmax first, then host us a call (per_call_us) and as the
    study times host rows (study_us), in a process with no CUPTI session."""
    from kernels import _lean_launch
    print("lean module:", _lean_launch.module(), flush=True)
    timer = CudaTimer()
    rows = []
    empty_kernel = _empty_kernel[(1,)](torch.empty(1, device="cuda"))
    empty_blob = _lean_launch.pack(empty_kernel, (1,), (0,), (0,), torch.cuda.current_device())
    module = _lean_launch.module()
    for n_rows, cols, dtype in LEAN_SHAPES:
        x = torch.randn(n_rows, cols, device="cuda").to(dtype)
        shape = f"{n_rows}x{cols} {str(dtype).removeprefix('torch.')}"
        calls = steps(x)
        key = (x.shape, x.stride(), x.dtype, x.device, -1, int, x.data_ptr() % ALIGN)
        plan = fs._PLANS[key]
        launch, rest = plan.fast
        blob = _lean_launch.pack(launch.compiled, launch.grid, (0, 0, *rest), (0, 1), torch.cuda.current_device())
        if blob is None:
            print(f"  {shape}: no blob", flush=True)
            continue

        def softmax_lean():
            p = fs._PLANS.get((x.shape, x.stride(), x.dtype, x.device, -1, int, x.data_ptr() % ALIGN))
            stream = p.fast_stream()
            out = new_output(x, p.like)
            module.launch(blob, stream, out.data_ptr(), x.data_ptr())
            return out

        got = softmax_lean()
        torch.cuda.synchronize()
        ok = bool(torch.allclose(got.float(), torch.softmax(x.float(), -1), rtol=2e-2, atol=1e-3))
        stream = plan.fast_stream()
        out = new_output(x, plan.like)
        tests = {"launch_ints": calls["launch_ints"],
                 "launch_lean": lambda: module.launch(blob, stream, out.data_ptr(), x.data_ptr()),
                 "softmax": calls["softmax"], "softmax_lean": softmax_lean, "torch": calls["torch"],
                 "empty_launch": calls["empty_launch"],
                 "empty_lean": lambda: module.launch(empty_blob, stream, x.data_ptr())}
        for name, fn in tests.items():
            rows.append({"shape": shape, "step": name, "us": round(per_call_us(fn), 3), "ok": ok})
        for name in ("softmax", "softmax_lean", "torch"):
            rows.append({"shape": shape, "step": f"study_{name}", "us": round(study_us(timer, tests[name]), 3),
                         "ok": ok})
        print(f"  done {shape} (lean output {'matches' if ok else 'DIFFERS'})", flush=True)
    report(rows, "softmax_host_lean.csv")


def alloc() -> None:
    """DIAG=alloc: ways to allocate a repeat call's output (kernels._plans.new_output: torch.empty_like),
    each alone, beside the whole repeat call and torch.softmax, per shape (per_call_us), in a process
    with no CUPTI session."""
    rows = []
    empty_like_op = torch.ops.aten.empty_like.default
    for n_rows, cols, dtype in LEAN_SHAPES[:6]:
        x = torch.randn(n_rows, cols, device="cuda").to(dtype)
        shape = f"{n_rows}x{cols} {str(dtype).removeprefix('torch.')}"
        size, stride, device = x.shape, x.stride(), x.device
        tests = {"empty_like": lambda: torch.empty_like(x),
                 "empty_like_fmt": lambda: torch.empty_like(x, memory_format=torch.contiguous_format),
                 "new_empty": lambda: x.new_empty(size),
                 "empty_strided": lambda: torch.empty_strided(size, stride, dtype=dtype, device=device),
                 "empty": lambda: torch.empty(size, dtype=dtype, device=device),
                 "aten_empty_like": lambda: empty_like_op(x),
                 "softmax": lambda: fs.softmax(x, -1), "torch": lambda: torch.softmax(x, -1)}
        fs.softmax(x, -1)
        for name, fn in tests.items():
            rows.append({"shape": shape, "step": name, "us": round(per_call_us(fn), 3), "ok": True})
        print(f"  done {shape}", flush=True)
    report(rows, "softmax_host_alloc.csv")


# the sweep's 21 cases under 8 MB (full profile), and two split plans (stream-bound, cooperative)
NATIVE_SHAPES = [(r, c, d) for d in (torch.float32, torch.float16, torch.bfloat16)
                 for r, c in ((256, 256), (512, 512), (1024, 128), (4096, 1), (4096, 7), (1024, 1000),
                              (1024, 1024), (1048576, 1))
                 if r * c * 2 * (4 if d == torch.float32 else 2) < 8_000_000] \
    + [(8, 262144, torch.float16), (16, 4194304, torch.float32)]


def native_replay() -> None:
    """DIAG=native: the repeat call in C++ (kernels._native_replay) against the same call replayed
    from Python (the lean launcher; the module's replay switched off for those calls) and
    torch.softmax, per shape: the native output checked equal to the first call's and close to
    torch's, then host us a call (per_call_us) and as the study times host rows (study_us), in a
    process with no CUPTI session."""
    from kernels import _native_replay as native
    start = time.perf_counter()
    module = native.module()
    print(f"native module: {module} ({time.perf_counter() - start:.1f} s to build or load)", flush=True)
    if module is None:
        native.build()                                 # raises, saying why
    timer = CudaTimer()
    rows = []
    for n_rows, cols, dtype in NATIVE_SHAPES:
        x = torch.randn(n_rows, cols, device="cuda").to(dtype)
        shape = f"{n_rows}x{cols} {str(dtype).removeprefix('torch.')}"
        first = fs.softmax(x)
        fs.softmax(x)                                  # the repeat call that registers the plan
        got = module.replay(x, -1)
        torch.cuda.synchronize()
        ok = got is not None and bool(torch.equal(got, first)) \
            and bool(torch.allclose(got.float(), torch.softmax(x.float(), -1), rtol=2e-2, atol=1e-3))
        replay = fs._native_replay

        def python_path():
            fs._native_replay = None
            try:
                return fs.softmax(x)
            finally:
                fs._native_replay = replay
        tests = {"softmax": lambda: fs.softmax(x), "softmax_python": python_path,
                 "torch": lambda: torch.softmax(x, -1)}
        for name, fn in tests.items():
            rows.append({"shape": shape, "step": name, "us": round(per_call_us(fn), 3), "ok": ok})
        for name, fn in tests.items():
            rows.append({"shape": shape, "step": f"study_{name}", "us": round(study_us(timer, fn), 3), "ok": ok})
        print(f"  done {shape} (native {'taken, output matches' if ok else 'NOT TAKEN OR DIFFERS'})", flush=True)
    report(rows, "softmax_host_native.csv")
    mine = {(r["shape"], r["step"]): r["us"] for r in rows}
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    for step in ("softmax", "softmax_python"):
        ratios = sorted(mine[(s, f"study_{step}")] / mine[(s, "study_torch")] for s in shapes)
        print(f"study_{step} / study_torch over {len(ratios)} shapes: median {statistics.median(ratios):.3f}, "
              f"max {ratios[-1]:.3f}, above 1.2: {sum(r > 1.2 for r in ratios)}")


def main():
    print(f"device {torch.cuda.get_device_name()}", flush=True)
    os.makedirs(OUT, exist_ok=True)
    if os.environ.get("DIAG") == "native":
        native_replay()
        return
    if os.environ.get("DIAG") == "alloc":
        alloc()
        return
    if os.environ.get("DIAG") == "lean":
        lean()
        return
    if os.environ.get("DIAG") == "profiler":
        after_profiler(CudaTimer())
        return
    rows = []
    timer = CudaTimer()
    for n_rows, cols, dtype in SHAPES:
        x = torch.randn(n_rows, cols, device="cuda").to(dtype)
        want = torch.softmax(x.float(), dim=-1)
        ok = torch.allclose(fs.softmax(x).float(), want, rtol=2e-2, atol=1e-3)
        shape = f"{n_rows}x{cols} {str(dtype).removeprefix('torch.')}"
        try:
            calls = steps(x)
        except RuntimeError as exc:                  # no direct launch: a line, and the next shape
            print(f"  {shape}: {exc}", flush=True)
            continue
        for name, fn in calls.items():
            rows.append({"shape": shape, "step": name, "us": round(per_call_us(fn), 3), "ok": ok})
        for name in STUDY:
            rows.append({"shape": shape, "step": f"study_{name}", "us": round(study_us(timer, calls[name]), 3),
                         "ok": ok})
        print(f"  done {shape}", flush=True)
    report(rows, "softmax_host.csv")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        sys.exit("softmax_host needs a CUDA GPU")
    main()
