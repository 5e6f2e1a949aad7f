"""Probe: the paged decode's split count against the contiguous cache's, where paged is slowest.

The question. In the run at e0c1a10 the paged layout (64-token pages, shuffled pool) ran within 5%
of the contiguous cache at 85 of 90 shapes; the slowest were ragged B=64 Hkv=8 L=4096 (0.94x),
ragged B=4 Hkv=8 L=4096 bf16 (0.94x) and B=16 Hkv=8 L=131072 (0.94x: 1994.7 against 1875.7 us in
fp16). The study gives a paged call the lengths in ragged cases (and where the last page is
part-filled), and with lengths the plan cannot tell equal ones from ragged ones: on a filled grid
it splits every sequence into at least two chunks of at most RAGGED_CHUNK_TOKENS (choose_splits).
At ragged B=64 Hkv=8 L=4096 that is S=2 on a 2-stage ring, where the contiguous call with the same
lengths runs S=1 on a 4-stage ring (launch_shape); at ragged B=4 Hkv=8 L=4096 S=8 against 4. At
B=16 Hkv=8 L=131072 (equal lengths, no lengths passed) both run S=1 on a 4-stage ring, so there
the gap is the paged reads themselves (B=4 Hkv=32 L=131072 and B=64 Hkv=8 L=32768, the same bytes
and programs, ran 0.97x). Variants, each checked against the float64 reference first:
- contig: the study's `ours` (lengths only where ragged);
- paged: the paged call with the lengths (the study's `ours_paged` where ragged), the rule's S;
- paged_nolen: the paged call without lengths (the study's `ours_paged` where the lengths are
  equal and fill whole pages): the rule's S=1 on a filled grid;
- S=<n>: the paged call with lengths at a forced split count (1, 2, 4, 8, 16, 32 and 33, up to one
  per tile; 33 x 128 programs fill 8 waves of 4 an SM on 132 SMs).

Measured at c712a76 (GPU-454fd514), us, contig / paged (the rule's S) / best forced S: ragged B=64
Hkv=8 L=4096 116.4 (1) / 125.1 (2) / 124.7 (8), S=1 145.7; ragged B=4 Hkv=8 L=4096 14.6 (4) / 15.1
(8) / 14.8 (8 and 32); B=16 Hkv=8 L=131072 1870.8 / 1940.7 (32) / 1928.3 (16), paged_nolen 1931.0;
ragged B=16 Hkv=8 L=32768 252.3 / 249.8 (8); B=16 Hkv=8 L=1024 paged_nolen 19.0 against 19.1. No
split count brings the ragged B=64 shape within 5%: its unsplit paged launch differs from the
contiguous one in its ring (probes/decode_paged_ring.py).

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_paged_splits.py
Writes $OUT/decode_paged_splits.csv and prints us (S) per variant and its ratio over contig last
(decode_balance's helpers: fp16, Hq=32, D=128, CUPTI kernel time, L2 flushed).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402

fd, study = db.fd, db.study
PAGE = study.PAGE_SIZE        # the study's pages (ours_paged)
SHAPES = [(16, 8, 131072, False), (16, 8, 32768, False), (16, 8, 32768, True), (64, 8, 4096, True),
          (4, 8, 4096, True), (4, 8, 4096, False), (16, 8, 1024, False)]
FORCED = [1, 2, 4, 8, 16, 32, 33]
if db.DRY:
    SHAPES, FORCED = [(2, 2, 256, True), (2, 2, 256, False)], [1, 2, 4]
NAMES = ["contig", "paged", "paged_nolen"] + [f"S={s}" for s in FORCED]


def candidates(inputs, num_sms):
    q, k, v, lens, kp, vp, table, contig_lens = db.paged_operands(inputs)
    batch, heads_kv, cache_len, head_dim = k.shape
    group, size = q.shape[1] // heads_kv, k.element_size()

    def splits(paged, lengths):
        return fd.planned_splits(batch, heads_kv, cache_len, head_dim, size, num_sms, group, paged, lengths)

    cands = {"contig": lambda: (lambda: fd.decode_attention(q, k, v, contig_lens)),
             "paged": lambda: (lambda: fd.decode_attention(q, kp, vp, lens, block_table=table))}
    shown = {"contig": splits(False, contig_lens is not None), "paged": splits(True, True)}
    if not inputs["ragged"]:
        cands["paged_nolen"] = lambda: (lambda: fd.decode_attention(q, kp, vp, block_table=table))
        shown["paged_nolen"] = splits(True, False)
    for s in FORCED:
        if s <= fd.cdiv(cache_len, PAGE):
            cands[f"S={s}"] = (lambda s: lambda: (lambda: fd.decode_attention(q, kp, vp, lens, num_splits=s,
                                                                               block_table=table)))(s)
            shown[f"S={s}"] = s
    return cands, shown


def main():
    table, path = db.sweep_to_csv(SHAPES, "paged_splits", candidates, "decode_paged_splits")
    db.print_bad(path)
    db.print_ratios(table, NAMES, "contig", width=15)


if __name__ == "__main__":
    main()
