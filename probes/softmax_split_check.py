"""GPU check of split's fused launch before a run: forced split (the launch table's setting, which
gives problems of several rounds 2-tile segments on 4 warps up to 6 an SM, then one-, two- and
four-tile segments on its warps, with and without prefetch, aligned and peeled rows) and softmax() called again and again on one
plan (its partials' tags alternating launch after launch), each output poisoned first and compared
with a float64 softmax of a hostile input (-inf entries, a row of -inf, a huge entry). Exits 1 on a
mismatch; a hang (a wait that never ends) is the caller's timeout.

    python3 probes/softmax_split_check.py
"""
from __future__ import annotations

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402

TOL = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5}
SHAPES = [(16, 4194304, torch.float16), (64, 1048576, torch.float32), (8, 262144, torch.bfloat16),
          (3, 70001, torch.float32), (2048, 65537, torch.float16), (512, 151936, torch.bfloat16), (1, 1000, torch.float16)]
CONFIGS = [None, dict(seg_tiles=1), dict(seg_tiles=2), dict(seg_tiles=4), dict(seg_tiles=1, prefetch=False)]


def hostile(rows, cols, dtype):
    torch.manual_seed(0)
    x = torch.randn(rows, cols, device="cuda") * 4
    x[0, ::7] = float("-inf")
    if rows > 1:
        x[-1, : cols // 2] = float("-inf")
    if rows > 2:
        x[2] = float("-inf")
        x[1, 5] = 3e4 if dtype != torch.float32 else 1e30
    return x.to(dtype)


def error(got, ref):
    err = (got.double() - ref).abs().nan_to_num(nan=0.0).max().item()
    return err, torch.equal(got.isnan(), ref.isnan())


def main() -> int:
    bad = 0
    for rows, cols, dtype in SHAPES:
        x = hostile(rows, cols, dtype)
        ref = torch.softmax(x.double(), -1)
        runs = []
        for extra in CONFIGS:
            cfg = fs.config("split", cols, dtype, rows, torch.cuda.get_device_properties(0).multi_processor_count)
            if extra:
                cfg = fs.Config(block=cfg.block, num_warps=cfg.num_warps, **extra)
            for rep in range(3):
                out = torch.full_like(x, float("nan"))
                fs.STRATEGIES["split"].run(x, out, cfg)
                runs.append((f"split {extra or 'table'} #{rep}", out))
        for rep in range(4):                       # one plan, launched again and again
            runs.append((f"softmax #{rep}", fs.softmax(x)))
        torch.cuda.synchronize()
        for name, got in runs:
            err, nan_ok = error(got, ref)
            ok = err <= TOL[dtype] and nan_ok
            bad += not ok
            if not ok or name.endswith("#0"):
                print(f"{rows}x{cols} {str(dtype)[6:]:>8} {name:<40} err {err:.2e} nan_ok {nan_ok}"
                      + ("" if ok else "  MISMATCH"))
    print(f"split check: {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
