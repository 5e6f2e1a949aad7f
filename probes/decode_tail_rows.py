"""Probe: unsplit ragged decode launches with E extra rows of programs, the longest sequences dealt out.

The question. Ragged B=64 Hkv=8 Lmax=4096 is the lowest share of the read ceiling at 256 MB and more
in the 1fe78a9 run (88.7%, 114.8 us for 477 MB). Its launch is unsplit and longest first: 512
programs on 264 slots (two an SM), the mean slot load about 3530 tokens and the longest sequence
4096, so the slots that start on the longest sequences end last. Splitting every sequence (S = 2-4,
chunks dealt out by length) cost more than it gained (decode_ragged_splits: 1.03-1.10x), each program
paying its start and its merge. Here only the longest sequences are cut: the grid holds B + E rows of
Hkv programs (kernels.flash_decoding._decode's `tail`, TAIL in the kernel), each KV head's B + E
programs are dealt out by length with the shortest chunk c at which the B sequences need at most
B + E of them (_ragged_chunk), in order of decreasing length; a sequence that one program reads
whole is written directly, the others merged in the same launch. E = 8 cuts the sequences longer
than about the mean slot load in two; larger E cuts more of them, shorter.

Shapes (fp16, Hq=32, D=128, lengths passed to every call, the study's ragged draws): ragged B=64 Hkv=8
Lmax=4096 and 2048, B=48 and B=40 Lmax=4096 (unsplit and longest first at the rule), and B=64 Hkv=8
L=4096 with every length equal (the cost where there is nothing to balance). Variants: `ours` (the
rule's launch), `tailE` for E in TAIL_ROWS, cuDNN and the read kernel over the whole padded cache
(decode_balance's helpers: every variant checked against the float64 reference first, CUPTI kernel
time, L2 flushed, shuffled rounds).

Measured at b146204 on an H100 (GPU-c7f97cab, fp16, us of kernel time, every variant
checked; E = 4 / 8 / 16 / 32 / 64 rows, x over ours in brackets):
  ragged B=64 Hkv=8 Lmax=4096: ours 162.0; 160.7 / 162.0 / 165.9 / 164.9 / 166.4 (0.99-1.03); cuDNN 341.6
  ragged B=48 Lmax=4096: ours 136.5; 135.6 / 136.1 / 144.3 / 133.6 / 142.9 (0.98-1.06)
  ragged B=40 Lmax=4096: ours 110.9; 107.8 / 110.7 / 107.6 / 108.7 / 107.9 (0.97-1.00)
  ragged B=64 Lmax=2048: ours 82.0; 84.4 / 85.4 / 87.6 / 88.4 / 91.4 (1.03-1.12)
  B=64 L=4096, lengths equal: ours 344.8; 344.1-345.4 (1.00); the read of the cache 333.1
No E gains more than 3% at any shape and every E loses up to 4-12% somewhere: the slots' imbalance is
not what holds the unsplit launch, or cutting the longest sequences costs what it would gain. Not kept:
the kernel and `_decode` lost `tail` in the next commit, so the probe runs from a checkout of b146204
(`git worktree add /tmp/tail-rows b146204`).

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_tail_rows.py
Writes $OUT/decode_tail_rows.csv and prints us and the ratio over `ours` per shape.
PROBE_DRYRUN=1 runs it in Triton's CPU interpreter on tiny shapes.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)

import torch  # noqa: E402

fd, study = db.fd, db.study
SHAPES = [(64, 8, 4096, True), (48, 8, 4096, True), (40, 8, 4096, True), (64, 8, 2048, True),
          (64, 8, 4096, False)]
TAIL_ROWS = (4, 8, 16, 32, 64)
if db.DRY:
    SHAPES, TAIL_ROWS = [(60, 2, 70, True), (60, 2, 70, False)], (2, 8)


def candidates(inputs, num_sms):
    q, k, v, lens = inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["seqlens"]   # lengths always passed
    b, hkv, n, _ = k.shape
    s = fd.planned_splits(b, hkv, n, db.D, 2, num_sms, db.HQ // hkv, False, True)
    cands = {"ours": lambda: (lambda: fd._decode(q, k, v, lens, None, None))}
    splits = {"ours": s}
    for rows in TAIL_ROWS:
        cands[f"tail{rows}"] = (lambda rows=rows: (lambda: fd._decode(q, k, v, lens, None, None, tail=rows)))
        splits[f"tail{rows}"] = f"1+{rows}r"
    cands["cudnn"] = lambda: study.impls()["sdpa_cudnn"](inputs)
    splits.update({name: "" for name in ("cudnn", "read2048", "read4096")})
    return cands, splits


def main():
    table, path = db.sweep_to_csv(SHAPES, "tail_rows", candidates, "decode_tail_rows", with_read=True)
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}; (S): splits, 1+Er: E extra rows; x: over ours; "
          "read: the whole cache")
    db.print_ratios(table, ["ours", *(f"tail{r}" for r in TAIL_ROWS), "cudnn", "read2048", "read4096"], "ours", 14)
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or torch.cuda.is_available()):
        sys.exit("decode_tail_rows needs a CUDA GPU")
    main()
