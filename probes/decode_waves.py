"""Probe: split decode launches of many short chunks in several waves, against the one-wave rule, at
the KV reads of 256 MB and more that stay under 95% of the read ceiling.

The question. At 268 MB the read kernel that sets the ceiling's sized entry reads with tens of
thousands of short programs, 4.43-4.49 TB/s (96-97%), while a plain read shaped like decode's
launches, one long chunk a program, reached 94.5% at best (probes/decode_read_programs.py) and ours
reads 0.90-0.92; without its merge and counter ours is only 1-3% faster (probes/
decode_merge_tail.py). A launch of many short chunks reads like the former, and in several waves
the merges of the heads that finish early run under the loads of the heads still streaming; only
the last wave's merges are exposed. Forced split counts of two to 64 waves (each a multiple of the
one-wave count), on rings shallow enough for several programs an SM, show whether that pays.
Earlier measurements on older code had more splits slower (docs/kernels/decode.md:
S=128 at B=1 Hkv=8 L=131072 156.2 against 141.8 us at the one-wave S=16; decode_balance.py
DIAG=large: up to four programs an SM, no S beat the rule's).

Variants per shape: `ours` (decode_attention as shipped) and `S=<n> <BLOCK_N>x<warps>x<stages>` for
the forced counts in WAVES (times the one-wave count, chunks of at least one tile) on CONFIGS;
cuDNN and the read kernel over the same bytes beside them (decode_balance's helpers: every variant
checked against the float64 reference first, CUPTI kernel time, L2 flushed, shuffled rounds),
fp16, Hq=32, D=128. No new shape is started after PROBE_BUDGET_S seconds.

Measured (7f433b0, GPU-d0347937, fp16, kernel time, us): no multi-wave count beats the one-wave rule.
- B=1 Hkv=32 L=16384 (268 MB): ours (S=4) 65.1, cuDNN 66.1, the read 60.6; the best forced launch
  S=8 on 64x4x3 65.5 (1.007x ours's time), the other 17 1.02-1.75x.
- B=4 Hkv=8 L=16384 (268 MB): ours (S=4) 65.0, cuDNN 66.4, the read 60.6; best S=8 64x4x3 65.7
  (1.011x), the rest 1.03-1.86x.
- B=1 Hkv=8 L=131072 (537 MB): ours (S=16) 124.1, cuDNN 126.3, the read 117.9; best S=32 64x4x3
  127.0 (1.023x), the rest 1.05-2.16x.
- B=16 Hkv=8 L=4096 (268 MB, unsplit): ours 64.0, cuDNN 64.3, the read 59.2; best S=2 64x4x3 65.2
  (1.019x), the rest 1.03-1.64x.
More waves of shorter chunks only add merges and per-chunk start-up; the merges they could hide
are 1-3% of the launch (decode_merge_tail.py), less than what the extra chunks cost. Ours reads at
0.93-0.95x the plain read's speed at all four, as in decode_merge_tail.py.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_waves.py
Writes $OUT/decode_waves.csv and prints us and the ratio over `ours` per shape.
PROBE_DRYRUN=1 runs it in Triton's CPU interpreter on tiny shapes.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)
from decode_ragged_splits import _candidates, _operands  # noqa: E402

fd = db.fd
SHAPES = [(1, 32, 16384, False), (4, 8, 16384, False), (1, 8, 131072, False), (16, 8, 4096, False)]
WAVES = (2, 4, 8, 16, 32, 64)            # forced S = this many times the one-wave count (B * Hkv < SMs)
CONFIGS = ((64, 4, 2), (64, 4, 3), (32, 4, 2))   # (BLOCK_N, warps, stages): 1-2 tiles in shared memory
if db.DRY:
    SHAPES, WAVES, CONFIGS = [(1, 2, 600, False)], (2,), ((16, 2, 2),)


def candidates(inputs, num_sms):
    _, k, _, _ = _operands(inputs)
    programs, cache_len = k.shape[0] * k.shape[1], k.shape[2]
    wave = max(1, num_sms // programs)            # the one-wave count (an unsplit launch that fills: 1)
    variants = {}
    for n in WAVES:
        for bn, w, st in CONFIGS:
            s = min(n * wave, fd.cdiv(cache_len, bn))
            variants.setdefault(f"S={s} {bn}x{w}x{st}", (s, (bn, w, st), s))
    return _candidates(inputs, num_sms, variants)


def main():
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}; (S): splits; x: over ours; read: the same bytes")
    table, path = db.sweep_to_csv(SHAPES, "waves", candidates, "decode_waves", with_read=True)
    for (b, h, n, _), res, sp in table:          # per shape, every variant fastest first, over ours
        ours = res.get("ours")
        print(f"B={b} Hkv={h} L={n} (ours: S={sp.get('ours')})")
        for name, us in sorted(res.items(), key=lambda item: item[1]):
            print(f"  {name:>22} {us:10.1f}" + (f"  {us / ours:.3f}" if ours else ""))
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or db.torch.cuda.is_available()):
        sys.exit("decode_waves needs a CUDA GPU")
    main()
