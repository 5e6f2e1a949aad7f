"""Probe: unsplit decode with ragged lengths, the sequences taken longest first against grid order.

Ragged B=64 Hkv=8 Lmax=4096 (lengths passed, unsplit on a filled grid, 64/4/4: two programs an SM,
so 264 of the 512 programs run in the first wave) read at 84% of the read ceiling in the 190e707
run, the lowest of the shapes of 256 MB or more; more splits (S=2 and 4, chunks dealt out by length)
took longer. The block scheduler starts programs in grid order, so a long sequence whose programs
come late holds the launch. A model of the launch (each running program streaming at up to an SM's
share of the read rate) put grid order at 116 us and longest first at 111 us for these lengths.

The shipped kernel ranks the lengths (LONGEST_FIRST, kernels/flash_decoding.longest_first); this
probe builds a copy of kernels/flash_decoding.py (written to a temporary directory, not $OUT, and
imported from there: Triton compiles from source files) in which every program serves sequence
bh // Hkv, as before the rule, and times the two, both at the shipped ring and at 3 and 2 stages,
with cuDNN and the read kernel beside (decode_balance's helpers: every variant checked against the
float64 reference, CUPTI kernel time, L2 flushed). Measured before the rule shipped (the copy then
ranked and the shipped kernel did not), fp16, us, grid order -> longest first: ragged B=64 Lmax=4096
122.7 -> 117.2, Lmax=2048 77.0 -> 60.0, B=48 Lmax=4096 107.1 -> 104.8; equal lengths 240.7 -> 240.9.

In the e1fb521 run (longest first shipped) ragged B=64 Hkv=8 Lmax=4096 read at 89% (114.8 us), and its
paged call (S=2, chunks dealt out by length) took 1.17x that. The probe also times the paged call as
the study makes it (`paged`) and the same pool unsplit (`paged_s1`, one program a sequence, so
longest first). Measured at dea125f (H200 GPU-3e845773, fp16, us; contiguous as shipped / paged as
the study makes it / paged unsplit): ragged B=64 Lmax=4096 117.0 / 135.8 / 160.3, B=64 Lmax=2048
59.8 / 85.1 / 85.3, B=48 Lmax=4096 104.4 / 125.2 / 110.2; so the paged pool unsplit is no answer to
the paged 0.85x row (B=64 Lmax=4096): it wins only at B=48. The contiguous call's longest first
held (grid order 122.9, 76.2, 107.7) and equal lengths 241.2 against 241.6.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_longest_first.py
Writes $OUT/decode_longest_first.csv and prints us and the ratio over the shipped call last.
PROBE_DRYRUN=1 runs it in Triton's CPU interpreter on tiny ragged shapes.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)
from module_copy import import_source  # noqa: E402

import torch  # noqa: E402

fd, study = db.fd, db.study
SHAPES = [(64, 8, 4096, True), (64, 8, 2048, True), (48, 8, 4096, True), (64, 8, 4096, False)]
STAGES = [None, 3, 2]          # None: the shipped ring
if db.DRY:
    SHAPES, STAGES = [(60, 2, 70, True), (5, 2, 300, True)], [None]   # 120 programs: unsplit on 132 SMs

RANKED = "        b = _rank_by_length(Lens, stride_l, batch, cache_len, b, BLOCK_B)\n"
GRID_ORDER = "        b = b   # probe: grid order\n"


def grid_order_module():
    """kernels.flash_decoding with every program serving sequence bh // Hkv (no ranking)."""
    with open(fd.__file__) as handle:
        src = handle.read()
    assert src.count(RANKED) == 1, "the decode kernel moved: update the probe"
    src = src.replace(RANKED, GRID_ORDER)
    return import_source("flash_decoding_grid", src)


GRID = None


def candidates(inputs, num_sms):
    q, k, v, lens = inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["seqlens"]
    passed = lens if inputs["ragged"] else None          # as the study passes them
    b, hkv, n, _ = k.shape
    s = fd.planned_splits(b, hkv, n, db.D, 2, num_sms, db.HQ // hkv, False, passed is not None)
    cands, splits = {}, {}
    for st in STAGES:
        tag = "" if st is None else f"_s{st}"
        cands[f"ours{tag}"] = (lambda st=st: (lambda: fd._decode(q, k, v, passed, None, None, None,
                                                                 None if st is None else 64,
                                                                 None if st is None else 4, st)))
        cands[f"grid{tag}"] = (lambda st=st: (lambda: GRID._decode(q, k, v, passed, None, None, None,
                                                                 None if st is None else 64,
                                                                 None if st is None else 4, st)))
        splits[f"ours{tag}"] = splits[f"grid{tag}"] = s
    cands["cudnn"] = lambda: study.impls()["sdpa_cudnn"](inputs)
    cands["paged"] = lambda: study.impls()["ours_paged"](inputs)
    if passed is not None:   # the paged pool unsplit: one program a sequence, longest first
        def paged_unsplit():
            kp, vp, table = fd.paged_cache(k, v, study.PAGE_SIZE, seed=study.PAGE_SEED)
            return lambda: fd._decode(q, kp, vp, passed, None, 1, table)
        cands["paged_s1"] = paged_unsplit
    splits.update({name: "" for name in ("cudnn", "paged", "paged_s1", "read2048", "read4096")})
    return cands, splits


def main():
    global GRID
    GRID = grid_order_module()
    table, path = db.sweep_to_csv(SHAPES, "longest_first", candidates, "decode_longest_first", with_read=True)
    names = [f"{kind}{'' if st is None else f'_s{st}'}" for st in STAGES for kind in ("ours", "grid")]
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}; (S): splits; x: over ours; read: the whole cache")
    db.print_ratios(table, [*names, "paged", "paged_s1", "cudnn", "read2048", "read4096"], "ours", 15)
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or torch.cuda.is_available()):
        sys.exit("decode_longest_first needs a CUDA GPU")
    main()
