"""Edited copies of a kernel module for timing probes: the source, changed by the probe, written to a
file and imported under a name of its own, beside the module as shipped."""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile


def import_source(name: str, source: str, directory: str | None = None):
    """Import `source` as module `name` from `directory`/`name`.py (a new temporary folder by default).
    The module is in sys.modules while it executes: dataclasses look their module up there."""
    path = os.path.join(directory or tempfile.mkdtemp(prefix="rooflab_probe_"), f"{name}.py")
    with open(path, "w") as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def dry_check(shapes, dtypes, variants, tol: dict) -> int:
    """The probes' PROBE_DRYRUN check (Triton's interpreter, no GPU): for each (rows, cols) and dtype a
    small hostile input (randn * 4, every 7th entry of row 0 and all of the last row -inf, one entry of
    3e4, or 1e30 in fp32, from three rows up), and each of variants(x, cols) -> {name: call(out)} run into
    a NaN-poisoned output against float64 softmax: error within tol[dtype], NaN exactly where the
    reference has it. Prints a line a run; returns how many mismatched."""
    import torch
    bad = 0
    for rows, cols in shapes:
        for dtype in dtypes:
            torch.manual_seed(0)
            x = (torch.randn(rows, cols) * 4).to(dtype)
            x[0, ::7] = float("-inf")
            x[-1] = float("-inf")
            if rows > 2:
                x[1, 0] = 3e4 if dtype != torch.float32 else 1e30
            ref = torch.softmax(x.double(), -1)
            for name, call in variants(x, cols).items():
                got = call(torch.full_like(x, float("nan")))
                err = (got.double() - ref).abs().nan_to_num(nan=0.0).max().item()
                ok = err <= tol[dtype] and torch.equal(got.isnan(), ref.isnan())
                bad += not ok
                print(f"{rows}x{cols} {str(dtype)[6:]:>8} {name:>14}: max error {err:.2e}{'' if ok else '  MISMATCH'}")
    return bad
