"""Probe: the decode kernel as shipped against the same kernel at an earlier commit, and cuDNN, at
contiguous shapes without lengths whose code path did not change but whose compiled kernel did
(registers: the length-dealt path's restructuring of _decode_kernel).

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_codegen.py
Needs probes/_decode_at_cee2c50.py: `git show cee2c50:kernels/flash_decoding.py` written there.
DIAG=fill: grids of 128 programs, which leave 4 of the H200's 132 SMs idle, against the smallest S
that fills every SM (the plan's tiles and 64-token ones) and cuDNN; no copy needed. Measured on
an H200, us, ours (S) / fill (S) / fill at 64-token tiles / the plan's S at 64-token tiles / cuDNN:
B=1 Hkv=8 L=131072 136.3 (16) / 140.8 (33) / 141.1 / 135.3 / 137.3; L=32768 45.1 / 47.3 / 47.6 /
44.8 / 46.2; B=4 Hkv=8 L=131072 495.7 (4) / 507.1 / 505.8 / 493.1 / 502.0; B=1 Hkv=32 L=131072
492.7 (4) / 502.8 / 503.2 / 492.5 / 500.3; B=4 Hkv=32 L=32768 490.8 (1) / 494.1 / 494.3 / 490.4 /
487.7; B=16 Hkv=8 L=32768 488.2 (1) / 505.1 / 505.4 / 488.3 / 487.4. Filling the 4 idle SMs costs
1-5% (more programs, and a merge where there was none); the plan stays.
Writes $OUT/decode_codegen.csv and prints a short table last (decode_balance's helpers: fp16,
Hq=32, D=128, every variant checked against the float64 reference, CUPTI kernel time, L2 flushed).

Measured on an H200 after the run at c2c192b (whose two losses to cuDNN, 0.98x at B=1 Hkv=8
L=131072, came with a read ceiling 1.7% below the previous run's GPU), us, ours / cee2c50 / cuDNN:
B=1 Hkv=8 L=131072 134.8 / 136.0 / 135.6; B=4 Hkv=8 L=32768 133.8 / 133.2 / 135.2; B=1 Hkv=32
L=131072 485.1 / 483.9 / 486.3; B=16 Hkv=8 L=4096 72.8 / 72.8 / 73.5; ragged B=4 Lmax=32768 64.9
(one wave, dealt by length) / 66.6 (four waves of Lmax's chunks) / 135.9. The restructured kernel
(104 -> 110 registers at 128-token tiles, no spills either way) runs as fast as before.
"""
from __future__ import annotations

import importlib.util
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402

import torch  # noqa: E402

fd, study = db.fd, db.study
SHAPES = [(1, 8, 131072, False), (4, 8, 32768, False), (1, 32, 131072, False), (16, 8, 4096, False),
          (4, 8, 32768, True)]
FILL = os.environ.get("DIAG") == "fill"   # grids of 128 programs leave 4 of 132 SMs idle: S that fills them
if FILL:
    SHAPES = [(1, 8, 131072, False), (1, 8, 32768, False), (4, 8, 131072, False), (1, 32, 131072, False),
              (4, 32, 32768, False), (16, 8, 32768, False)]
if db.DRY:
    SHAPES = [(2, 2, 300, not FILL), (1, 2, 200, False)]


def _old_module():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_decode_at_cee2c50.py")
    spec = importlib.util.spec_from_file_location("decode_at_cee2c50", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OLD = None if FILL else _old_module()


def filling_splits(programs: int, wave: int, num_sms: int) -> int:
    """The smallest S >= the one-wave count for which programs * S is a whole number of SM counts."""
    s = wave
    while (programs * s) % num_sms:
        s += 1
    return s


def fill_candidates(inputs, num_sms):
    """ours (the plan) against forced S: the plan's S and the S that fills every SM, with the plan's
    tiles and with 64-token tiles (4 warps, 4 stages; two programs an SM at D = 128)."""
    q, k, v = inputs["q"], inputs["k_cache"], inputs["v_cache"]
    batch, heads_kv, cache_len, _ = k.shape
    group = db.HQ // heads_kv
    s = fd.planned_splits(batch, heads_kv, cache_len, db.D, 2, num_sms, group, False, False)
    fill = filling_splits(batch * heads_kv, s, num_sms)
    cands = {"ours": lambda: (lambda: fd.decode_attention(q, k, v)),
             "fill": lambda: (lambda: fd._decode(q, k, v, None, None, fill, None)),
             "fill_64": lambda: (lambda: fd._decode(q, k, v, None, None, fill, None, 64, 4, 4)),
             "plan_64": lambda: (lambda: fd._decode(q, k, v, None, None, s, None, 64, 4, 4))}
    if not db.DRY:
        cands["cudnn"] = lambda: study.impls()["sdpa_cudnn"](inputs)
    return cands, {"ours": s, "fill": fill, "fill_64": fill, "plan_64": s, "cudnn": ""}


def candidates(inputs, num_sms):
    q, k, v = inputs["q"], inputs["k_cache"], inputs["v_cache"]
    lens = inputs["seqlens"] if inputs["ragged"] else None
    batch, heads_kv, cache_len, _ = k.shape
    group = db.HQ // heads_kv
    cands = {"ours": lambda: (lambda: fd.decode_attention(q, k, v, lens)),
             "cee2c50": lambda: (lambda: OLD.decode_attention(q, k, v, lens))}
    if not db.DRY:
        cands["cudnn"] = lambda: study.impls()["sdpa_cudnn"](inputs)
    s = fd.planned_splits(batch, heads_kv, cache_len, db.D, 2, num_sms, group, False, inputs["ragged"])
    s_old = OLD.planned_splits(batch, heads_kv, cache_len, db.D, 2, num_sms, group, False, inputs["ragged"])
    return cands, {"ours": s, "cee2c50": s_old, "cudnn": ""}


def main():
    table, path = db.sweep_to_csv(SHAPES, "codegen", fill_candidates if FILL else candidates, "decode_codegen")
    db.kernel_rows(os.path.join(db.OUT, "decode_codegen_kernels.csv"))
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}; (S): splits; x: over ours")
    names = ["ours", "fill", "fill_64", "plan_64"] if FILL else ["ours", "cee2c50"]
    db.print_ratios(table, [*names, *(["cudnn"] if not db.DRY else [])], "ours")
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or torch.cuda.is_available()):
        sys.exit("decode_codegen needs a CUDA GPU")
    main()
