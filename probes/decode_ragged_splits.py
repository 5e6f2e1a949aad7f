"""Probe: the decode launches of the c3249fa run that read furthest under 95% of the read ceiling at
256 MB and more, each against the launches the rules did not pick.

1. Ragged B=64 Hkv=8 Lmax=4096 (88.6% of the 4.69 TB/s ceiling, the lowest): unsplit, two programs
   an SM (104 KB of shared memory), 512 programs, longest first. The longest program (4096 tokens)
   outlasts the mean slot load (about 3530 tokens). Candidates: the rule's launch (`ours`), forced
   S = 2, 3 and 4 (chunks dealt out by length, kernels.flash_decoding._ragged_chunk), and the
   unsplit launch at 3 and 2 stages. RAGGED_CHUNK_TOKENS' comment has S=2 slower (3.27 against
   3.64 TB/s), from code before longest first.
2. LONG_CHUNK_CONFIG (128-token tiles, 8 warps, 3 stages) against 64/4/4 and 128/4/3 at the rule's
   split count, wherever long_grouped_chunks gives it: B=1 Hkv=8 L=131072 and B=4 Hkv=8 L=32768
   (decode_balance.py DIAG=large had 64/4/4 1-2% ahead there) and the ragged B=4 Hkv=8 Lmax=32768,
   which the config sped up by 25% when it was set (long_grouped_chunks' docstring; the ragged B=16
   Lmax=32768 it sped up by 7% now runs S=8 on chunks of 4096 tokens, under LONG_CHUNK_TOKENS, so
   on 64/4/4 anyway).
cuDNN and the read kernel over the same bytes run beside them (decode_balance's helpers: every
variant checked against the float64 reference first, CUPTI kernel time, L2 flushed, shuffled rounds).

Measured at 24a2def on GPU-0cc7ff8d (the committed run's H200, right after it; fp16, Hq=32, D=128,
us of kernel time, every variant's output checked):
1. Ragged B=64 Hkv=8 Lmax=4096: the rule's unsplit launch 117.3; forced S = 2, 3, 4 128.6, 124.0,
   120.8 (1.10x, 1.06x, 1.03x); unsplit on 3 and 2 stages 126.8 and 137.1; cuDNN 243.5; the read
   kernel over the whole padded cache 235.0-235.7. The rule's launch is the fastest tried.
2. LONG_CHUNK_CONFIG (`ours`) / 64x4x4 / 128x4x3: B=1 Hkv=8 L=131072 126.1 / 124.1 / 124.5 (cuDNN
   125.6), B=4 Hkv=8 L=32768 125.0 / 124.2 / 124.4 (125.0), ragged B=4 Hkv=8 Lmax=32768 55.9 / 112.2
   / 97.1 (126.3). At uniform lengths the smaller tiles gain 0.6-1.6%; ragged, LONG_CHUNK_CONFIG
   is 1.74-2.01x faster, so the rule keeps it.

DIAG=long: group 2 only, at LONG_CHUNK_CONFIG's uniform shapes by chunk length (8192: B=1 Hkv=8
L=131072, B=4 Hkv=8 L=32768, B=2 Hkv=8 L=65536; 16384: B=4 Hkv=8 L=65536; 32768: B=4 Hkv=8
L=131072), where long_grouped_chunks' docstring had it 2-7% ahead on earlier code.

Measured with DIAG=long at f6f5c8a (GPU-85e81234, fp16, us; `ours` then ran LONG_CHUNK_CONFIG at
all five shapes) ours / 64x4x4 / 128x4x3 / cuDNN: B=1 Hkv=8 L=131072 127.0 / 124.5 / 125.0 / 125.5;
B=4 Hkv=8 L=32768 124.5 / 123.7 / 124.3 / 124.9; B=2 Hkv=8 L=65536 125.9 / 124.5 / 124.5 / 124.9;
B=4 Hkv=8 L=65536 243.1 / 241.9 / 242.3 / 242.3; B=4 Hkv=8 L=131072 478.1 / 476.1 / 477.8 / 475.8.
64x4x4 0.980-0.996x at every chunk length: since 147b65e calls without lengths keep it.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_ragged_splits.py
Writes $OUT/decode_ragged_splits.csv (both groups) and prints us and the ratio over `ours` per group.
PROBE_DRYRUN=1 runs it in Triton's CPU interpreter on tiny shapes.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)

import torch  # noqa: E402

fd, study = db.fd, db.study
SPLIT_SHAPES = [(64, 8, 4096, True)]
CONFIG_SHAPES = [(1, 8, 131072, False), (4, 8, 32768, False), (4, 8, 32768, True)]
FORCED_SPLITS = (2, 3, 4)
UNSPLIT_STAGES = (3, 2)
CONFIGS = {"64x4x4": (64, 4, 4), "128x4x3": (128, 4, 3)}      # beside the rule's (LONG_CHUNK_CONFIG here)
if db.DIAG == "long":   # LONG_CHUNK_CONFIG's uniform shapes by chunk length: 8192 (the first three), 16384, 32768
    SPLIT_SHAPES = []
    CONFIG_SHAPES = [(1, 8, 131072, False), (4, 8, 32768, False), (2, 8, 65536, False), (4, 8, 65536, False),
                     (4, 8, 131072, False)]
if db.DRY:
    SPLIT_SHAPES, CONFIG_SHAPES = [(60, 2, 70, True)], [(1, 2, 600, False)]
    FORCED_SPLITS, UNSPLIT_STAGES, CONFIGS = (2,), (2,), {"16x2x2": (16, 2, 2)}


def _operands(inputs):
    passed = inputs["seqlens"] if inputs["ragged"] else None       # as the study passes them
    return inputs["q"], inputs["k_cache"], inputs["v_cache"], passed


def _plan_splits(inputs, num_sms) -> int:
    q, k, _, passed = _operands(inputs)
    b, hkv, n, _ = k.shape
    return fd.planned_splits(b, hkv, n, db.D, 2, num_sms, db.HQ // hkv, False, passed is not None)


def _forced(inputs, splits=None, tiles=(None, None, None)):
    """A candidate (a factory of calls) of decode_attention on the study's operands with the split count
    and (BLOCK_N, warps, stages) given; None takes the rule's."""
    q, k, v, passed = _operands(inputs)
    return lambda: (lambda: fd._decode(q, k, v, passed, None, splits, None, *tiles))


