"""Compile a study's torch.compile graphs in parallel processes before its sweep times anything.

torch.compile (Inductor) compiles one graph per softmax shape and dtype, one after another in
the sweep's first calls: about 41 s of each softmax job on an H200 host (the committed run's
`softmax/<dtype>.env.json`). The graphs do not depend on each other, so `warm` compiles them in a
few worker processes first. Each worker writes Inductor's on-disk caches (the FX graph cache and
the Triton kernels under TORCHINDUCTOR_CACHE_DIR, shared by the processes of one user), and the
sweep's own first call at a shape then traces the function and loads its compiled graph from
there. The graph and the code it runs are the same; only when the compiling happens moves, and
it ends before the job warms the GPU up and times anything. A case a worker fails to compile is
left to the sweep's first call, which records the failure as its row. Measured on an H200 host
(16 cores), the full grid's 30 fp16 graphs: 24.1 s in 8 workers (each pays its own imports, CUDA
context and Inductor start-up), then 5.6 s of first calls in the sweep's process, all 30 FX-graph
cache hits; the committed run's fp16 sweep spent 42.6 s compiling them in its first calls.

A study takes part by defining `PRECOMPILED_IMPL` (the implementation whose graphs these are)
and `compile_case(shape, dtype_name, device)`, which builds the case's inputs exactly as the
sweep does and calls the compiled function once.

    python -m rooflab.precompile <study> <device> <case> ...   # one worker; case: JSON [shape, dtype]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

WORKERS = 8              # worker processes at most (and at most the cores this job may use)
TIMEOUT_S = 600          # a worker still compiling after this long is stopped


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        return os.cpu_count() or 1


def warm(study_name: str, shapes: list[dict], dtypes: list[str], impls: list[str], device: str = "cuda",
         workers: int = WORKERS, log=None) -> float:
    """Compile the study's graphs for every (shape, dtype) in parallel processes; seconds spent.

    Nothing to do (0.0) when the study has no compiled implementation, it is not in `impls`, or
    there are fewer than two cases or cores. Workers inherit the environment (the GPU this job
    was given, Inductor's cache directory); a worker's failure is printed to `log`, not raised.
    """
    from rooflab import studies
    log = log or sys.stderr
    study = studies.load(study_name)
    impl = getattr(study, "PRECOMPILED_IMPL", None)
    cases = [[shape, dtype] for dtype in dtypes for shape in shapes]
    count = min(workers, len(cases), _cores())
    if impl is None or impl not in impls or count < 2:
        return 0.0
    started = time.perf_counter()
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    procs = [subprocess.Popen([sys.executable, "-m", "rooflab.precompile", study_name, device,
                               *(json.dumps(case) for case in cases[i::count])],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(count)]
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            out += f"\nstopped after {TIMEOUT_S} s"
        if proc.returncode != 0 or "failed" in out:
            print(f"precompile worker (exit {proc.returncode}):\n{out.strip()[-2000:]}", file=log, flush=True)
    seconds = time.perf_counter() - started
    print(f"precompiled {impl} for {len(cases)} cases in {count} processes: {seconds:.1f} s", file=log, flush=True)
    return seconds


def _worker(study_name: str, device: str, cases: list[str]) -> None:
    from rooflab import studies
    study = studies.load(study_name)
    for text in cases:
        shape, dtype = json.loads(text)
        try:
            study.compile_case(shape, dtype, device)
        except Exception as exc:  # left to the sweep's first call, which records it
            print(f"{shape} {dtype}: failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2], sys.argv[3:])
