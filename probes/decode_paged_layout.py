"""Probe: where the paged decode's time over the contiguous cache goes, by pool layout and order.

The decode study's paged rows read a shuffled pool of 64-token pages laid out (num_pages,
page_size, Hkv, D), token-major (vLLM's and FlashInfer's "NHD"): a program, one KV head, reads
each token's D values (256 bytes in 16 bits) at a stride of Hkv * D elements, so a tile of 128
tokens is 128 pieces of 256 bytes; the other KV heads' programs read the rest of each piece's
DRAM page at other times. FlashInfer's "HND" and TensorRT-LLM's (num_pages, Hkv, page_size, D)
give each head a page of page_size * D contiguous values (16 KB), which the kernel takes as
`pool.transpose(1, 2)`. Variants, each checked against the float64 reference first:
- contig: the contiguous cache (the study's `ours`);
- nhd: the study's `ours_paged` (shuffled NHD pool);
- nhd_inorder: NHD with every sequence's pages in order (the table an identity);
- hnd: the same shuffled pages as nhd, HND layout;
- hnd_inorder: HND, pages in order.

Measured on an H200 after the run at 810be35 (L2 flushed by a read), us, contig / nhd / nhd_inorder /
hnd / hnd_inorder: B=16 Hkv=8 L=32768 473.4 / 494.0 / 487.4 / 493.0 / 487.8; B=4 Hkv=32 L=1024 19.4 /
24.0 / 23.9 / 23.6 / 23.6; B=16 Hkv=8 L=1024 19.7 / 22.9 / 22.9 / 23.4 / 23.3; B=4 Hkv=8 L=4096 20.4 /
23.9 / 23.6 / 24.2 / 24.2; ragged B=64 Hkv=8 L=4096 123.0 / 152.4 / 152.6 / 152.2 / 150.8; B=1 Hkv=8
L=32768 35.7 / 39.4 / 39.4 / 39.6 / 39.5; B=4 Hkv=32 L=4096 63.7 / 70.2 / 70.4 / 69.7 / 70.4. Neither
the layout nor the page order moves the paged time by more than 1.5%: the cost is the paged
kernel's (its plan and its lookups), not where the pages lie.

At c33931d (the tile loop in unsigned arithmetic, the table loaded unmasked; GPU-46f36d93), same
order: 472.8 / 486.8 / 483.8 / 486.1 / 485.3; 19.3 / 22.0 / 22.0 / 21.7 / 22.0; 19.6 / 21.1 / 21.0 /
21.3 / 21.4; 20.5 / 21.4 / 21.0 / 22.0 / 22.1; 117.1 / 125.1 / 123.6 / 124.5 / 124.1; 37.1 / 37.1 /
36.8 / 37.0 / 37.0; 64.1 / 67.2 / 67.2 / 67.7 / 67.9: nhd over contig 1.00-1.14x, against 1.04-1.24x.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_paged_layout.py
Writes $OUT/decode_paged_layout.csv and prints us per variant and its ratio over contig last
(decode_balance's helpers: fp16, Hq=32, D=128, CUPTI kernel time, L2 flushed).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402

import torch  # noqa: E402

fd, study = db.fd, db.study
PAGE = study.PAGE_SIZE        # the study's pages (ours_paged)
SHAPES = [(16, 8, 32768, False), (4, 32, 1024, False), (16, 8, 1024, False), (4, 8, 4096, False),
          (64, 8, 4096, True), (1, 8, 32768, False), (4, 32, 4096, False)]
if db.DRY:
    SHAPES = [(2, 2, 256, True), (1, 2, 128, False)]
NAMES = ["contig", "nhd", "nhd_inorder", "hnd", "hnd_inorder"]


def in_order(cache: torch.Tensor) -> torch.Tensor:
    """(B, Hkv, L, D) -> its NHD pool (B * L / PAGE, PAGE, Hkv, D), sequence b's page i at slot b * pages + i."""
    b, h, n, d = cache.shape
    return cache.transpose(1, 2).contiguous().view(b * n // PAGE, PAGE, h, d)


def hnd(pool: torch.Tensor) -> torch.Tensor:
    """An NHD pool's pages held HND (num_pages, Hkv, PAGE, D) in memory, returned as the NHD view the kernel takes."""
    return pool.transpose(1, 2).contiguous().transpose(1, 2)


def candidates(inputs, num_sms):
    q, k, v, lens, kp, vp, table, contig_lens = db.paged_operands(inputs)
    batch, _, cache_len, _ = k.shape
    assert cache_len % PAGE == 0
    pages = cache_len // PAGE
    identity = torch.arange(batch * pages, device=k.device, dtype=torch.int32).view(batch, pages)
    ko, vo = in_order(k), in_order(v)
    kh, vh = hnd(kp), hnd(vp)
    koh, voh = hnd(ko), hnd(vo)

    def paged(kk, vv, tt):
        return lambda: (lambda: fd.decode_attention(q, kk, vv, lens, block_table=tt))
    cands = {"contig": lambda: (lambda: fd.decode_attention(q, k, v, contig_lens)),
             "nhd": paged(kp, vp, table), "nhd_inorder": paged(ko, vo, identity),
             "hnd": paged(kh, vh, table), "hnd_inorder": paged(koh, voh, identity)}
    return cands, {name: "" for name in cands}


def main():
    table, path = db.sweep_to_csv(SHAPES, "paged_layout", candidates, "decode_paged_layout")
    db.print_bad(path)
    db.print_ratios(table, NAMES, "contig", width=16)


if __name__ == "__main__":
    main()