def _candidates(inputs, num_sms, variants: dict):
    """(candidates, split counts) of one shape: `ours` (the rule), each forced variant of `variants`
    ({name: (splits forced or None, (BLOCK_N, warps, stages), split count it reports)}) and cuDNN;
    the read kernels' entries (read2048, read4096) report no split count."""
    cands = {"ours": _forced(inputs)}
    splits = {"ours": _plan_splits(inputs, num_sms)}
    for name, (forced, tiles, reported) in variants.items():
        cands[name] = _forced(inputs, forced, tiles)
        splits[name] = reported
    cands["cudnn"] = lambda: study.impls()["sdpa_cudnn"](inputs)
    splits.update({name: "" for name in ("cudnn", "read2048", "read4096")})
    return cands, splits


def split_candidates(inputs, num_sms):
    return _candidates(inputs, num_sms, {**{f"S={s}": (s, (None, None, None), s) for s in FORCED_SPLITS},
                                         **{f"S=1_s{st}": (1, (64, 4, st), 1) for st in UNSPLIT_STAGES}})


def config_candidates(inputs, num_sms):
    s = _plan_splits(inputs, num_sms)
    return _candidates(inputs, num_sms, {name: (s, tiles, s) for name, tiles in CONFIGS.items()})


def main():
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}; (S): splits; x: over ours; read: the whole cache")
    table, path = db.sweep_to_csv(SPLIT_SHAPES, "splits", split_candidates, "decode_ragged_splits", with_read=True)
    if SPLIT_SHAPES:
        names = ["ours", *(f"S={s}" for s in FORCED_SPLITS), *(f"S=1_s{st}" for st in UNSPLIT_STAGES)]
        db.print_ratios(table, [*names, "cudnn", "read2048", "read4096"], "ours", 12)
        db.print_bad(path)
    table = db.sweep(CONFIG_SHAPES, "configs", config_candidates, with_read=True)
    db.write_csv(path, db.ROWS)                 # both groups' rows, the group in each row
    db.print_ratios(table, ["ours", *CONFIGS, "cudnn", "read2048", "read4096"], "ours", 12)
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or torch.cuda.is_available()):
        sys.exit("decode_ragged_splits needs a CUDA GPU")
    main()
