"""Probe: unsplit decode with ragged lengths, the sequences taken longest first.

Ragged B=64 Hkv=8 Lmax=4096 (lengths passed, unsplit on a filled grid, 64/4/4: two programs an SM,
so 264 of the 512 programs run in the first wave) read at 84% of the read ceiling in the 190e707
run, the lowest of the shapes of 256 MB or more; more splits (S=2 and 4, chunks dealt out by length)
took longer. The block scheduler starts programs in grid order, so a long sequence whose programs
come late holds the launch. A model of the launch (each running program streaming at up to an SM's
share of the read rate) puts grid order at 116 us and longest first at 111 us for these lengths.

This probe builds a copy of kernels/flash_decoding.py (written to $OUT/flash_decoding_lpt.py and
imported from there: Triton compiles from source files) in which an unsplit program with lengths
serves the sequence of rank bh // Hkv by decreasing length (ties by index), found from all B
lengths at the program's start, and times it against the shipped call, both at the shipped ring and
at 3 and 2 stages, with cuDNN and the read kernel beside (decode_balance's helpers: every variant
checked against the float64 reference, CUPTI kernel time, L2 flushed).

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_longest_first.py
Writes $OUT/decode_longest_first.csv and prints us and the ratio over the shipped call last.
PROBE_DRYRUN=1 runs it in Triton's CPU interpreter on tiny ragged shapes.
"""
from __future__ import annotations

import importlib.util
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)

import torch  # noqa: E402

fd, study = db.fd, db.study
SHAPES = [(64, 8, 4096, True), (64, 8, 2048, True), (48, 8, 4096, True), (64, 8, 4096, False)]
STAGES = [None, 3, 2]          # None: the shipped ring
if db.DRY:
    SHAPES, STAGES = [(60, 2, 70, True), (5, 2, 300, True)], [None]   # 120 programs: unsplit on 132 SMs

ANCHOR = "    b = bh // heads_kv\n    h = bh % heads_kv\n"
RANKED = ANCHOR + """    if HAS_LENS and not SPLIT:   # probe: the sequence of rank b by decreasing length, ties by index
        offs_r = tl.arange(0, BLOCK_B)
        valid_r = offs_r < batch
        lens_r = tl.load(Lens + offs_r * stride_l, mask=valid_r, other=0).to(tl.int32)
        lens_r = tl.where(valid_r, tl.minimum(tl.maximum(lens_r, 0), cache_len), -1)
        ahead_r = (lens_r[None, :] > lens_r[:, None]) | ((lens_r[None, :] == lens_r[:, None])
                                                         & (offs_r[None, :] < offs_r[:, None]))
        rank_r = tl.sum((ahead_r & valid_r[None, :]).to(tl.int32), 1)
        b = tl.sum(tl.where((rank_r == b) & valid_r, offs_r, 0), 0)
"""
BLOCK_B_OLD = "max(16, pow2(batch)) if spread else 16"
BLOCK_B_NEW = "max(16, pow2(batch))"


def ranked_module():
    """kernels.flash_decoding with the unsplit programs with lengths taking sequences longest first."""
    with open(fd.__file__) as handle:
        src = handle.read()
    assert src.count(ANCHOR) == 1 and src.count(BLOCK_B_OLD) == 1, "the decode kernel moved: update the probe"
    src = src.replace(ANCHOR, RANKED).replace(BLOCK_B_OLD, BLOCK_B_NEW)
    os.makedirs(db.OUT, exist_ok=True)
    path = os.path.join(db.OUT, "flash_decoding_lpt.py")
    with open(path, "w") as handle:
        handle.write(src)
    spec = importlib.util.spec_from_file_location("flash_decoding_lpt", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


LPT = None


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
        cands[f"lpt{tag}"] = (lambda st=st: (lambda: LPT._decode(q, k, v, passed, None, None, None,
                                                                 None if st is None else 64,
                                                                 None if st is None else 4, st)))
        splits[f"ours{tag}"] = splits[f"lpt{tag}"] = s
    cands["cudnn"] = lambda: study.impls()["sdpa_cudnn"](inputs)
    splits.update({name: "" for name in ("cudnn", "read2048", "read4096")})
    return cands, splits


def main():
    global LPT
    LPT = ranked_module()
    table, path = db.sweep_to_csv(SHAPES, "longest_first", candidates, "decode_longest_first", with_read=True)
    names = [f"{kind}{'' if st is None else f'_s{st}'}" for st in STAGES for kind in ("ours", "lpt")]
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}; (S): splits; x: over ours; read: the whole cache")
    db.print_ratios(table, [*names, "cudnn", "read2048", "read4096"], "ours", 15)
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or torch.cuda.is_available()):
        sys.exit("decode_longest_first needs a CUDA GPU")
    main()
