"""Probe: unsplit decode on a filled grid, the ring depth and tile that keep every program resident.

In the da7f2b4 run the unsplit 268 MB shapes (B=64 Hkv=8 and B=16 Hkv=32 at L=1024, 512 programs,
3.9 an SM on 132 SMs) read at 87-88% of the read ceiling under FULL_GRID_CONFIG (128-token tiles,
4 warps, 2 stages: 64 KB of K and V in shared memory a program, three programs an SM, so 396 of the
512 run in a first wave and 116 in a second), while the paged call at the same shapes (64-token
tiles, 2 stages, 32 KB a program, maxnreg for four programs an SM: all 512 resident) read at 90%.
This probe times, at those shapes and at their neighbours on a filled grid, the shipped call
against forced (BLOCK_N, warps, stages[, maxnreg]) on the contiguous cache, the study's paged call,
cuDNN, and rooflab.ceilings' read kernel over the same bytes; ragged B=64 Hkv=8 Lmax=4096 (85% in
the run, unsplit with lengths under 64/4/4: two programs an SM) with its lengths passed.

In the 190e707 run the 268 MB launches of one program an SM (B=16 Hkv=8 and B=4 Hkv=32 at L=4096
unsplit, B=1 Hkv=32 and B=4 Hkv=8 at L=16384 in S=4 splits: 128 programs on 132 SMs, 64/4/4) read
at 90-92% of the read ceiling; one program an SM holds three 32 KB tiles in flight. DIAG=deep times
them at rings of 4-7 stages and wider tiles (the split shapes at the rule's S).

In the e1fb521 run, on another H200 (read ceiling 4.69 TB/s against 4.60), the 512-program
launches (B=16 Hkv=32 and B=64 Hkv=8, 64/4/2, four programs an SM) ran 0.972-0.979x cuDNN at
L >= 16384 (B=64 Hkv=8 L=32768 fp16 1.894 ms against 1.844): ours read 96.4-97.3% of the ceiling,
cuDNN 98.5-99.7%. Two readings: (1) 512 programs fill 528 slots of four an SM (116 SMs hold four,
16 three), and if a program's rate were set by its SM the launch would read at most 97%; but the
128-program launches (one an SM, 64/4/4, 4 SMs idle) read 99.9% at B=16 Hkv=8 L=131072, so an SM's
share is not the limit there. (2) The 2-stage ring of four programs an SM keeps less in flight than
fewer, deeper programs: B=64 Hkv=32 (2048 programs, 128/4/2, two an SM, 8 waves) read 98.0-98.6%
at L >= 4096. DIAG=tail times those shapes at 128/4/2 (two an SM, two waves) and 64/4/4 (two an
SM) beside the shipped 64/4/2, and the shipped tiling at forced splits: S=2 and 4 keep the slot
quantisation (1024 / 1056, 2048 / 2112), S=33 removes it (16896 programs, 32 rounds of 528).
Measured at 7ecbd41 (H200 GPU-5dd7d788, fp16, kernel time over the shipped 64/4/2, which took 236.5 us
at L=4096 to 1855.0 at B=64 Hkv=8 L=32768): cuDNN 0.994-1.002, 64/4/2 at 128 registers 0.997-1.001,
128/4/2 0.993-1.002, 64/4/4 0.999-1.012, S=2 1.002-1.014, S=4 0.997-1.025, S=33 1.010-1.110, the paged
call 1.005-1.020, the read kernel over the same bytes 0.974-0.993. No tiling or split beats the
shipped one; on this GPU cuDNN ties it at every shape, and in the a188f76 run (GPU-79b30d5e) the
same launches read 1.009-1.019x cuDNN's speed: the e1fb521 losses were that GPU's cuDNN, not ours.

DIAG=onesm times the shipped kernel at filled grids with 128-token tiles on 8 warps (one or two
programs an SM) against the 64/4/2 ring at 128 registers, after probes/decode_tma.py found its own
minimal kernel at 128x8x3 as fast as cuDNN there. Measured at 1ef9476 (H200 GPU-7160a124, fp16, us,
kernel time; the plan then was the 64/4/2 ring at 512 programs): B=64 Hkv=8 L=32768 ours 1937.0,
cuDNN 1885.8, 128/8/3 1897.0, 128/8/2 1887.5, 128/8/4 1928.7, 64/8/3 2454.3; B=16 Hkv=32 L=32768
1935.3, 1883.2, 1895.4, 1883.6; B=64 Hkv=8 L=4096 244.9, 241.3, 243.3, 242.5; B=16 Hkv=32 L=4096
244.8, 240.0, 242.5, 241.9; at L=1024 (both) 64.7-64.8, cuDNN 65.4-65.7, 128/8/2 65.7-66.0, 128/8/3
69.3-69.9; B=64 Hkv=32 L=4096 (2048 programs, FULL_GRID_CONFIG) 951.2, 128/8/2 952.7; B=32 Hkv=8
L=4096 (256 programs, 64/4/4) 127.0, cuDNN 125.2, 128/8/3 123.8, 128/8/2 125.8; B=16 Hkv=8 L=4096
(128 programs) 64.1, 128/8/3 64.9, 128/8/2 82.6. Kept as DEEP_FILLED_CONFIG (128/8/2) for resident
grids of more than two programs an SM over at least 4096 tokens. DIAG=deep_filled times that rule
(`ours`) against the 64/4/2 ring it replaced, and at 256 programs (two an SM less 8, outside the
rule) 128/8/2 and 128/8/3 against the shipped 64/4/4 ring.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_fullgrid_ring.py
Writes $OUT/decode_fullgrid_ring.csv and prints us (S) and the ratio over `ours` last
(decode_balance's helpers: every variant checked against the float64 reference, CUPTI kernel time,
L2 flushed). PROBE_DRYRUN=1 runs it in Triton's CPU interpreter on tiny shapes.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)

import torch  # noqa: E402

fd, study = db.fd, db.study
SHAPES = [(64, 8, 1024, False), (16, 32, 1024, False), (64, 8, 4096, True), (64, 8, 4096, False),
          (64, 32, 1024, False), (32, 8, 1024, False), (16, 8, 4096, False)]
CONFIGS = [(64, 4, 2, None), (64, 4, 2, 128), (64, 4, 3, None), (32, 4, 3, None), (64, 8, 2, None),
           (128, 4, 2, None), (64, 4, 4, None)]    # (BLOCK_N, warps, stages, maxnreg)
if db.DIAG == "deep":   # one program an SM (128 of them, unsplit or one-wave split): rings deeper than 4
    SHAPES = [(16, 8, 4096, False), (4, 32, 4096, False), (16, 8, 16384, False), (1, 32, 16384, False),
              (4, 8, 16384, False), (16, 8, 1024, False)]
    CONFIGS = [(64, 4, 4, None), (64, 4, 5, None), (64, 4, 6, None), (64, 4, 7, None), (64, 8, 6, None),
               (128, 4, 3, None), (128, 8, 3, None), (128, 8, 4, None), (32, 4, 8, None)]
SPLITS = []             # DIAG=tail: forced split counts at the shipped resident tiling
if db.DIAG == "tail":   # 512 programs at four an SM: quantised over 528 slots
    SHAPES = [(16, 32, 16384, False), (64, 8, 16384, False), (64, 8, 32768, False), (16, 32, 4096, False),
              (64, 8, 4096, False)]
    CONFIGS, SPLITS = [(64, 4, 2, 128), (128, 4, 2, None), (64, 4, 4, None)], [2, 4, 33]
if db.DIAG == "onesm":   # filled grids at one deep program an SM (128-token tiles, 8 warps) against the shipped tiling
    SHAPES = [(64, 8, 32768, False), (16, 32, 32768, False), (64, 8, 4096, False), (16, 32, 4096, False),
              (64, 8, 1024, False), (16, 32, 1024, False), (64, 32, 4096, False), (32, 8, 4096, False),
              (16, 8, 4096, False), (64, 8, 4096, True)]
    CONFIGS = [(128, 8, 3, None), (128, 8, 2, None), (128, 8, 4, None), (64, 8, 3, None), (64, 4, 2, 128)]
if db.DIAG == "deep_filled":   # the shipped DEEP_FILLED_CONFIG rule against the 64/4/2 ring it replaced
    SHAPES = [(64, 8, 32768, False), (16, 32, 32768, False), (64, 8, 16384, False), (16, 32, 16384, False),
              (64, 8, 4096, False), (16, 32, 4096, False), (64, 8, 1024, False),
              (32, 8, 4096, False), (32, 8, 16384, False), (8, 32, 16384, False)]   # 256 programs: outside the rule
    CONFIGS = [(64, 4, 2, 128), (128, 8, 2, None), (128, 8, 3, None)]
if db.DRY:
    SHAPES, CONFIGS = [(2, 2, 200, False), (2, 2, 200, True)], [(16, 2, 2, None)]
    SPLITS = [2] if SPLITS else []


def name_of(cfg) -> str:
    bn, w, st, regs = cfg
    return f"c{bn}x{w}x{st}" + (f"r{regs}" if regs else "")


def candidates(inputs, num_sms):
    q, k, v, lens = inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["seqlens"]
    ragged = inputs["ragged"]
    passed = lens if ragged else None                 # the study passes lengths only where they differ
    impls = study.impls()
    cands = {"ours": lambda: impls["ours"](inputs), "paged": lambda: impls["ours_paged"](inputs),
             "cudnn": lambda: impls["sdpa_cudnn"](inputs)}
    splits = {"ours": fd.planned_splits(k.shape[0], k.shape[1], k.shape[2], db.D, 2, num_sms,
                                        db.HQ // k.shape[1], False, ragged)}
    forced = splits["ours"] if splits["ours"] > 1 else None     # the rule's S, kept at every tiling
    for cfg in CONFIGS:
        bn, w, st, regs = cfg
        cands[name_of(cfg)] = (lambda bn=bn, w=w, st=st, regs=regs:
                               (lambda: fd._decode(q, k, v, passed, None, forced, None, bn, w, st, None, regs)))
        splits[name_of(cfg)] = splits["ours"]
    for n in SPLITS:      # DIAG=tail: the first config at forced splits
        bn, w, st, regs = CONFIGS[0]
        cands[f"s{n}"] = (lambda n=n: (lambda: fd._decode(q, k, v, passed, None, n, None, bn, w, st, None, regs)))
        splits[f"s{n}"] = n
    splits.update({name: "" for name in ("paged", "cudnn", "read2048", "read4096")})
    return cands, splits


def main():
    table, path = db.sweep_to_csv(SHAPES, "fullgrid_ring", candidates, "decode_fullgrid_ring", with_read=True)
    db.kernel_rows(os.path.join(db.OUT, "decode_fullgrid_ring_kernels.csv"))
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}; (S): splits; x: over ours")
    db.print_ratios(table, ["ours", "paged", "cudnn", *map(name_of, CONFIGS), *(f"s{n}" for n in SPLITS),
                            "read2048", "read4096"], "ours", 16)
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or torch.cuda.is_available()):
        sys.exit("decode_fullgrid_ring needs a CUDA GPU")
    main()
