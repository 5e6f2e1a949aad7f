"""Probe: ragged decode launches at one program an SM, where longest-first scheduling can balance.

The question. Ragged B=64 Hkv=8 Lmax=4096 is the lowest share of the read ceiling in the 24a2def run
(88.6%; 117.3 us for 477 MB). Its launch is unsplit, longest first (longest_first), on the 64/4/4
ring: three K+V tiles in shared memory, two programs an SM, 264 slots. The mean slot load is then
about 3530 tokens and the longest sequence 4096, so the slots that start on the longest sequences
end last, each at a rate bounded by its own loads in flight. At one program an SM (132 slots: a ring
of four or five tiles, or 128-token tiles) the mean slot load is about 7060 tokens and longest
first can even them out, if one program an SM streams as fast as two. Fewer stages (more slots) were
slower (decode_ragged_splits: 3 and 2 stages 126.8 and 137.1 us). Ragged B=16 Hkv=8 Lmax=32768
(0.91; split 8, chunks dealt out by length) takes the same tilings at the rule's split count.

Variants per shape: `ours` (decode_attention as shipped), then the rule's split count (and its
dealing by length) on other tiles, warps and stages: 64x4x5 and 64x4x6 (4 and 5 tiles in flight,
one program an SM), 128x8x3 (LONG_CHUNK_CONFIG), 128x4x3 and 128x8x2; cuDNN and the read kernel over
the whole padded cache beside them (decode_balance's helpers: every variant checked against the
float64 reference first, CUPTI kernel time, L2 flushed, shuffled rounds), fp16, Hq=32, D=128.

Measured at 6b22037 on GPU-610f8862 (fp16, us of kernel time, every variant checked; over ours):
  ragged B=64 Hkv=8 Lmax=4096 (S=1): ours 114.5; 64x4x5 117.4 (1.02), 64x4x6 118.8 (1.04), 128x8x3
    117.0 (1.02), 128x4x3 115.7 (1.01), 128x8x2 113.9 (0.99); cuDNN 236.7; the read of the whole
    padded cache 230.5
  ragged B=16 Hkv=8 Lmax=32768 (S=8, dealt by length): ours 247.8; 64x4x5 269.5 (1.09), 64x4x6 288.0
    (1.16), 128x8x3 262.7 (1.06), 128x4x3 268.1 (1.08), 128x8x2 249.5 (1.01); cuDNN 468.8
One program an SM is slower at both shapes: its slots do not stream as fast as two programs an SM,
and what longest first gains in balance the launch loses in bytes in flight. 128x8x2 (two 64 KB
tiles, one program an SM but a shallower ring) ties the shipped launch (0.99-1.01x). Not kept.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_ragged_fill.py
Writes $OUT/decode_ragged_fill.csv and prints us and the ratio over `ours` per shape.
PROBE_DRYRUN=1 runs it in Triton's CPU interpreter on tiny shapes.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)
from decode_ragged_splits import _candidates, _operands  # noqa: E402

fd = db.fd
SHAPES = [(64, 8, 4096, True), (16, 8, 32768, True)]
CONFIGS = {"64x4x5": (64, 4, 5), "64x4x6": (64, 4, 6), "128x8x3": (128, 8, 3), "128x4x3": (128, 4, 3),
           "128x8x2": (128, 8, 2)}
if db.DRY:
    SHAPES, CONFIGS = [(6, 2, 70, True)], {"16x2x3": (16, 2, 3)}


def candidates(inputs, num_sms):
    _, k, _, passed = _operands(inputs)
    b, hkv, n = k.shape[:3]
    return _candidates(inputs, num_sms, {         # the rule's S (not forced: its dealing by length stays)
        name: (None, tiles, fd.launch_shape(b, hkv, db.HQ // hkv, n, db.D, 2, num_sms, False, passed is not None,
                                            None, *tiles)[0])
        for name, tiles in CONFIGS.items()})


def main():
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}; (S): splits; x: over ours; read: the whole cache")
    table, path = db.sweep_to_csv(SHAPES, "fill", candidates, "decode_ragged_fill", with_read=True)
    db.print_ratios(table, ["ours", *CONFIGS, "cudnn", "read2048", "read4096"], "ours", 13)
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or db.torch.cuda.is_available()):
        sys.exit("decode_ragged_fill needs a CUDA GPU")
    main()
