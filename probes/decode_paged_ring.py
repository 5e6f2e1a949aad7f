"""Probe: the paged decode's launch (splits, tiles, warps, ring depth) against the contiguous one's,
at the study's ragged shapes.

The question. probes/decode_paged_splits.py (GPU-454fd514, c712a76, fp16, kernel time) found the
split count is not what holds the paged call back at ragged B=64 Hkv=8 L=4096: contiguous 116.4 us
(S=1), paged 125.1 (the rule's S=2), paged at S=1 145.7, at S=8 124.7; no forced S came within 5%.
The two S=1 launches differ in their ring: the contiguous one takes launch_config's 64 x 4 x 4
(three tiles in flight, about two programs an SM resident, the rest a second wave, longest
sequences first), the paged one resident_stages' ring for all 512 programs at once (4 an SM, 2
stages) and its register cap. This probe forces the paged call's launch to each candidate, the
rule's S and forced S, with the chunks dealt out by length wherever S >= 2 (spread, as the rule does):
- contig: the study's `ours` (lengths where ragged);
- paged: the study's `ours_paged` (the rule);
- S<n>: paged, n splits, the rule's tiles and ring for that S (resident_stages, register cap);
- S<n>/<N>.<w>.<s>: paged, n splits, BLOCK_N x warps x stages forced (no register cap).
DIAG=equal: shapes of equal lengths (the study passes none there), passed to the paged calls only.
DIAG=deep: equal lengths passed to no call, unsplit launches of one or two programs an SM, at rings
deeper than resident_stages' (at most 4 stages).
DIAG=below: equal lengths passed to no call, below the fill: split counts and wider tiles.

Measured (H200, fp16, kernel time, us; paged over contiguous):
- af3c1d9, GPU-5bf14c42, ragged: at B=64 Hkv=8 L=4096 contiguous S=1 114.4, paged S=1 at 64/4/4 115.4
  and at 128/8/2 115.1, at the rule's ring (2 stages, 128 registers) 144.5, the rule's S=2 123.1;
  B=4 Hkv=8 L=4096 S=4 14.2, the rule's S=8 15.1 (contiguous 14.5); the other four shapes 0.98-1.01x
  at the rule's S. Hence paged_unsplit_filled and, below the fill with lengths, the one-wave count.
- f86d57c (with that rule), GPU-ec1be0ff: ragged, the rule 0.93-1.01x at all six shapes (B=64 Hkv=8
  L=4096 115.6 against 115.0). DIAG=equal (lengths passed to the paged call only): 1.02-1.05x at
  B=64, 16 and 4 Hkv=8 L=4096, 1.09x at B=64 Hkv=8 L=1024 (68.8 against 63.1, where the contiguous
  call takes its 2-stage resident ring without lengths). DIAG=deep, unsplit, no lengths: the rule
  (64/4/4 at 255 registers) 1.01-1.04x, 128/8/3 0.99-1.02x (B=16 Hkv=8 L=131072 1845.5 against
  1900.4, contiguous 1830.1), 128/4/3 1.00-1.03x, 128/8/4 1.01-1.04x, 64/4/5 and 64/4/6 1.03-1.06x.
  Hence paged_long_unsplit (LONG_CHUNK_CONFIG).
- 58ccb2c (with both), GPU-f4c170fb: DIAG=deep, the rule 0.99-1.01x at its eight shapes (B=16 Hkv=8
  L=131072 1848.7 against 1829.8; L=8192 121.0 against 120.0); ragged 0.92-1.01x.
- 83aaafd, GPU-cb9662a3, DIAG=below (no lengths, below the fill; the rule S=8 at B=4 Hkv=8 and
  B=1 Hkv=32, 33 at B=1 Hkv=8): the rule 1.03-1.05x; S=16 1.01-1.03x, S=4 1.01-1.05x (3.5x at B=1
  Hkv=8 L=131072), 128/8/3 and 128/8/2 tiles 1.03-1.14x at S=4-16. Within 1-2% of the rule, and the
  other way round when the rule was set (PAGED_BELOW_FILL_PER_SM): not changed.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_paged_ring.py
Writes $OUT/decode_paged_ring.csv and prints us (S) per variant and its ratio over contig last
(decode_balance's helpers: fp16, Hq=32, D=128, CUPTI kernel time, L2 flushed).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402

fd, study = db.fd, db.study
PAGE = study.PAGE_SIZE        # the study's pages (ours_paged)
SHAPES = [(64, 8, 4096, True), (16, 8, 4096, True), (4, 8, 4096, True), (64, 8, 32768, True),
          (16, 8, 32768, True), (4, 8, 32768, True)]
DIAG = os.environ.get("DIAG", "")
if DIAG == "equal":     # the same lengths all equal, passed to the paged call only
    SHAPES = [(64, 8, 4096, False), (16, 8, 4096, False), (4, 8, 4096, False), (64, 8, 1024, False)]
# (S, (BLOCK_N, warps, stages) or None for the rule's at that S)
VARIANTS = [(1, None), (1, (64, 4, 4)), (1, (64, 4, 3)), (1, (128, 8, 2)), (1, (128, 8, 3)),
            (2, None), (2, (64, 4, 4)), (2, (64, 4, 3)), (4, None), (4, (64, 4, 4)), (8, None), (8, (64, 4, 4))]
if DIAG == "deep":      # equal lengths, none passed, one program an SM or two: rings deeper than resident_stages' 4
    SHAPES = [(16, 8, 131072, False), (16, 8, 32768, False), (4, 32, 32768, False), (32, 8, 32768, False),
              (16, 8, 16384, False), (4, 32, 16384, False), (4, 32, 131072, False), (16, 8, 8192, False)]
    VARIANTS = [(1, None), (1, (64, 4, 5)), (1, (64, 4, 6)), (1, (128, 8, 3)), (1, (128, 4, 3)), (1, (128, 8, 4)),
                (1, (32, 4, 8))]
if DIAG == "below":     # equal lengths, none passed, below the fill: split launches (PAGED_BELOW_FILL_PER_SM)
    SHAPES = [(4, 8, 16384, False), (4, 8, 32768, False), (4, 8, 131072, False), (1, 32, 131072, False),
              (1, 8, 131072, False), (1, 32, 16384, False)]
    VARIANTS = [(4, None), (8, None), (16, None), (4, (128, 8, 3)), (8, (128, 8, 3)), (8, (128, 8, 2)),
                (16, (128, 8, 2)), (4, (64, 4, 4))]
if db.DRY:
    SHAPES = [(2, 2, 256, DIAG not in ("deep", "below"))]
    VARIANTS = [(1, None), (1, (64, 4, 4)), (2, None), (2, (64, 4, 3))]


def name_of(splits, cfg) -> str:
    return f"S{splits}" + ("" if cfg is None else "/" + ".".join(map(str, cfg)))


NAMES = ["contig", "paged"] + [name_of(s, c) for s, c in VARIANTS]


def candidates(inputs, num_sms):
    q, k, v, lens, kp, vp, table, contig_lens = db.paged_operands(inputs)
    batch, heads_kv, cache_len, head_dim = k.shape
    if DIAG in ("deep", "below"):
        lens = None
    group, size = q.shape[1] // heads_kv, k.element_size()
    cands = {"contig": lambda: (lambda: fd.decode_attention(q, k, v, contig_lens)),
             "paged": lambda: (lambda: fd.decode_attention(q, kp, vp, lens, block_table=table))}
    shown = {"contig": fd.planned_splits(batch, heads_kv, cache_len, head_dim, size, num_sms, group, False,
                                         contig_lens is not None),
             "paged": fd.planned_splits(batch, heads_kv, cache_len, head_dim, size, num_sms, group, True,
                                        lens is not None)}
    for splits, cfg in VARIANTS:
        if splits > fd.cdiv(cache_len, PAGE):
            continue
        block_n, warps, stages = cfg or (None, None, None)
        name = name_of(splits, cfg)
        cands[name] = (lambda s, n, w, st: lambda: (lambda: fd._decode(
            q, kp, vp, lens, None, s, table, block_n=n, num_warps=w, num_stages=st, spread=True)))(
                splits, block_n, warps, stages)
        shown[name] = splits
    return cands, shown


def main():
    table, path = db.sweep_to_csv(SHAPES, "paged_ring", candidates, "decode_paged_ring")
    db.print_bad(path)
    db.print_ratios(table, NAMES, "contig", width=16)


if __name__ == "__main__":
    main()
