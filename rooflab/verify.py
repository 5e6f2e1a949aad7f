"""Correctness of the kernels in Triton's CPU interpreter (TRITON_INTERPRET=1).

Runs each study's own inputs, reference and check on small shapes on the CPU through the
same harness code path as the GPU sweeps (rooflab.bench.measure_case with device="cpu"),
so the table in the paper tests exactly what the sweeps run. Every case starts from the same seed
(INPUT_SEED), so two runs check the same inputs and give the same errors, and the paper rendered
from them is the same byte for byte (it prints the errors, not the seconds each check took) on any
x86-64 CPU with AVX2: rooflab.interpreter keeps NumPy off its AVX-512 paths, whose float32
arithmetic rounds otherwise. Other CPUs (Arm) may differ in an error's last digit.
"""
from __future__ import annotations

import os
import time

INPUT_SEED = 0
VERIFY_COLUMNS = ("study", "impl", "shape", "dtype", "max_abs_err", "rel_err", "tolerance", "status", "seconds", "message")


def run(verify_cfg: dict) -> list[dict]:
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("set TRITON_INTERPRET=1 before importing triton to verify in the interpreter")
    import random

    import numpy as np
    import torch

    from rooflab import studies
    from rooflab.bench import Sweep, measure_case
    from rooflab.grid import expand
    from rooflab.schema import SHAPE_COLUMNS

    rows = []
    for name, cfg in verify_cfg.items():
        study = studies.load(name)
        sweep = Sweep(study=study, gpu="cpu-interpreter", shapes=[], dtypes=cfg["dtypes"],
                      impls=list(cfg["impls"]), ceilings={}, device="cpu")
        for dtype in cfg["dtypes"]:
            for shape in study.shapes(expand(cfg["grid"])):
                random.seed(INPUT_SEED)
                np.random.seed(INPUT_SEED)
                torch.manual_seed(INPUT_SEED)   # the study's random inputs: the same every run
                started = time.perf_counter()
                for row in measure_case(sweep, shape, dtype):
                    text = " ".join(f"{c}={row[c]}" for c in SHAPE_COLUMNS[name])
                    rows.append({
                        "study": name, "impl": row["impl"], "shape": text, "dtype": dtype,
                        "max_abs_err": row["max_abs_err"], "rel_err": row["rel_err"],
                        "tolerance": study.tolerance(dtype), "status": row["status"],
                        "seconds": round(time.perf_counter() - started, 3), "message": row["message"],
                    })
                    started = time.perf_counter()
                    print(f"{name:9} {row['impl']:14} {dtype:9} {text:60} {row['status']:10} rel_err={row['rel_err']}")
    return rows
