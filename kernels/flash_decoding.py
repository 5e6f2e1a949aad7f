"""Split-KV decode attention (flash-decoding): one query token per sequence against a KV cache.

    out[b, h] = softmax(q[b, h] . K[b, h // G, :n_b]^T * sm_scale) @ V[b, h // G, :n_b]

q is (B, Hq, D), the caches are (B, Hkv, Lmax, D) with any strides, n_b = seqlens[b] and
G = Hq // Hkv query heads share each KV head (grouped-query attention).

Decoding reads the whole valid cache once and does almost no arithmetic per byte, so the
only question is how fast the cache streams from memory. One kernel, one program per
(split, batch, kv head):

1. Each program reads a contiguous chunk of its sequence's K and V once, in BLOCK_N-token
   tiles, for its whole query group at once: the G query heads are the M dimension of a small
   tl.dot (padded to 16), so a KV head is never read twice. An online softmax keeps a running
   max and sum. Programs whose chunk starts past the sequence's length exit at once.
2. With S > 1 splits, each program writes its normalised partial output (fp32) and its
   log-sum-exp (base 2), then bumps a per-(batch, kv head) counter. The program that arrives
   last merges the splits holding keys, weighting each by exp2(lse_s - max lse), into the
   output in the input dtype, for all G query rows of its KV head at once (_merge_group:
   (G, splits, D) partials, MERGE_TILE values a step). Merging in the same launch saves a
   second kernel launch (host time that is not hidden when the cache is small) and the idle
   gap between kernels.
   With S = 1 the program normalises and writes the output directly, and there is no counter.

`decode_attention_nosplit` always uses S = 1 (one program per (batch, kv head)).

Number of splits (`launch_shape`): `choose_splits`, the one-wave rule for contiguous caches and
its paged rule for paged caches (both below). The one-wave rule: the B * Hkv programs of an
unsplit launch fill the GPU once there are NO_SPLIT_FILL (0.9) times as many as SMs (calls that
pass seqlens, whose lengths may differ, want more even then: paged caches about
PAGED_PROGRAMS_PER_SM programs per SM and at least PAGED_FILLED_MIN_SPLITS splits up to
PAGED_UNSPLIT_PER_SM programs an SM, contiguous ones (and paged ones past that) up to
RAGGED_FILLED_SPLITS splits, both chunks of at most RAGGED_CHUNK_TOKENS; see choose_splits).
Below that, a contiguous cache is cut into S = SMs // (B * Hkv) chunks of a whole number of
BLOCK_N tiles (at most one per tile): one wave of programs, each streaming its chunk. Measured on
the H200 (bf16, D=128, Hq=32, kernel time from CUPTI with the L2 flushed, BLOCK_N=64), one wave is the fastest split or within 2% of it at every shape tried, and more
programs only add merge work and tail: B=1 Hkv=8 L=1024 S=16 9.1 us (S=2, the previous rule's
choice, 14.6; cuDNN 7.6), L=4096 S=16 14.1 (S=8 16.1; cuDNN 12.8), L=16384 S=16 29.9 (S=32
31.9; cuDNN 28.4), L=131072 S=16 141.8 (S=128 156.2; cuDNN 134.5); B=4 Hkv=8 L=4096 S=4 29.7
(S=8 30.5), L=32768 S=4 141.5 (S=8 140.0, S=32 148.6); B=1 Hkv=32 L=1024 S=4 11.1 (S=2 12.5,
S=8 11.2); B=16 Hkv=8 L=4096 S=1 72.8 (S=2 79.0). BLOCK_N 16 and 32 were slower at every S. A
paged cache below that fill without lengths (with them B >= 2 takes the one-wave count, the chunks
dealt out by length) wants more programs in flight (each tile's page lookup is a
dependent load): S is the larger of the one-wave count and PAGED_BELOW_FILL_PER_SM programs per
SM (four before the page indices came a tile ahead and the ring deepened; choose_splits), with no
chunk shorter than MIN_CHUNK_BLOCKS tiles unless the one-wave count asks for it,
and never more programs than PAGED_PROGRAMS_PER_SM * SMs (a program past a whole number of
waves costs a wave: B=1 Hkv=32 L=131072 S=16 497.3 us, S=17 699.0, S=32 500.8; B=4 Hkv=8
L=32768 S=16 143.1, S=17 171.2, contiguous 142.1; B=1 Hkv=32 L=4096 S=16 28.5, S=17 29.2).
Since the page indices come a tile ahead (below), one sequence (B = 1) takes one wave again, raised
only for chunks of at most PAGED_CHUNK_TOKENS (choose_splits). The measurements that set the paged
rule, before that (per-tile lookups), at page 64 (same timing): B=1 Hkv=8 L=131072 S=16 (one wave)
267.1 us, S=32 168.4, S=64 142.6 (contiguous 141.5), S=128 (the earlier rule, 8 waves) 152.0; L=4096
S=16 18.1, S=32 18.7, S=64 21.2, S=8 (earlier) 25.2; L=1024 S=16 10.3 (earlier S=2 23.4); B=1 Hkv=32
L=1024 S=8 13.1 (S=4 15.3, earlier S=2 22.6); B=4 Hkv=8 L=1024 S=8 16.7 (S=4 17.4, S=16 18.4). One
page-index load per tile (tiles that lie in one page, read one tile ahead) was slower than the
per-token lookup at every shape tried (B=1 Hkv=8 L=131072 page 64: 160.6 against 144.6 us at
page 16). S depends on the cache shape (B, Hkv, Lmax) and on whether seqlens and a block table
are passed, never on their values, so the host never waits for the GPU.

Contiguous caches: the one-wave rule's S over balanced chunks (split s reads tiles
floor(s * n / S) .. floor((s + 1) * n / S) - 1 of n, so S need not divide n), with the grouped
merge. Measured on the H200 (probes/decode_balance.py, fp16, Hq=32, D=128, CUPTI kernel time,
L2 flushed) against the previous plan (the same S, the last program merging its G rows one
after another, each a dependent round of L2 loads), over the decode grid's shapes, us
(previous -> now, cuDNN): B=1 Hkv=8 L=1024 9.1 -> 6.3 (S=16), 7.5; L=16384 29.6 -> 26.7, 28.4;
L=65536 77.2 -> 73.4, 75.2; B=4 Hkv=8 L=1024 14.3 -> 11.4 (S=4), 12.5; L=16384 77.2 -> 73.4,
75.2; B=16 Hkv=8 L=1024 25.3 -> 25.4 (S=1), 25.2; B=16 Hkv=32 L=4096 247.2 -> 247.2, 245.9;
B=64 Hkv=32 L=1024 249.1 -> 249.0, 245.3. A wave-filling rule (S so that B * Hkv * S fills whole
waves of SMs, where B * Hkv does not divide the SM count well) was measured and not kept: same
probe, B=3 Hkv=8 L=16384 S=11 61.0 us against the one-wave S=5 60.6; B=25 Hkv=8 L=4096 S=5 114.9
against S=1 112.2 (cuDNN 109.4); on the decode grid's shapes it chose the one-wave S.

Paged caches: the same kernel and grouped merge with choose_splits' paged S (at the measured
shapes the same balanced and equal chunks: S=64, 16 and 4 below). Same probe, page 64, lengths
passed, us (row-by-row merge -> grouped merge): B=1 Hkv=8 L=16384 36.8 -> 31.5 (S=64); B=4
Hkv=8 L=16384 80.9 -> 76.5 (S=16); B=16 Hkv=8 L=1024 33.5 -> 28.3 (S=4; contiguous without
lengths 25.3).

Page indices a tile ahead (PAGED_TABLE_AHEAD): each program loads its first tile's page
indices before its length (the two loads overlap instead of following each other) and, in the
tile loop, the next tile's indices with the current tile's K and V. The K and V loads then no
longer wait on a load of the same iteration, and Triton 3.6 pipelines them num_stages - 1 tiles
deep on sm_90 (the per-tile lookup: one tile, 39 KB of shared memory; ahead: 38.9 KB at 2 stages,
71.7 KB at 3, 104.4 KB at 4). A deep ring caps the programs an SM holds, so the stage count
follows the launch (`resident_stages`): the deepest ring at which all programs are resident. The q
tile is loaded before the length too, on every path. probes/decode_paged_ahead.py (fp16, Hq=32,
D=128, 64-token pages, lengths passed, paged S, CUPTI kernel time, L2 flushed), us (x contiguous
without lengths unless ragged), per-tile lookup -> ahead at 4 / 3 / 2 stages: B=1 Hkv=8 L=1024
(S=16) 8.2 (1.19) -> 7.6 / 7.5 / 7.5 (contiguous 6.8); L=4096 (S=32) 15.0 (1.31) -> 13.5 / 13.5 /
14.4 (11.5); L=16384 (S=64) 33.1 (1.23) -> 36.8 / 35.9 / 31.7 (26.9); L=131072 139.5 -> 145.1 / 165.4
/ 137.7 (133.3); B=1 Hkv=32 L=1024 (S=8) 13.1 (1.18) -> 11.4 / 11.4 / 12.3 (11.1); B=4 Hkv=8 L=1024
12.9 -> 11.6 / 11.5 / 12.3 (10.9); L=16384 77.2 -> 81.6 / 89.0 / 75.8 (73.1); B=16 Hkv=8 L=4096
76.1 -> 81.6 / 88.5 / 74.6 (72.2; 77.4 with lengths); ragged B=16 Hkv=8 Lmax=4096 55.3 -> 46.5 /
45.7 / 52.4 (42.4), B=64 163.3 -> 139.9 / 144.6 / 159.8 (129.8). The rule's stages are the faster
of the two at every shape but the ragged ones, whose programs past a short sequence's end exit at
once, so fewer are resident than launched (the plan does not read the lengths). Registers: at
G = 1 the loop with the indices ahead compiles to 156 registers a thread, so an SM holds three
programs and the paged rule's four an SM take two waves; the committed run at 0a530a6 (no cap)
had those rows 1.22-1.37x slower than contiguous (B=1 Hkv=32 L=131072 650 us, against 476), the
run at 5e7e8d8 (capped) 1.02-1.09x (486.1 against 473.6 us). Paged launches with the indices ahead
are capped at `resident_registers`, so that all their programs (up to four an SM) are resident: 128 at
four 4-warp programs an SM, which spills 2-4 registers: same probe, DIAG=g1, us, per-tile lookup /
ahead / ahead capped (contiguous): B=1 Hkv=32 L=16384 76.8 / 95.0 / 76.2 (73.5); L=131072 488.2 /
647.8 / 485.6 (472.6); B=4 Hkv=32 L=1024 28.0 / 31.7 / 27.2 (25.2); L=16384 251.7 / 328.9 / 250.9
(244.9); B=16 Hkv=32 L=16384 954.7 / 1030.0 / 954.1 (944.0); at G = 4 (118 registers) the cap
changes nothing (B=1 Hkv=8 L=16384 31.6 / 32.1, ragged B=16 Hkv=8 Lmax=4096 52.5 / 52.9). Ragged
lengths (DIAG=ragged, us, the plan's S / 4 stages at that S / 2 stages at twice that S, contiguous
with lengths): B=16 Hkv=8 Lmax=4096 52.4 (S=4) / 47.3 / 41.6 (S=8), contiguous 43.2 (S=4); B=64
159.8 (S=1) / 145.7 / 151.8 (S=2), contiguous 131.7; B=4 Lmax=32768 87.4 (S=16) / 71.1 / 66.5
(S=32), contiguous 104.5 (S=4: the one-wave rule under-splits ragged lengths on a grid that does not
fill the GPU); B=16 Lmax=32768 267.7 (S=8) / 275.3 / 264.5. Their equal-length twins, lengths
passed: B=16 Hkv=8 L=4096 76.0 / 82.4 / 79.2, B=64 258.2 / 263.3 / 258.4. The contiguous cache with
lengths at 1 / 2 / 4 / 8 times its S (DIAG=ragged_contig): ragged B=4 Hkv=8 Lmax=32768 104.7 (S=4) /
83.1 / 65.6 / 66.6, B=4 Lmax=4096 19.0 / 16.7 / 17.7 / 19.5, B=16 Lmax=32768 257.5 (S=8) / 254.5 /
255.2 / 259.0, B=16 Lmax=4096 43.2 (S=4) / 43.5 / 43.7 / 53.5, B=1 Lmax=32768 36.4 (S=16) / 39.7 /
42.4 / 46.3; equal lengths B=4 L=32768 131.4 / 133.1 / 136.0 / 141.3, B=16 L=4096 77.4 / 79.9 / 80.7
/ 96.2. More splits for calls with lengths pay where lengths differ (up to 37% at B=4) and cost 1-4%
where they do not; the plan cannot tell the two apart without reading the lengths. The run at
5e7e8d8 took four waves for contiguous calls with lengths of B >= 2 below the fill (ragged B=4
Lmax=32768 at 65.5-65.8 us, against 103.7 at 0a530a6); the kernel now tells the two apart itself
(below). Chunks handed out on the
device instead (probes/decode_work_queue.py: persistent programs take chunks from a counter, the
last chunk of a sequence merges) were no faster than four waves fixed on the host where lengths
differ (B=4 Lmax=32768: 65.7 us at best, chunks of 1024 on 4 programs an SM, against 66.1) and
slower where they do not (B=4 L=32768: 137.8-151.8 against 134.2 at one wave). Paged calls with
lengths (DIAG=ragged_paged, after the run at 5e7e8d8; contiguous with lengths at its four waves):
the plan takes ragged B=4 Lmax=32768 86.6 us (S=16, contiguous 66.6), B=16 Lmax=4096 52.8 (43.6),
B=64 160.7 (132.2); twice the paged S at 2 stages takes 65.8, 41.7 and 150.7, and 4 stages at the
plan's S 69.6, 46.6 and 146.9, but the equal-length twins lose 2-5% with twice the S (B=4 L=32768
138.4 -> 141.6, B=16 L=4096 76.0 -> 79.4). The study passes lengths to every paged call, so the plan
cannot choose between the two without reading them.

Chunks dealt out by length (SPREAD, `spread_by_length`: calls with lengths, B >= 2, S >= 2): every
program loads all B lengths (a vector from L2, beside its own) and, where their tile counts differ,
the B * S programs of a KV head are dealt out by length instead of Lmax's chunks (_ragged_chunk):
one chunk length c for the whole launch, the shortest (in whole tiles, found by bisection) at which
the sequences need at most B * S programs, a sequence of n tiles taking max(1, cdiv(n, c)) of them
(at most RAGGED_SPLIT_LIMIT * S; the partials hold that many slots a row), and program j of the head
serving the sequence and split that j falls on. Where the lengths are equal the program keeps its
Lmax chunk and the q and page loads it issued before the lengths arrived. The two paths each inline
their own copy of the tile loop (_attend_chunk); under the paged launches' 128-register cap the
plain copy spills more than the kernel without SPREAD does (probes/decode_resources.py, sm_90, spill
loads in the tile loop: G = 4 two, G = 1 three, against one; the dealt copy six and three; with one
copy of the loop for both paths, a single chunk computation, the kernel had 14 spilled words
against 4, and the paged equal-length rows ran 2-4% slower than without SPREAD in DIAG=spread).
The lengths are never read on the host. probes/decode_paged_ahead.py DIAG=spread2 (fp16, Hq=32, D=128, 64-token
pages, CUPTI kernel time, L2 flushed), us, Lmax's chunks -> dealt by length (contiguous without
lengths, or with them where ragged): paged ragged B=4 Hkv=8 Lmax=32768 (S=16) 88.2 -> 66.6 (64.8),
Lmax=4096 19.3 -> 20.4 (17.3), B=16 Lmax=4096 (S=4) 53.3 -> 43.6 (44.4), Lmax=32768 268.7 -> 264.6
(260.7); the plain path's cost at equal lengths, paged: B=4 L=32768 138.7 -> 139.2, B=16 L=4096 76.6
-> 77.7, L=1024 27.5 -> 28.2, B=4 Hkv=32 L=1024 27.6 -> 28.7 (contiguous 25.5). Contiguous calls with
lengths below the fill keep the one-wave count (S=4 at B=4 Hkv=8): ragged Lmax=32768 64.8 us
(four waves of Lmax's chunks, the previous rule, 66.1; one wave of them 100.4), Lmax=4096 17.3
(18.1); all lengths equal, B=4 L=32768 133.8 (137.2; without lengths 133.4).

The committed run at 9f262f2 merged 8192 values
a step (MERGE_TILE): at G = 1 that tile raised the kernel to 155 registers, too many for
PAGED_PROGRAMS_PER_SM resident programs, and its paged rows at Hkv=32 ran 1.2-1.39x slower than at
81ffb54 (B=1 L=131072 0.488 -> 0.654-0.684 ms); 2048 values a step (126 registers) gave 490 us there
again, with G = 4 and contiguous caches within 4%.

Lengths: seqlens[b] in 0..Lmax (None means every sequence is Lmax long). A sequence of
length 0 attends to nothing and its output is defined as zeros. Lengths on the host are
checked and raise ValueError; lengths already on the GPU are not read back (that would stall
the host every call): the kernel clamps them to 0..Lmax, so it never reads outside the cache.
An unsplit launch with lengths serves its sequences longest first, each program ranking the B
lengths on the device (`longest_first`, up to LONGEST_FIRST_MAX_BATCH), so the block
scheduler, which starts programs in grid order, does not leave a long sequence to run last.

Paged caches (`block_table`): serving engines keep the KV cache as a pool of fixed-size pages
and give each sequence a row of page indices. The pool layout here is (num_pages, page_size,
Hkv, D), token-major within a page: vLLM's FlashAttention backend and FlashInfer's default
"NHD" layout hold pages this way; FlashInfer's "HND" layout and TensorRT-LLM hold (num_pages,
Hkv, page_size, D), which is the same pool passed as `pool.transpose(1, 2)` (any strides are
taken). page_size is a power of two in 16..256 (PAGE_SIZES; vLLM defaults to 16 tokens). The
kernel is the same; each BLOCK_N-token tile looks up, per token, its page in the sequence's
table row (slot t % page_size of page table[b, t // page_size]), so a tile may span pages of
any order and the tile size does not depend on the page size. Only the pages holding a
sequence's tokens are read; of the table row, those pages' entries and, ahead of the length,
each split's first tile's (within the row); indices on the GPU are clamped into 0..num_pages-1 (a
negative one, taken unsigned, to the last page), so a bad table never reads outside the pool; host
tables are checked. Lmax is max_pages * page_size.
`paged_cache` builds a shuffled paged copy of contiguous caches, `paged_reference` is the
float64 answer (each sequence's pages gathered, then `reference`).

Traffic (`decode_traffic`, the count the decode study divides by): the K and V bytes actually
read, 2 * sum(n_b) * Hkv * D * element_size, plus q and out, 2 * B * Hq * D * element_size;
the same for paged caches (the block table's int32 entries, one per token read, mostly from
cache, are not counted).
The partial outputs (B * Hq * S * (D + 1) fp32 values written, and read back by one program
per kv head) are overhead and not counted.
"""
from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl

from kernels._checks import (check_grid_rows, check_no_grad, check_same_device, check_scale, check_tensor,
                             interpreting, on_device)
from kernels._device import INTERPRETER_PER_SM, cdiv, per_sm, pow2, sm_count
from kernels._plans import ALIGN, Launch, aligned, current_stream, layout, new_output, remember

DTYPES = (torch.float16, torch.bfloat16)
MAX_HEAD_DIM = 256
PAGE_SIZES = (16, 32, 64, 128, 256)   # tokens a page of a paged cache holds
MIN_CHUNK_BLOCKS = 2         # paged: more splits than the one-wave rule's give each at least this many
                             # BLOCK_N tiles (H200, page 64: B=1 Hkv=8 L=4096 S=16 18.1 us, S=32 18.7,
                             # S=64 (one tile each) 21.2)
NO_SPLIT_FILL = 0.9          # B * Hkv programs on at least this share of the SMs need no split
                             # (H200: B=16, Hkv=8, 128 programs: S=1 4.05 TB/s, S=9 3.59)
PAGED_PROGRAMS_PER_SM = 4    # paged calls with lengths: split a grid that fills the SMs once until each
                             # SM has about this many programs (H200, page 64, D = 128, per-tile page
                             # lookups, before the indices came a tile ahead: B=16, Hkv=8, L=8192: S=1
                             # 2.12 TB/s, S=4 3.91; B=4, Hkv=32, L=16384: 2.11 vs 4.28); without
                             # lengths a filled grid is not split (choose_splits)
PAGED_BELOW_FILL_PER_SM = 2  # ... and below the fill at most this many, each with a deeper ring (resident_stages;
                             # H200, fp16, Hq=32, D=128, page 64, indices a tile ahead, kernel time, us,
                             # four programs an SM -> two (contiguous): B=4 Hkv=8 L=4096 23.9 (S=16) ->
                             # 21.3 (8) (19.9), L=16384 69.9 -> 67.1 (63.5), L=32768 129.0 -> 127.0 (122.5);
                             # B=1 Hkv=32 L=32768 126.8 (16) -> 125.2 (8) (121.1); B=1 Hkv=8 L=131072
                             # 130.4 (64) -> 129.4 (32) (123.9); probes/decode_paged_ahead.py DIAG=paged_below)
PAGED_FILLED_MIN_SPLITS = 2  # paged calls with lengths on a grid filled with up to PAGED_UNSPLIT_PER_SM
                             # programs an SM: at least this many splits, where chunks keep PAGED_CHUNK_TOKENS
                             # or more (shorter ones not measured). H200, fp16, Hq=32, D=128, page 64, kernel
                             # time, us, S=1 / 2 / 4 at resident_stages' ring (contiguous S=1): ragged B=64
                             # Hkv=8 L=4096 151.0 / 133.3 / 135.7 (121.0); its lengths all equal 245.2 /
                             # 247.9 / 254.6 (238.6); probes/decode_paged_ahead.py DIAG=big_ragged
PAGED_UNSPLIT_PER_SM = 2     # ... and past this many programs an SM the contiguous call's split count, and
                             # unsplit its launch too (launch_config's ring, longest first, no register cap:
                             # paged_unsplit_filled). H200 GPU-5bf14c42, fp16, Hq=32, D=128, page 64, ragged
                             # B=64 Hkv=8 L=4096, kernel time, us: contiguous S=1 114.4; paged S=1 at 64/4/4
                             # 115.4, at 128/8/2 115.1, at resident_stages' 2-stage ring and register cap
                             # 144.5, the rule before's S=2 122.7-123.1, S=4 124.9, S=8 129.1;
                             # probes/decode_paged_ring.py
RAGGED_CHUNK_TOKENS = 4096   # calls with lengths on a filled grid: chunks no longer than this (H200,
                             # bf16, Hq=32 Hkv=8, ragged, kernel time: B=64 Lmax=32768 S=1 3.52 TB/s,
                             # S=4 4.26, S=8 4.31; B=32 S=2 3.88, S=8 4.15; B=16 S=4 3.56, S=8 3.88;
                             # B=64 Lmax=4096 S=1 3.64, S=2 3.27)
RAGGED_FILLED_SPLITS = 2     # contiguous calls with lengths on a filled grid: at most this many splits
                             # besides RAGGED_CHUNK_TOKENS' (H200, fp16, Hq=32 Hkv=8, kernel time, S=4 -> 2,
                             # us: B=16 L=4096 ragged 43.3 -> 44.4, the same lengths all equal 78.6 -> 75.7,
                             # B=16 L=1024 equal 30.1 -> 27.3; probes/decode_paged_ahead.py DIAG=spread2)
FULL_GRID_CONFIG = (128, 4, 2)   # (BLOCK_N, num_warps, num_stages) of unsplit launches without lengths of
                             # more than FULL_GRID_PROGRAMS_PER_SM programs an SM, at the 64-token tiles of
                             # D = 65..128 (H200, fp16, Hq=32, D=128, kernel time, 64/4/4 -> 128/4/2
                             # (cuDNN), us: B=64 Hkv=32 L=16384 3926.1 -> 3764.8 (3862.6), L=4096 976.7
                             # -> 951.0 (958.5), L=1024 253.3 -> 249.9 (250.3); B=64 Hkv=32 L=1024 at
                             # 64/4/2 235.7 against 237.6; probes/decode_balance.py DIAG=losses and
                             # fullgrid, probes/decode_fullgrid_ring.py)
FULL_GRID_PROGRAMS_PER_SM = 4    # ... up to this many an SM, 64-token tiles at the deepest ring at which all
                             # are resident (resident_stages, resident_registers): 128/4/2 compiles to
                             # 177 registers, two programs an SM, so of 512 programs (B=64 Hkv=8 or
                             # B=16 Hkv=32) 264 ran in a first wave; 64/4/2 at 128 registers holds four
                             # (fp16, us, 128/4/2 -> 64/4/2, cuDNN: B=64 Hkv=8 L=1024 65.3 -> 62.8 (64.3),
                             # B=16 Hkv=32 L=1024 64.7 -> 62.7 (64.2), B=64 Hkv=8 L=4096 237.5 -> 235.8
                             # (236.2); at two an SM (B=32 Hkv=8 L=1024) 4 stages 34.0, 2 stages 38.5;
                             # one an SM (B=16 Hkv=8 L=4096) 62.6 against 128/4/2 at 105.7;
                             # probes/decode_fullgrid_ring.py)
DEEP_FILLED_CONFIG = (128, 8, 2)  # (BLOCK_N, num_warps, num_stages) of resident_grid launches of more than
                             # two programs an SM (a 2-stage ring of 64-token tiles) whose cache holds at
                             # least DEEP_FILLED_MIN_TOKENS: fewer, deeper programs (107 registers, two an
                             # SM). H200 GPU-7160a124 (read ceiling as GPU-1d1c5097's, where cuDNN beat the
                             # 64/4/2 ring by 2-3% at these launches), fp16, Hq=32, D=128, kernel time, us,
                             # 64/4/2 at 128 registers -> 128/8/2 (cuDNN): B=64 Hkv=8 L=32768 1936.1 ->
                             # 1887.5 (1885.8), B=16 Hkv=32 L=32768 1936.4 -> 1883.6 (1883.2), B=64 Hkv=8
                             # L=4096 245.0 -> 242.5 (241.3), B=16 Hkv=32 L=4096 245.2 -> 241.9 (240.0); at
                             # L=1024 slower, 64.8 -> 66.0 and 65.7; 128/8/3 (one an SM) 1897.0, 1895.4,
                             # 243.3, 242.5, and 69.9 at L=1024; probes/decode_fullgrid_ring.py DIAG=onesm
DEEP_FILLED_MIN_TOKENS = 4096
PAGED_CHUNK_TOKENS = 2048    # paged, one sequence (B = 1): one wave of programs, more only to keep chunks
                             # this short (H200, fp16, Hq=32, D=128, page 64, indices a tile ahead,
                             # kernel time, us, four programs an SM -> this rule (contiguous): Hkv=8
                             # L=4096 13.3 (S=32) -> 12.0 (S=16) (11.5), L=16384 32.4 (64) -> 28.6 (16)
                             # (26.9), L=32768 50.1 (64) -> 46.2 (16) (44.6), L=131072 S=64 either way
                             # 141.4 (135.2; S=16 143.7); Hkv=32 L=4096 28.1 (16) -> 26.7 (4) (26.5);
                             # probes/decode_paged_ahead.py DIAG=paged_splits)
LONG_CHUNK_TOKENS = 8192     # split launches with lengths, G > 1 and chunks this long take LONG_CHUNK_CONFIG, and
                             # unsplit paged launches of caches this long on a filled grid of up to
                             # PAGED_UNSPLIT_PER_SM programs an SM (paged_long_unsplit)
LONG_CHUNK_CONFIG = (128, 8, 3)   # (BLOCK_N, num_warps, num_stages) for them (long_grouped_chunks,
                             # paged_long_unsplit: no register cap). Paged, equal lengths passed to no call:
                             # H200 GPU-ec1be0ff, fp16, Hq=32, D=128, page 64, kernel time, us, contiguous /
                             # paged at resident_stages' 64/4/4 and 255-register cap / at 128/8/3: B=16
                             # Hkv=8 L=131072 1830.1 / 1900.4 / 1845.5, L=32768 461.7 / 478.3 / 470.0; B=4
                             # Hkv=32 L=32768 462.6 / 474.7 / 465.7; B=32 Hkv=8 L=32768 (two an SM) 938.3 /
                             # 945.6 / 931.7; 128/4/3 0.996-1.025x contiguous, 128/8/4 1.009-1.040x, 64/4/5
                             # and 64/4/6 1.03-1.06x; probes/decode_paged_ring.py DIAG=deep
MERGE_TILE = 2048            # grouped merge: partial values (G rows x splits x D) loaded per step; its tile
                             # sets the kernel's registers (H200, fp16 D=128 paged, G=1: 8192 values 155
                             # registers, B=1 Hkv=32 L=131072 687 us; 2048 126 registers, 490 us; G=4 and
                             # contiguous caches within 4% either way; probes/decode_paged_merge.py)
PAGED_TABLE_AHEAD = True     # paged: each tile's page indices loaded a tile ahead, the first tile's before
                             # the length (resident_stages; measured in the module docstring)
RAGGED_SPLIT_LIMIT = 4       # calls with lengths, B >= 2, S >= 2, whose lengths differ: chunks dealt out by
                             # length on the device (_ragged_chunk), a sequence taking at most this many
                             # times S splits (the partials' slots a row). H200, fp16, Hq=32 Hkv=8, D=128,
                             # kernel time, us, Lmax's chunks -> dealt by length (DIAG=spread2): paged
                             # ragged B=4 Lmax=32768 88.2 -> 66.6, B=16 Lmax=4096 53.3 -> 43.6; contiguous
                             # ragged B=4 Lmax=32768 at one wave 100.4 -> 64.8 (four waves without: 66.1)
LONGEST_FIRST_MAX_BATCH = 64  # unsplit launches with lengths, 2 <= B <= this: program b * Hkv + h serves the
                             # sequence of rank b by decreasing length (longest_first); each program ranks
                             # all B lengths, B^2 comparisons, so larger batches (not measured) keep grid
                             # order. H200,
                             # fp16, Hq=32 Hkv=8, D=128, kernel time, us, grid order -> longest first
                             # (cuDNN): ragged B=64 Lmax=4096 122.7 -> 117.2 (243.5), Lmax=2048 77.0 ->
                             # 60.0 (125.6), B=48 Lmax=4096 107.1 -> 104.8 (193.7); the same lengths
                             # all equal 240.7 -> 240.9 (241.9); probes/decode_longest_first.py
MAX_REGISTERS = 255          # registers a thread may hold on sm_80-sm_90 (resident_registers' ceiling)
PAGED_RING_RESERVE = 8 << 10  # paged: shared memory a program holds besides its ring of K and V tiles
LENGTH_DTYPES = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8)
LOG2E = math.log2(math.e)


def decode_traffic(seqlens_total: int, batch: int, heads_q: int, heads_kv: int, head_dim: int,
                   element_size: int) -> tuple[int, int]:
    """(K and V bytes read, q and out bytes) of one decode step; seqlens_total = sum of n_b."""
    kv_bytes = 2 * seqlens_total * heads_kv * head_dim * element_size
    qo_bytes = 2 * batch * heads_q * head_dim * element_size
    return kv_bytes, qo_bytes


@triton.jit
def _mma(a, b, UPCAST: tl.constexpr):
    """a @ b accumulated in fp32; UPCAST feeds fp32 operands instead (holding the same values)."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    return tl.dot(a, b)


@triton.jit
def _attend_tile(q, k_ptrs, v_ptrs, mask_n, mask_d, m_i, l_i, acc, qk_scale, UPCAST_DOT: tl.constexpr):
    """One BLOCK_N-token tile of the online softmax: load K and V at k_ptrs / v_ptrs (tokens where
    mask_n), update the running max m_i and sum l_i (log2 units) and the (BLOCK_G, BLOCK_D) accumulator
    acc of q's query rows; returns the new (m_i, l_i, acc)."""
    k = tl.load(k_ptrs, mask=mask_n[:, None] & mask_d[None, :], other=0.0)
    s = _mma(q, tl.trans(k), UPCAST_DOT) * qk_scale                               # (BLOCK_G, BLOCK_N)
    s = tl.where(mask_n[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    v = tl.load(v_ptrs, mask=mask_n[:, None] & mask_d[None, :], other=0.0)
    acc = acc * alpha[:, None] + _mma(p.to(v.dtype), v, UPCAST_DOT)              # (BLOCK_G, BLOCK_D)
    return m_new, l_i, acc


@triton.jit
def _merge_group(Part, Lse, Out, row0, n_valid, num_splits, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                 BLOCK_MG: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    """Out[r] = sum_s exp2(lse_s) * Part[r, s] / sum_s exp2(lse_s) over the first n_valid splits, for the
    GROUP rows r = row0.. at once: (BLOCK_MG, BLOCK_S, BLOCK_D) partials a step, read from L2."""
    offs_g = tl.arange(0, BLOCK_MG)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < HEAD_DIM
    rows = row0 + offs_g                                                                  # (BLOCK_MG,)
    l_ptrs = Lse + rows[:, None] * num_splits + offs_s[None, :]                           # (BLOCK_MG, BLOCK_S)
    p_ptrs = (Part + ((rows[:, None] * num_splits + offs_s[None, :]) * HEAD_DIM)[:, :, None]
              + offs_d[None, None, :])                                                    # (BLOCK_MG, BLOCK_S, BLOCK_D)
    m_i = tl.full([BLOCK_MG], float("-inf"), tl.float32)   # running max of each row's lse
    l_i = tl.zeros([BLOCK_MG], tl.float32)
    acc = tl.zeros([BLOCK_MG, BLOCK_D], tl.float32)
    for s0 in range(0, n_valid, BLOCK_S):
        mask_gs = mask_g[:, None] & ((s0 + offs_s) < n_valid)[None, :]
        # .cg: read the other programs' partials from L2, never from this SM's L1.
        lse = tl.load(l_ptrs, mask=mask_gs, other=float("-inf"), cache_modifier=".cg")
        part = tl.load(p_ptrs, mask=mask_gs[:, :, None] & mask_d[None, None, :], other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m_i, tl.max(lse, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)    # padded rows see no split
        alpha = tl.math.exp2(m_i - m_safe)
        w = tl.math.exp2(lse - m_safe[:, None])                   # (BLOCK_MG, BLOCK_S), 0 off the mask
        l_i = l_i * alpha + tl.sum(w, 1)
        acc = acc * alpha[:, None] + tl.sum(w[:, :, None] * part, 1)
        m_i = m_new
        l_ptrs += BLOCK_S
        p_ptrs += BLOCK_S * HEAD_DIM
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_safe[:, None]).to(Out.dtype.element_ty),
             mask=mask_g[:, None] & mask_d[None, :])


@triton.jit
def _ragged_chunk(lens, tiles, mask_b, batch, j, num_splits, part_splits, BLOCK_N: tl.constexpr,
                  BLOCK_B: tl.constexpr):
    """Program j of a KV head's B * S (num_splits = S) when the sequences' lengths differ: every
    sequence takes chunks of one length c (whole tiles), the shortest for which the B sequences need
    at most B * S programs, one at least each (a sequence of n tiles takes max(1, cdiv(n, c))
    splits, at most part_splits); program j serves the sequence and split that j falls on in that
    order. Returns (b, split, start, end, seqlen, splits of b); a program past the last split gets
    b = 0, split = -1 and an empty chunk. `lens` and `tiles` are the (BLOCK_B,) clamped lengths and
    their tile counts, 0 past the batch."""
    target = batch * num_splits
    total = tl.sum(tiles, 0)
    lo = tl.maximum(tl.maximum(tl.cdiv(total, target), tl.cdiv(tl.max(tiles, 0), part_splits)), 1)
    # A chunk of hi tiles needs at most total / hi + B <= target programs, since S >= 2.
    hi = tl.maximum(lo, tl.cdiv(total, target - batch))
    while lo < hi:
        mid = (lo + hi) // 2
        fits = tl.sum(tl.where(mask_b, tl.maximum(tl.cdiv(tiles, mid), 1), 0), 0) <= target
        hi = tl.where(fits, mid, hi)
        lo = tl.where(fits, lo, mid + 1)
    per_seq = tl.where(mask_b, tl.maximum(tl.cdiv(tiles, lo), 1), 0)              # (BLOCK_B,) splits
    after = tl.cumsum(per_seq, 0)                                # programs up to and including b
    b = tl.sum((after <= j).to(tl.int32), 0)                     # the first sequence whose range holds j
    mine = tl.arange(0, BLOCK_B) == b
    n_split = tl.sum(tl.where(mine, per_seq, 0), 0)
    split = j - tl.sum(tl.where(mine, after - per_seq, 0), 0)
    n_tiles = tl.sum(tl.where(mine, tiles, 0), 0)
    seqlen = tl.sum(tl.where(mine, lens, 0), 0)
    idle = b >= batch                                             # past the last sequence's splits
    n_safe = tl.maximum(n_split, 1)
    start = tl.where(idle, 0, ((split * n_tiles) // n_safe) * BLOCK_N)
    end = tl.where(idle, 0, tl.minimum((((split + 1) * n_tiles) // n_safe) * BLOCK_N, seqlen))
    return tl.where(idle, 0, b), tl.where(idle, -1, split), start, end, seqlen, n_split


@triton.jit
def _clamped(lens, cache_len):
    """Lengths as loaded (any integer dtype) clamped into 0..cache_len, then int32: clamped first,
    so that a 64-bit length past int32's range does not wrap."""
    return tl.minimum(tl.maximum(lens, 0), cache_len).to(tl.int32)


@triton.jit
def _rank_by_length(Lens, stride_l, batch, cache_len, rank, BLOCK_B: tl.constexpr):
    """The sequence of rank `rank` among the B clamped lengths, longest first, ties by index: the
    block scheduler starts programs in grid order, so the longest sequences start first and no long
    one is left to run alone at the end of the launch."""
    offs = tl.arange(0, BLOCK_B)
    valid = offs < batch
    lens = tl.where(valid, _clamped(tl.load(Lens + offs * stride_l, mask=valid, other=0), cache_len), -1)
    # ahead[i, j]: sequence j comes before sequence i
    ahead = (lens[None, :] > lens[:, None]) | ((lens[None, :] == lens[:, None]) & (offs[None, :] < offs[:, None]))
    ranks = tl.sum((ahead & valid[None, :]).to(tl.int32), 1)
    return tl.sum(tl.where((ranks == rank) & valid, offs, 0), 0)


@triton.jit
def _write_zeros(Out, b, h, seqlen, split, heads_kv, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                 BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr):
    """A split whose chunk holds no keys: split 0 of a length-0 sequence writes its zero output (no
    split of such a sequence has keys to merge); every other one writes nothing."""
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    rows = b.to(tl.int64) * (heads_kv * GROUP) + h * GROUP + offs_g
    zero = tl.zeros([BLOCK_G, BLOCK_D], tl.float32).to(Out.dtype.element_ty)
    tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :], zero,
             mask=(offs_g < GROUP)[:, None] & (offs_d < HEAD_DIM)[None, :] & (seqlen == 0) & (split == 0))


@triton.jit
def _page_of(tokens, PAGE_SIZE: tl.constexpr):
    """The table column of each token (t // PAGE_SIZE). Tokens are never negative, so the division
    is unsigned: a shift, where the signed one also rounds negatives toward zero.

    The paged tile loop (_attend_chunk) also takes the slot and clamps a device table's entries into
    the pool unsigned, and loads the table unmasked, tokens past the chunk taking its last page's
    entry (their K and V loads are masked): a thread's rows of one page then share one table load
    and one page product. sm_90 SASS of the tile loop (probes/decode_resources.py, fp16, Hq=32,
    D=128, 64-token pages, lengths), instructions, signed and masked -> now: B=1 Hkv=8 L=32768 560
    -> 334, B=1 Hkv=32 L=131072 554 -> 328, B=16 Hkv=8 L=32768 595 -> 355, B=64 Hkv=8 L=4096
    605 -> 362, B=4 Hkv=32 L=4096 626 -> 358, B=16 Hkv=32 L=1024 583 -> 331 (the contiguous
    cache's loop: 322-357), and no spill load left in it under the 128-register cap (11 before at
    B=16 Hkv=32 L=1024). Timed against the loop before on an H200 (probes/decode_paged_layout.py,
    fp16, kernel time, paged over contiguous): 1.00-1.14x at its seven shapes, against 1.04-1.24x."""
    return (tokens.to(tl.uint32) // PAGE_SIZE).to(tl.int32)


@triton.jit
def _chunk_operands(Q, Table, b, heads, start, limit, offs_n, offs_d, out_mask, stride_qb, stride_qh, stride_qd,
                    stride_tb, stride_tp, PAGE_SIZE: tl.constexpr, TABLE_AHEAD: tl.constexpr):
    """(table row, page indices, q) of a chunk of sequence b from token `start`: b's row of the block
    table, the page indices of the chunk's first tile (TABLE_AHEAD; tokens below `limit`) and the
    (BLOCK_G, BLOCK_D) query rows `heads` of b."""
    b64 = b.to(tl.int64)
    table_row = Table + b64 * stride_tb
    page = offs_n * 0
    if TABLE_AHEAD:
        first = start + offs_n
        page = tl.load(table_row + _page_of(first, PAGE_SIZE) * stride_tp, mask=first < limit, other=0)
    q = tl.load(Q + b64 * stride_qb + heads[:, None] * stride_qh + offs_d[None, :] * stride_qd, mask=out_mask,
                other=0.0)
    return table_row, page, q


@triton.jit
def _attend_chunk(K, V, Out, Part, Lse, Count, stride_kb, stride_kh, stride_kn, stride_kd, stride_vb, stride_vh,
                  stride_vn, stride_vd, stride_tp, heads_kv, num_pages, part_splits, qk_scale, b, h, split,
                  start, end, seqlen, n_valid, q, table_row, page_next,
                  GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr, SPLIT: tl.constexpr, UPCAST_DOT: tl.constexpr,
                  BLOCK_MG: tl.constexpr, PAGE_SIZE: tl.constexpr, TABLE_AHEAD: tl.constexpr):
    """_decode_kernel's program from its chunk on: tokens start..end of sequence b, KV head h (seqlen
    tokens long, n_valid splits holding keys), q its (BLOCK_G, BLOCK_D) query rows, page_next the first
    tile's page indices (paged, TABLE_AHEAD)."""
    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < HEAD_DIM
    out_mask = mask_g[:, None] & mask_d[None, :]
    b64 = b.to(tl.int64)
    heads = h * GROUP + offs_g                                   # this KV head's query heads
    rows = b64 * (heads_kv * GROUP) + heads                      # their rows in (B * Hq)

    start64 = start.to(tl.int64)
    h64 = h.to(tl.int64)
    k_ptrs = (K + b64 * stride_kb + h64 * stride_kh + start64 * stride_kn
              + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd)          # (BLOCK_N, BLOCK_D)
    v_ptrs = (V + b64 * stride_vb + h64 * stride_vh + start64 * stride_vn
              + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd)
    k_step = tl.full([], BLOCK_N, tl.int64) * stride_kn
    v_step = tl.full([], BLOCK_N, tl.int64) * stride_vn

    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)   # running max of the logits (log2 units)
    l_i = tl.zeros([BLOCK_G], tl.float32)                  # running sum of exp2(logit - m_i)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    last_col = end                                             # paged: the chunk's last page's column
    if PAGE_SIZE > 0:
        last_col = _page_of(end - 1, PAGE_SIZE)                  # (the loop runs only when start < end)
    for n0 in range(start, end, BLOCK_N):
        mask_n = (n0 + offs_n) < end
        if PAGE_SIZE > 0:   # token t lives in slot t % PAGE_SIZE of page Table[b, t // PAGE_SIZE]
            tokens = n0 + offs_n
            # tokens past the chunk take its last page's entry: no masked table loads (their K and V are)
            if TABLE_AHEAD:   # this tile's indices were loaded a tile ago; load the next tile's
                page = page_next
                page_next = tl.load(table_row + tl.minimum(_page_of(tokens + BLOCK_N, PAGE_SIZE), last_col)
                                    * stride_tp)
            else:
                page = tl.load(table_row + tl.minimum(_page_of(tokens, PAGE_SIZE), last_col) * stride_tp)
            # never outside the pool: a negative index wraps to a large unsigned one, clamped with the rest
            page = tl.minimum(page.to(tl.uint32), num_pages - 1).to(tl.int64)
            slot = (tokens.to(tl.uint32) % PAGE_SIZE).to(tl.int32)
            k_ptrs = (K + h64 * stride_kh + (page * stride_kb + slot * stride_kn)[:, None]
                      + offs_d[None, :] * stride_kd)                              # (BLOCK_N, BLOCK_D)
            v_ptrs = (V + h64 * stride_vh + (page * stride_vb + slot * stride_vn)[:, None]
                      + offs_d[None, :] * stride_vd)
        m_i, l_i, acc = _attend_tile(q, k_ptrs, v_ptrs, mask_n, mask_d, m_i, l_i, acc, qk_scale, UPCAST_DOT)
        if PAGE_SIZE == 0:
            k_ptrs += k_step
            v_ptrs += v_step

    if SPLIT:
        # start < end (_decode_kernel), so every row saw at least one key and l_i > 0.
        tl.store(Part + (rows * part_splits + split)[:, None] * HEAD_DIM + offs_d[None, :],
                 acc / l_i[:, None], mask=out_mask)
        tl.store(Lse + rows * part_splits + split, m_i + tl.math.log2(l_i), mask=mask_g)
        # Every thread's stores precede the counter bump (barrier), and the release/acquire
        # atomic makes them visible to the program that arrives last.
        tl.debug_barrier()
        bh = b * heads_kv + h
        arrived = tl.atomic_add(Count + bh, 1, sem="acq_rel", scope="gpu")
        if arrived == n_valid - 1:
            _merge_group(Part, Lse, Out, b64 * (heads_kv * GROUP) + h * GROUP, n_valid, part_splits,
                         GROUP, HEAD_DIM, BLOCK_MG, BLOCK_S, BLOCK_D)   # all G rows at once
            tl.store(Count + bh, 0)                              # every other program has arrived: reset
    else:
        l_safe = tl.where(l_i > 0, l_i, 1.0)                     # length 0: acc is 0, out is 0
        tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :],
                 (acc / l_safe[:, None]).to(Out.dtype.element_ty), mask=out_mask)


@triton.jit(do_not_specialize=["n_blocks", "num_splits", "batch", "part_splits"])
def _decode_kernel(
    Q, K, V, Lens, Table, Out, Part, Lse, Count,
    stride_qb, stride_qh, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_tb, stride_tp, stride_l, heads_kv, cache_len, num_pages, n_blocks, num_splits, qk_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
    HAS_LENS: tl.constexpr, SPLIT: tl.constexpr, UPCAST_DOT: tl.constexpr,
    BLOCK_MG: tl.constexpr, PAGE_SIZE: tl.constexpr, TABLE_AHEAD: tl.constexpr,
    batch, part_splits, SPREAD: tl.constexpr, BLOCK_B: tl.constexpr, LONGEST_FIRST: tl.constexpr,
):
    # Out (B, Hq, D) contiguous; when SPLIT: Part (B, Hq, P, D) fp32, Lse (B, Hq, P) fp32 and
    # Count (B * Hkv,) int32 zeros, all contiguous. Contiguous caches (PAGE_SIZE 0): K and V
    # (B, Hkv, Lmax, D) with strides (b, h, n, d). Paged (PAGE_SIZE > 0): K and V
    # (num_pages, PAGE_SIZE, Hkv, D) with strides passed as (page, h, slot, d), Table
    # (B, max_pages) int32 with strides (stride_tb, stride_tp), and cache_len = max_pages * PAGE_SIZE.
    # Lens (B,) any integer dtype, stride stride_l.
    # Balanced chunks: split s reads the BLOCK_N tiles floor(s * n_blocks / S) up to (not
    # including) floor((s + 1) * n_blocks / S), n_blocks = cdiv(cache_len, BLOCK_N), 1 <= S <= n_blocks.
    # SPREAD (lengths passed, B >= 2, S >= 2): where the lengths' tile counts differ, the same B * S
    # programs of a KV head are dealt out by length instead (_ragged_chunk). Part and Lse hold
    # P = part_splits slots a row (S, or more under SPREAD). LONGEST_FIRST (lengths, S = 1): program
    # b * Hkv + h serves the sequence of rank b by decreasing length instead of sequence b.
    split = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // heads_kv
    h = bh % heads_kv
    if LONGEST_FIRST:   # unsplit with lengths: the sequence of rank b, longest first (longest_first)
        b = _rank_by_length(Lens, stride_l, batch, cache_len, b, BLOCK_B)
    start = ((split * n_blocks) // num_splits) * BLOCK_N

    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < HEAD_DIM
    out_mask = mask_g[:, None] & mask_d[None, :]
    heads = h * GROUP + offs_g                                   # this KV head's query heads
    # The first tile's page indices and q, before (not after) the length is known.
    table_row, page_next, q = _chunk_operands(Q, Table, b, heads, start, cache_len, offs_n, offs_d, out_mask,
                                              stride_qb, stride_qh, stride_qd, stride_tb, stride_tp,
                                              PAGE_SIZE, TABLE_AHEAD)
    seqlen = cache_len
    if HAS_LENS:
        seqlen = _clamped(tl.load(Lens + b * stride_l), cache_len)
    end = tl.minimum((((split + 1) * n_blocks) // num_splits) * BLOCK_N, seqlen)
    # Splits holding keys: those whose first tile lies before the last tile with keys.
    n_valid = tl.cdiv(tl.cdiv(seqlen, BLOCK_N) * num_splits, n_blocks)
    if SPREAD:
        offs_b = tl.arange(0, BLOCK_B)
        mask_b = offs_b < batch
        lens = _clamped(tl.load(Lens + offs_b * stride_l, mask=mask_b, other=0), cache_len)
        tiles = tl.cdiv(lens, BLOCK_N)                                                 # (BLOCK_B,)
        most = tl.max(tiles, 0)
        if tl.min(tl.where(mask_b, tiles, most), 0) != most:   # lengths differ: deal chunks by length
            rb, rsplit, rstart, rend, rlen, rvalid = _ragged_chunk(
                lens, tiles, mask_b, batch, b * num_splits + split, num_splits, part_splits, BLOCK_N, BLOCK_B)
            rtable, rpage, rq = _chunk_operands(Q, Table, rb, heads, rstart, rend, offs_n, offs_d, out_mask,
                                                stride_qb, stride_qh, stride_qd, stride_tb, stride_tp,
                                                PAGE_SIZE, TABLE_AHEAD)
            if SPLIT:
                if rstart >= rend:   # no keys in this chunk (a program past the last split: rsplit = -1)
                    _write_zeros(Out, rb, h, rlen, rsplit, heads_kv, GROUP, HEAD_DIM, BLOCK_G, BLOCK_D)
                    return
            _attend_chunk(K, V, Out, Part, Lse, Count, stride_kb, stride_kh, stride_kn, stride_kd, stride_vb,
                          stride_vh, stride_vn, stride_vd, stride_tp, heads_kv, num_pages, part_splits, qk_scale,
                          rb, h, rsplit, rstart, rend, rlen, rvalid, rq, rtable, rpage,
                          GROUP, HEAD_DIM, BLOCK_G, BLOCK_N, BLOCK_D, BLOCK_S, SPLIT, UPCAST_DOT, BLOCK_MG, PAGE_SIZE,
                          TABLE_AHEAD)
            return
    if SPLIT:
        if start >= end:   # this chunk lies past the sequence: nothing to read or merge
            _write_zeros(Out, b, h, seqlen, split, heads_kv, GROUP, HEAD_DIM, BLOCK_G, BLOCK_D)
            return
    _attend_chunk(K, V, Out, Part, Lse, Count, stride_kb, stride_kh, stride_kn, stride_kd, stride_vb,
                  stride_vh, stride_vn, stride_vd, stride_tp, heads_kv, num_pages, part_splits, qk_scale,
                  b, h, split, start, end, seqlen, n_valid, q, table_row, page_next,
                  GROUP, HEAD_DIM, BLOCK_G, BLOCK_N, BLOCK_D, BLOCK_S, SPLIT, UPCAST_DOT, BLOCK_MG, PAGE_SIZE,
                  TABLE_AHEAD)


_COUNTERS: dict = {}


def _counters(device: torch.device, n: int, stream: int) -> torch.Tensor:
    """Arrival counters of the split merge, zeroed once per device and stream and reused.

    `stream` is the handle of the stream the kernel launches on (0 in the interpreter). The
    program that merges a (batch, kv head) resets its counter, so the buffer is zero again
    when the kernel ends and no memset is launched per call.
    """
    key = (device, stream)
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < n:
        buf = torch.zeros(max(n, 1024), device=device, dtype=torch.int32)
        _COUNTERS[key] = buf
    return buf


@functools.lru_cache(maxsize=None)
def launch_config(head_dim: int, element_size: int) -> tuple[int, int, int]:
    """(BLOCK_N, num_warps, num_stages): about 32 KB of K+V per tile, num_stages tiles in flight.

    On the H200 at D = 128, fp16, BLOCK_N of 32, 64 and 128 with 3-4 stages all stream
    within noise of each other once the grid is full; 64 x 4 warps x 4 stages is kept. Split
    launches with lengths of grouped heads over long chunks take LONG_CHUNK_CONFIG instead
    (long_grouped_chunks).
    """
    block_d = max(16, pow2(head_dim))
    block_n = max(16, min(128, 8192 // block_d))
    return block_n, 4, 4


def long_grouped_chunks(group: int, splits: int, chunk_len: int, block_n: int, lengths: bool) -> bool:
    """True for a split launch of a contiguous cache, given the sequence lengths, whose programs each
    stream chunks of at least LONG_CHUNK_TOKENS tokens of Lmax for a query group of G > 1 heads, at the
    64-token tiles of D = 65..128: such launches take LONG_CHUNK_CONFIG's wider tiles.

    H200, fp16, Hq = 32, D = 128, kernel time (CUPTI, L2 flushed), us. With lengths that differ,
    LONG_CHUNK_CONFIG against 64/4/4 at the rule's split count: ragged B=4 Hkv=8 Lmax=32768 55.9
    against 112.2 (128/4/3 97.1; probes/decode_ragged_splits.py at 24a2def), and earlier 103.4
    against 138.7, ragged B=16 Hkv=8 Lmax=32768 292.3 against 312.8 (that shape now splits into
    chunks of 4096, under LONG_CHUNK_TOKENS). Without lengths it paid when it was set (B=1 Hkv=8
    L=131072 136.6 against 140.9, B=4 Hkv=8 L=131072 bf16 482.5 against 514.6, B=4 Hkv=8 L=32768
    136.7 against 141.5), but not on the code since: at 24a2def, over three H200s, 64/4/4 took
    0.980-0.996x its time at every uniform shape it applied to, chunks of 8192 to 32768 tokens
    (decode_ragged_splits.py DIAG=long on GPU-85e81234: B=1 Hkv=8 L=131072 124.5 against 127.0,
    B=4 Hkv=8 L=32768 123.7 against 124.5, B=2 Hkv=8 L=65536 124.5 against 125.9, B=4 Hkv=8
    L=65536 241.9 against 243.1, B=4 Hkv=8 L=131072 476.1 against 478.1; cuDNN 125.5, 124.9,
    124.9, 242.3, 475.8; probes/decode_balance.py DIAG=large on GPU-d7868900 121.7 against 124.3
    and 121.2 against 122.2), so calls without lengths keep 64/4/4. At chunks of 1024 tokens or
    fewer the wide tiles were slower (B=1 Hkv=8 L=16384: 32.4 against 29.3 us), and at G = 1 no
    faster (477.5 against 474.1).
    """
    return lengths and group > 1 and splits > 1 and chunk_len >= LONG_CHUNK_TOKENS and block_n == 64


def choose_splits(batch: int, heads_kv: int, cache_len: int, block_n: int, num_sms: int,
                  paged: bool = False, lengths: bool = False) -> int:
    """S, the number of splits of each sequence: the one-wave rule for contiguous caches
    (paged=False), the paged rule below for paged caches. A count of s splits is reduced to the
    number of chunks of cdiv(n_blocks, s) whole tiles that cover the cache (`_whole_chunks`: 10
    tiles in 6 splits are 5 chunks of 2), so no split is left without a tile; decode_attention
    then cuts the cache into S balanced chunks (`launch_shape`).

    Paged caches: a program's page lookups put a dependent load before each tile's K and V, so
    one program per SM leaves the memory system idle; with lengths, a grid that would not be split
    is split into about PAGED_PROGRAMS_PER_SM programs per SM instead. Without lengths every
    sequence holds the table's pages, all equal, and a filled grid takes one program a sequence,
    paged or not: with the page indices loaded a tile ahead (PAGED_TABLE_AHEAD) and the deepest
    ring that fits (resident_stages), such a launch ran within 3% of the contiguous cache where the
    split did not (probes/decode_paged_ahead.py DIAG=paged_filled, equal lengths passed, fp16, us,
    contiguous / paged S=1 / the paged split: B=16 Hkv=8 L=1024 19.6 / 19.3 / 23.1 (S=4), L=4096
    63.9 / 65.5 / 69.7; B=4 Hkv=32 L=1024 19.4 / 19.1 / 23.8, L=4096 63.7 / 65.2 / 70.5). With
    lengths the plan cannot tell equal ones from ragged ones, which want the split (ragged B=16 Hkv=8
    L=4096 paged S=1 60.8 against 36.8 split). `lengths` (the call passes
    seqlens, whose values the plan does not read): sequences may differ in length, and one
    program per (batch, kv head) would leave the whole launch waiting on the longest; the same
    split spreads each long sequence over several programs while the chunks past a short one's
    end exit at once (H200, bf16, D=128, Hq=32, ragged lengths: B=16 Hkv=8 Lmax=32768 S=1
    443.6 us, S=2 356.3, S=4 318.8; B=64 Hkv=8 Lmax=4096 stays at S=1, 131.5 us). On a filled
    grid such a call also cuts the cache into chunks of at most RAGGED_CHUNK_TOKENS, whatever
    the whole-wave count: with many sequences of unequal length the programs of the short ones
    exit at once, and the long ones would otherwise hold the launch (B=64 Hkv=8 Lmax=32768, read
    rate 3.52 TB/s at S=1, 4.31 at S=8). A contiguous cache takes at most RAGGED_FILLED_SPLITS
    splits besides (the same lengths all equal pay for more: B=16 Hkv=8 L=1024 25.6 us unsplit
    without lengths, 27.3 at S=2, 30.1 at S=4), a paged one up to PAGED_PROGRAMS_PER_SM programs an
    SM and, up to PAGED_UNSPLIT_PER_SM programs an SM, at least PAGED_FILLED_MIN_SPLITS splits of
    PAGED_CHUNK_TOKENS or more (ragged B=16 Hkv=8 L=4096: S=4 33.6 us, the contiguous S=2 37.0); past
    that the contiguous count, and unsplit the contiguous launch (paged_unsplit_filled: ragged B=64
    Hkv=8 L=4096 S=1 115.4 us against 122.7 at S=2 on resident_stages' ring, 144.5 at S=1 on it;
    contiguous 114.4). Below the fill such a call over B >= 2 sequences takes the one-wave count, as
    without lengths, paged or not (ragged B=4 Hkv=8 L=4096 paged: S=4 14.2 us, S=8 15.0, contiguous
    S=4 14.5; Lmax=32768 54.6 either way, contiguous 55.1; probes/decode_paged_ring.py). Wherever a split
    call's lengths differ, the kernel deals its programs out by length (_ragged_chunk,
    RAGGED_SPLIT_LIMIT), so the long sequences take the programs the short ones leave (B=4 Hkv=8 Lmax=32768 ragged: 64.8
    us, against 66.1 at four waves of Lmax's chunks, the rule before; the same lengths all equal:
    133.8 against 137.2).

    Below the fill a paged cache without lengths takes at most PAGED_BELOW_FILL_PER_SM programs an
    SM: fewer programs, each with a deeper ring (resident_stages), keep more tiles in flight than four
    an SM with two stages. A paged cache of one sequence (B = 1) has no lengths to balance, and with the
    page indices loaded a tile ahead its ring hides the lookups: it takes the one-wave count, raised
    only as far as chunks of PAGED_CHUNK_TOKENS need.

    Measured and not kept (probes/decode_paged_ahead.py DIAG=filled_equal, fp16, us): on a filled
    grid, a paged call with lengths whose tile counts were all equal ran its split launch unsplit on
    the device (the first B * Hkv programs each reading one (batch, kv head) whole, the others
    exiting), under the split launch's 2-stage ring: B=16 Hkv=8 L=1024 38.9 (S=4 split 23.1; unsplit
    launch 19.3), L=4096 134.0 (69.7; 64.5); with a 4-stage ring 31.0 and 105.6, so the ring is not
    the whole cost (the block scheduler may put several workers on one SM); a contiguous cache at
    S=2 lost 10% (21.2 against 19.2).
    """
    n_blocks = cdiv(cache_len, block_n)
    programs = batch * heads_kv
    # Whole waves: B * Hkv * S never exceeds PAGED_PROGRAMS_PER_SM * SMs, since one program past
    # it is a wave of its own (H200, page 64, B=1 Hkv=32 L=131072: S=16 497 us, S=17 699), except
    # a paged call with lengths, whose short sequences' chunks exit at once (PAGED_FILLED_MIN_SPLITS).
    wanted = max(1, PAGED_PROGRAMS_PER_SM * num_sms // programs)
    if programs >= NO_SPLIT_FILL * num_sms:
        if not lengths:     # every sequence as long as the cache (or the table's pages): one program each
            return 1
        cap = min(wanted, RAGGED_FILLED_SPLITS)
        if paged and programs <= PAGED_UNSPLIT_PER_SM * num_sms:   # at least PAGED_FILLED_MIN_SPLITS chunks
            cap = max(wanted, min(PAGED_FILLED_MIN_SPLITS, cache_len // PAGED_CHUNK_TOKENS))   # of 2048+ tokens
        splits = max(1, min(cap, n_blocks // MIN_CHUNK_BLOCKS))
        if lengths:
            splits = max(splits, cdiv(cache_len, RAGGED_CHUNK_TOKENS))
        return _whole_chunks(n_blocks, splits)
    wave = max(1, num_sms // programs)   # one wave of programs (module docstring), at most one per tile
    if not paged or (lengths and batch >= 2):   # paged with lengths: chunks dealt out by length, as contiguous
        return _whole_chunks(n_blocks, wave)
    # Paged: up to PAGED_BELOW_FILL_PER_SM programs an SM, but one sequence (no lengths to balance)
    # only for chunks of at most PAGED_CHUNK_TOKENS, and more sequences only down to chunks of
    # MIN_CHUNK_BLOCKS tiles.
    below = max(1, PAGED_BELOW_FILL_PER_SM * num_sms // programs)
    more = cdiv(cache_len, PAGED_CHUNK_TOKENS) if batch == 1 else n_blocks // MIN_CHUNK_BLOCKS
    return _whole_chunks(n_blocks, max(wave, min(below, more)))


def _whole_chunks(n_blocks: int, splits: int) -> int:
    """Chunks of cdiv(n_blocks, splits) tiles that cover n_blocks tiles (at most `splits`)."""
    return cdiv(n_blocks, cdiv(n_blocks, max(1, min(splits, n_blocks))))


def merge_rows(group: int) -> int:
    """Rows of the grouped merge's tile (BLOCK_MG): G padded to a power of two, at least 2."""
    return max(2, pow2(group))


def merge_step(group: int, head_dim: int) -> int:
    """Splits the grouped merge reads per step: MERGE_TILE values of G rows x D, 2..32 splits."""
    return max(2, min(32, MERGE_TILE // (merge_rows(group) * max(16, pow2(head_dim)))))


def planned_splits(batch: int, heads_kv: int, cache_len: int, head_dim: int, element_size: int, num_sms: int,
                   group: int = 1, paged: bool = False, lengths: bool = False) -> int:
    """S that decode_attention launches for this shape."""
    return launch_shape(batch, heads_kv, group, cache_len, head_dim, element_size, num_sms, paged, lengths)[0]


def _check_inputs(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table=None):
    """Shape, dtype and device checks of a call (the values of host lengths and tables: _to_device)."""
    check_tensor("q", q, DTYPES, ndim=3)
    dims = "(B, Hkv, Lmax, D)" if block_table is None else "(num_pages, page_size, Hkv, D)"
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(cache, torch.Tensor) or cache.dtype != q.dtype:
            kind = cache.dtype if isinstance(cache, torch.Tensor) else type(cache).__name__
            raise ValueError(f"{name} must be a tensor of q's dtype ({q.dtype}), got {kind}")
        if cache.dim() != 4:
            raise ValueError(f"{name} must have 4 dimensions {dims}, got shape {tuple(cache.shape)}")
        check_tensor(name, cache, DTYPES)
    if k_cache.device != q.device or v_cache.device != q.device:
        check_same_device(q=q, k_cache=k_cache, v_cache=v_cache)
    check_no_grad("decode_attention", q=q, k_cache=k_cache, v_cache=v_cache)
    batch, heads_q, head_dim = q.shape
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} differ in shape")
    if block_table is None:
        kb, heads_kv, cache_len, kd = k_cache.shape
        if kb != batch:
            raise ValueError(f"q has batch {batch} but the caches have batch {kb}")
    else:
        heads_kv, cache_len, kd = k_cache.shape[2], _check_table(block_table, k_cache, batch, q.device), k_cache.shape[3]
    if kd != head_dim:
        raise ValueError(f"q has head_dim {head_dim} but the caches have head_dim {kd}")
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be 1..{MAX_HEAD_DIM}, got {head_dim}")
    if heads_kv == 0 or heads_q % heads_kv != 0:
        raise ValueError(f"heads_q ({heads_q}) must be a positive multiple of heads_kv ({heads_kv})")
    if cache_len == 0:
        raise ValueError("the caches hold no tokens (Lmax = 0)")
    check_grid_rows("batch * kv heads", batch * heads_kv)
    check_scale(sm_scale, positive=False)
    if num_splits is not None and (isinstance(num_splits, bool) or not isinstance(num_splits, int) or num_splits < 1):
        raise ValueError(f"num_splits must be a positive int or None, got {num_splits!r}")
    if seqlens is None:
        return
    if not isinstance(seqlens, torch.Tensor) or seqlens.dtype not in LENGTH_DTYPES:
        kind = seqlens.dtype if isinstance(seqlens, torch.Tensor) else type(seqlens).__name__
        raise ValueError(f"seqlens must be an integer tensor, got {kind}")
    if seqlens.shape != (batch,):
        raise ValueError(f"seqlens must have shape ({batch},), got {tuple(seqlens.shape)}")
    if seqlens.device.type != "cpu" and seqlens.device != q.device:
        raise ValueError(f"seqlens is on {seqlens.device} but q is on {q.device}")


def _check_table(block_table, k_cache, batch: int, device: torch.device) -> int:
    """Checks of a paged call's block table and page size; returns the tokens a table row holds."""
    if not isinstance(block_table, torch.Tensor) or block_table.dtype != torch.int32:
        kind = block_table.dtype if isinstance(block_table, torch.Tensor) else type(block_table).__name__
        raise ValueError(f"block_table must be an int32 tensor, got {kind}")
    if block_table.dim() != 2 or block_table.shape[0] != batch:
        raise ValueError(f"block_table must have shape ({batch}, max_pages), got {tuple(block_table.shape)}")
    if block_table.device.type != "cpu" and block_table.device != device:
        raise ValueError(f"block_table is on {block_table.device} but q is on {device}")
    num_pages, page_size = k_cache.shape[:2]
    if page_size not in PAGE_SIZES:
        raise ValueError(f"page_size (k_cache.shape[1]) must be a power of two in "
                         f"{PAGE_SIZES[0]}..{PAGE_SIZES[-1]}, got {page_size}")
    if num_pages == 0:
        raise ValueError("the paged caches hold no pages")
    return block_table.shape[1] * page_size


def _to_device(seqlens, block_table, device: torch.device, cache_len: int, num_pages: int):
    """Host lengths and tables are checked (their values, on every call) and copied to `device`.

    Lengths must lie in 0..cache_len (any stride: the kernel takes it); the entries of a host table
    that hold a sequence's tokens must be page indices in 0..num_pages - 1
    (with lengths on the GPU: every entry). Values already on the GPU are not read back (that would
    stall the host): the kernel clamps them.
    """
    host_lens = seqlens is not None and seqlens.device.type == "cpu"
    if host_lens and seqlens.numel() and (int(seqlens.min()) < 0 or int(seqlens.max()) > cache_len):
        what = "(Lmax)" if block_table is None else "(max_pages * page_size, what the block table holds)"
        raise ValueError(f"seqlens must lie in 0..{cache_len} {what}, got "
                         f"{int(seqlens.min())}..{int(seqlens.max())}")
    if block_table is not None and block_table.device.type == "cpu":
        max_pages = block_table.shape[1]
        if seqlens is None or host_lens:
            lengths = torch.full((block_table.shape[0],), cache_len) if seqlens is None else seqlens.long()
            page_size = cache_len // max_pages
            used = torch.arange(max_pages) * page_size < lengths[:, None]                 # (B, max_pages)
            pages = block_table[used]
        else:
            pages = block_table
        if pages.numel() and (int(pages.min()) < 0 or int(pages.max()) >= num_pages):
            raise ValueError(f"block_table holds page indices outside 0..{num_pages - 1} "
                             f"(got {int(pages.min())}..{int(pages.max())})")
        block_table = _copy_checked(block_table, device)
    if host_lens:
        seqlens = _copy_checked(seqlens, device)
    return seqlens, block_table


def _copy_checked(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor whose values were just checked, copied to `device` without waiting for the GPU.
    From pinned memory such a copy reads the host buffer when the stream reaches it, after the caller
    may have rewritten it: a pinned tensor is cloned first into pageable memory, which the copy stages
    before it returns."""
    if device.type == "cuda" and t.is_pinned():
        t = t.clone()
    return t.to(device, non_blocking=True)


_PLANS: dict = {}   # layouts of q, the caches, seqlens, block_table and the options -> _DecodePlan


class _DecodePlan:
    """A checked call's launch: grid, scratch shapes and every non-tensor kernel argument.

    `strides` are q's and the caches' strides as the kernel takes them, `rest` the arguments
    after the block table's strides; `fast` (GPU only, set after the first launch when the
    lengths and table are None or already on the GPU) is the compiled kernel (kernels._plans.Launch).
    """
    __slots__ = ("grid", "out_shape", "part_shape", "counters", "cache_len", "num_pages", "strides",
                 "rest", "options", "fast", "like", "views")

    def __init__(self, grid, out_shape, part_shape=None, counters=0, cache_len=0, num_pages=1,
                 strides=(), rest=(), options=None, like=False):
        self.grid, self.out_shape, self.part_shape, self.counters = grid, out_shape, part_shape, counters
        self.cache_len, self.num_pages, self.strides, self.rest = cache_len, num_pages, strides, rest
        self.options, self.fast = options or {}, None
        self.like = like        # q is contiguous: the output is kernels._plans.new_output's
        self.views = None       # (workspace, partials, lse): views of a stream's shared workspace


def launch_shape(batch: int, heads_kv: int, group: int, cache_len: int, head_dim: int, element_size: int,
                 num_sms: int, paged: bool, lengths: bool, num_splits: int | None = None,
                 block_n: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
                 smem: int = INTERPRETER_PER_SM["smem"], table_ahead: bool | None = None) -> tuple[int, int, int, int]:
    """(S, BLOCK_N, num_warps, num_stages) of a launch; split s reads tiles
    floor(s * n_blocks / S) .. floor((s + 1) * n_blocks / S) - 1 of n_blocks = cdiv(cache_len, BLOCK_N).

    S: choose_splits (the one-wave rule for contiguous caches, its paged rule for paged caches); a
    forced num_splits is kept exactly, up to one tile per split. Unless tiles, warps or stages are
    forced: contiguous long grouped chunks with lengths take LONG_CHUNK_CONFIG; unsplit contiguous launches
    without lengths on a filled grid take, up to FULL_GRID_PROGRAMS_PER_SM programs an SM, the
    launch_config tiles at resident_stages' ring for `smem` bytes of shared memory per SM (all
    programs resident; DEEP_FILLED_CONFIG instead at more than two an SM over long caches,
    deep_filled_grid), and FULL_GRID_CONFIG beyond; paged launches with the page indices a tile
    ahead (table_ahead, None meaning PAGED_TABLE_AHEAD) take resident_stages' ring too, but for
    unsplit ones with lengths past PAGED_UNSPLIT_PER_SM programs an SM (the contiguous call's launch)
    and unsplit ones up to that many over long caches (LONG_CHUNK_CONFIG, paged_long_unsplit;
    paged_ring).
    """
    chosen = block_n is None and num_warps is None and num_stages is None
    cfg_n, cfg_w, cfg_s = launch_config(head_dim, element_size)
    block_n, num_warps, num_stages = block_n or cfg_n, num_warps or cfg_w, num_stages or cfg_s
    n_blocks = cdiv(cache_len, block_n)
    if num_splits is not None:
        splits = num_splits
    else:
        splits = choose_splits(batch, heads_kv, cache_len, block_n, num_sms, paged=paged, lengths=lengths)
    splits = max(1, min(splits, n_blocks))
    if chosen and not paged and long_grouped_chunks(group, splits, (n_blocks // splits) * block_n, block_n, lengths):
        block_n, num_warps, num_stages = LONG_CHUNK_CONFIG
        splits = min(splits, cdiv(cache_len, block_n))
    ring = chosen and paged_ring(batch * heads_kv, splits, num_sms, paged, lengths, cache_len, block_n, table_ahead)
    if chosen and paged_long_unsplit(batch * heads_kv, splits, num_sms, paged, cache_len, block_n):
        block_n, num_warps, num_stages = LONG_CHUNK_CONFIG
    if chosen and full_grid(batch * heads_kv, splits, num_sms, paged, lengths, block_n):
        block_n, num_warps, num_stages = FULL_GRID_CONFIG
    if chosen and deep_filled_grid(batch * heads_kv, splits, num_sms, paged, lengths, block_n, cache_len):
        block_n, num_warps, num_stages = DEEP_FILLED_CONFIG
    if ring or chosen and resident_grid(batch * heads_kv, splits, num_sms, paged, lengths, block_n):
        num_stages = resident_stages(batch * heads_kv * splits, num_sms, smem, block_n, head_dim, element_size)
    return splits, block_n, num_warps, num_stages


def paged_unsplit_filled(programs: int, splits: int, num_sms: int, paged: bool, lengths: bool) -> bool:
    """True for an unsplit paged launch with lengths of more than PAGED_UNSPLIT_PER_SM programs an SM: it
    takes the contiguous call's launch (launch_config's tiles and ring, longest first, no register cap)
    rather than resident_stages' ring, which is 2 stages deep there."""
    return paged and lengths and splits == 1 and programs > PAGED_UNSPLIT_PER_SM * num_sms


def paged_long_unsplit(programs: int, splits: int, num_sms: int, paged: bool, cache_len: int,
                       block_n: int) -> bool:
    """True for an unsplit paged launch on a filled grid (NO_SPLIT_FILL) of up to PAGED_UNSPLIT_PER_SM
    programs an SM over a cache of at least LONG_CHUNK_TOKENS, at the 64-token tiles of D = 65..128: it
    takes LONG_CHUNK_CONFIG (fewer, wider tiles in flight behind each page lookup), without
    resident_stages' ring or a register cap."""
    return (paged and splits == 1 and block_n == 64 and cache_len >= LONG_CHUNK_TOKENS
            and NO_SPLIT_FILL * num_sms <= programs <= PAGED_UNSPLIT_PER_SM * num_sms)


def paged_ring(programs: int, splits: int, num_sms: int, paged: bool, lengths: bool, cache_len: int,
               block_n: int, table_ahead: bool | None = None) -> bool:
    """True for a paged launch whose page indices come a tile ahead (table_ahead, None meaning
    PAGED_TABLE_AHEAD), at launch_config's `block_n`, but for paged_unsplit_filled's and
    paged_long_unsplit's: it takes resident_stages' ring and resident_registers' cap."""
    ahead = PAGED_TABLE_AHEAD if table_ahead is None else table_ahead
    return (paged and ahead and not paged_unsplit_filled(programs, splits, num_sms, paged, lengths)
            and not paged_long_unsplit(programs, splits, num_sms, paged, cache_len, block_n))


def full_grid(programs: int, splits: int, num_sms: int, paged: bool, lengths: bool, block_n: int) -> bool:
    """True for an unsplit contiguous launch without lengths, at 64-token tiles, of more than
    FULL_GRID_PROGRAMS_PER_SM programs an SM: it takes FULL_GRID_CONFIG."""
    return not (paged or lengths) and splits == 1 and block_n == 64 and programs > FULL_GRID_PROGRAMS_PER_SM * num_sms


def deep_filled_grid(programs: int, splits: int, num_sms: int, paged: bool, lengths: bool, block_n: int,
                     cache_len: int) -> bool:
    """True for a resident_grid launch of more than two programs an SM (where resident_stages' ring of
    64-token tiles is 2 stages deep) over a cache of at least DEEP_FILLED_MIN_TOKENS: it takes
    DEEP_FILLED_CONFIG, fewer and deeper programs, and no register cap (_plan: resident_grid is False
    at its 128-token tiles)."""
    return (resident_grid(programs, splits, num_sms, paged, lengths, block_n) and programs > 2 * num_sms
            and cache_len >= DEEP_FILLED_MIN_TOKENS)


def resident_grid(programs: int, splits: int, num_sms: int, paged: bool, lengths: bool, block_n: int) -> bool:
    """True for an unsplit contiguous launch without lengths, at 64-token tiles, of NO_SPLIT_FILL x SMs
    to FULL_GRID_PROGRAMS_PER_SM x SMs programs: the deepest ring at which all are resident
    (resident_stages), registers capped so that they are where a cap binds (resident_registers, _plan)."""
    return (not (paged or lengths) and splits == 1 and block_n == 64
            and NO_SPLIT_FILL * num_sms <= programs <= FULL_GRID_PROGRAMS_PER_SM * num_sms)


def resident_stages(programs: int, num_sms: int, smem: int, block_n: int, head_dim: int, element_size: int) -> int:
    """num_stages of a paged launch whose page indices are loaded a tile ahead, or of an unsplit
    contiguous one on a grid of up to FULL_GRID_PROGRAMS_PER_SM programs an SM (resident_grid): the
    deepest ring of K and V tiles, 2 to 4 (num_stages - 1 tiles in shared memory), at which all the
    launch's programs are resident at once, `smem` bytes of shared memory per SM shared by
    cdiv(programs, SMs) of them. H200 (228 KB an SM, 32 KB of K and V a tile at D = 128): 4 stages
    up to 2 programs per SM, 3 at 3, 2 from 4 on; measured in the module docstring and at
    FULL_GRID_PROGRAMS_PER_SM. Deeper rings do not pay at one program an SM (fp16, Hq=32, D=128,
    six shapes of 128 programs, kernel time over the shipped 64/4/4, median: 64/4/5 1.018, 64/4/6
    1.032, 64/4/7 1.043, 64/8/6 1.113, 128/4/3 0.998, 128/8/3 1.008; B=16 Hkv=8 L=4096 64.0 us,
    cuDNN 64.3, the read kernel 60.7; probes/decode_fullgrid_ring.py DIAG=deep)."""
    tile = 2 * block_n * max(16, pow2(head_dim)) * element_size
    resident = cdiv(programs, num_sms)
    return max(2, min(4, 1 + (smem // resident - PAGED_RING_RESERVE) // tile))


def resident_registers(programs: int, num_sms: int, num_warps: int, regs: int) -> int:
    """maxnreg of a paged launch whose page indices are loaded a tile ahead, or of a resident_grid
    launch where it binds (contiguous: 128 registers at 64/4/2 with or without it, so there it only
    guards other builds): the registers a thread
    may use with all the launch's programs of num_warps warps resident, cdiv(programs, SMs) of them
    an SM (at most PAGED_PROGRAMS_PER_SM), on an SM of `regs` registers; a multiple of 8, at most 255.
    At G = 1 the loop otherwise compiles to 156 registers, three programs an SM, and the paged rule's
    four an SM take two waves; capped at 128 it spills 2-4 (module docstring)."""
    resident = max(1, min(cdiv(programs, num_sms), PAGED_PROGRAMS_PER_SM))
    return min(MAX_REGISTERS, regs // (resident * num_warps * 32) // 8 * 8)


def spread_by_length(batch: int, splits: int, lengths: bool, forced: bool) -> bool:
    """True when a launch deals its chunks out by length wherever the lengths differ (_ragged_chunk):
    lengths passed, B >= 2 and S >= 2 chosen by the rule (a forced num_splits is kept exactly)."""
    return lengths and not forced and batch >= 2 and splits >= 2


def longest_first(batch: int, splits: int, lengths: bool) -> bool:
    """True when an unsplit launch with lengths takes its sequences longest first (_rank_by_length):
    lengths passed, S = 1 and 2 <= B <= LONGEST_FIRST_MAX_BATCH."""
    return lengths and splits == 1 and 2 <= batch <= LONGEST_FIRST_MAX_BATCH


def _plan(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table, block_n, num_warps, num_stages,
          table_ahead=None, maxnreg=None, spread=None):
    """Validate a call and choose its launch (splits, tiles, warps): a _DecodePlan."""
    _check_inputs(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table)
    batch, heads_q, head_dim = q.shape
    if block_table is None:
        _, heads_kv, cache_len, _ = k_cache.shape
        num_pages, page_size = 1, 0
        k_strides, v_strides = k_cache.stride(), v_cache.stride()                 # (b, h, n, d)
    else:
        num_pages, page_size, heads_kv, _ = k_cache.shape
        cache_len = block_table.shape[1] * page_size
        (kp, kn, kh, kd), (vp, vn, vh, vd) = k_cache.stride(), v_cache.stride()
        k_strides, v_strides = (kp, kh, kn, kd), (vp, vh, vn, vd)                 # (page, h, slot, d)
    if batch == 0 or heads_q == 0:
        return _DecodePlan(None, (batch, heads_q, head_dim), cache_len=cache_len, num_pages=num_pages)
    group = heads_q // heads_kv
    chosen = block_n is None and num_warps is None and num_stages is None
    ahead = page_size > 0 and (PAGED_TABLE_AHEAD if table_ahead is None else table_ahead)
    num_sms = sm_count(q.device)
    splits, block_n, num_warps, num_stages = launch_shape(
        batch, heads_kv, group, cache_len, head_dim, q.element_size(), num_sms,
        block_table is not None, seqlens is not None, num_splits, block_n, num_warps, num_stages,
        per_sm(q.device, "smem"), ahead)
    resident = resident_grid(batch * heads_kv, splits, num_sms, page_size > 0, seqlens is not None, block_n)
    ring = paged_ring(batch * heads_kv, splits, num_sms, page_size > 0, seqlens is not None, cache_len,
                      launch_config(head_dim, q.element_size())[0], ahead)
    if maxnreg is None and chosen and (ring or resident):
        cap = resident_registers(splits * batch * heads_kv, num_sms, num_warps, per_sm(q.device, "regs"))
        # a contiguous launch takes only a cap that binds: an explicit 255 changes ptxas's allocation
        # (sm_90, 64/4/4: 160 registers against 128 without; probes/decode_resources.py)
        maxnreg = cap if ring or cap < MAX_REGISTERS else None
    scale = (head_dim ** -0.5 if sm_scale is None else float(sm_scale)) * LOG2E
    n_blocks = cdiv(cache_len, block_n)
    if spread is None:   # the rule's choice; True / False (probes) force it, still only where it applies
        spread = num_splits is None
    spread = bool(spread) and spread_by_length(batch, splits, seqlens is not None, False)
    part_splits = min(n_blocks, RAGGED_SPLIT_LIMIT * splits) if spread else splits
    ranked = longest_first(batch, splits, seqlens is not None)
    rest = (heads_kv, cache_len, num_pages, n_blocks, splits, scale,
            group, head_dim, max(16, pow2(group)), block_n, max(16, pow2(head_dim)),
            merge_step(group, head_dim) if splits > 1 else 2,   # S = 1 merges nothing: one kernel for all
            seqlens is not None, splits > 1,
            # Triton's CPU interpreter multiplies bf16 tiles as raw uint16 bits; give it fp32.
            q.dtype == torch.bfloat16 and interpreting(), merge_rows(group), page_size,
            ahead, batch, part_splits, spread, max(16, pow2(batch)) if spread or ranked else 16, ranked)
    return _DecodePlan((splits, batch * heads_kv), (batch, heads_q, head_dim),
                       (batch, heads_q, part_splits) if splits > 1 else None, batch * heads_kv, cache_len, num_pages,
                       (*q.stride(), *k_strides, *v_strides), rest,
                       dict(num_warps=num_warps, num_stages=num_stages,
                            **({} if maxnreg is None else {"maxnreg": maxnreg})), like=q.is_contiguous())


def _decode(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table=None,
            block_n=None, num_warps=None, num_stages=None, table_ahead=None, maxnreg=None, spread=None):
    """Shared launcher; num_splits=None chooses S (launch_shape), 1 writes the output directly.

    Plan cache (kernels._plans): the first call with a given layout of q, the caches, the
    lengths and the block table (shapes, strides, dtypes, devices, data pointer offsets) and
    the same options is validated and planned; a repeat call looks the plan up, allocates the
    output and launches, on a GPU the compiled kernel directly (the split partials are views of
    the stream's workspace, `_scratch`), every tensor passed as its address (kernels._plans).
    Lengths and tables on the host are still checked and copied on every call (their values
    are not part of the key).
    """
    try:
        key = (layout(q), layout(k_cache), layout(v_cache),
               None if seqlens is None else layout(seqlens),
               None if block_table is None else layout(block_table),
               sm_scale, type(sm_scale), num_splits, type(num_splits), block_n, num_warps, num_stages,
               table_ahead, maxnreg, spread)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError, RuntimeError):   # not tensors, unhashable options: checked below
        key, plan = None, None
    if plan is not None and torch.is_grad_enabled() and (
            q.requires_grad or k_cache.requires_grad or v_cache.requires_grad):
        plan = None                                 # checked (and refused) below
    if plan is not None and plan.fast is not None:
        stream = plan.fast.stream()
        if stream is not None:
            out = new_output(q, plan.like)                                         # (B, Hq, D)
            part, lse, count = _scratch(plan, out, stream)
            # addresses, not tensors: Triton's launcher then asks the driver about none of the nine
            o_ptr, p_ptr, l_ptr, c_ptr = out.data_ptr(), part.data_ptr(), lse.data_ptr(), count.data_ptr()
            if not (o_ptr % ALIGN or p_ptr % ALIGN or l_ptr % ALIGN or c_ptr % ALIGN):
                q_ptr = q.data_ptr()
                plan.fast(stream, q_ptr, k_cache.data_ptr(), v_cache.data_ptr(),
                          q_ptr if seqlens is None else seqlens.data_ptr(),
                          q_ptr if block_table is None else block_table.data_ptr(), o_ptr, p_ptr, l_ptr, c_ptr,
                          *plan.strides, *(block_table.stride() if block_table is not None else (0, 0)),
                          1 if seqlens is None else seqlens.stride(0), *plan.rest)
                return out
    if plan is None:
        plan = _plan(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table,
                     block_n, num_warps, num_stages, table_ahead, maxnreg, spread)
        if key is not None:
            remember(_PLANS, key, plan)
    out = new_output(q, plan.like)                                                 # (B, Hq, D)
    lens, table = _to_device(seqlens, block_table, q.device, plan.cache_len, plan.num_pages)
    if plan.grid is None:                                                          # B = 0 or Hq = 0
        return out
    with on_device(q):                        # Triton launches on the current device
        stream = 0 if interpreting() else current_stream()
        part, lse, count = _scratch(plan, out, stream)
        compiled = _decode_kernel[plan.grid](
            q, k_cache, v_cache, q if lens is None else lens, q if table is None else table,
            out, part, lse, count, *plan.strides, *(table.stride() if table is not None else (0, 0)),
            1 if lens is None else lens.stride(0), *plan.rest, **plan.options)
        if (plan.fast is None and key is not None and not interpreting() and lens is seqlens
                and table is block_table and aligned(out, part, lse, count)):
            plan.fast = Launch(compiled, plan.grid)                    # records the device it ran on
    return out


_WORKSPACE: dict = {}   # (device, stream handle) -> fp32 buffer the split partials of that stream share


def _scratch(plan: _DecodePlan, out: torch.Tensor, stream: int):
    """Split partials (B, Hq, S, D) and log-sum-exps (B, Hq, S) in fp32, and the arrival counters.

    Without splits the kernel reads none of them, and `out` stands in for each. On a GPU, outside
    a CUDA graph capture, the partials are views of one workspace per device and stream, grown to
    the largest launch seen: launches on a stream run one after another and each writes its
    partials before reading them, so they can share it, and a repeat call allocates nothing
    (the views are kept in the plan). In the interpreter and inside a capture (where a graph
    needs buffers of its own pool) each call allocates its own. H200 host, bf16, Hq=32, D=128,
    repeat call before and after (with empty_like for the output), us: B=1 Hkv=32 L=4096 (S=4)
    43.5 -> 17.1, B=1 Hkv=8 L=1024 (S=16) 34.8 -> 22.8, B=16 Hkv=8 L=4096 ragged 45.1 -> 29.4;
    cuDNN's SDPA 30.1 and 31.9 at the first two.
    """
    if plan.part_shape is None:
        return out, out, out
    counters = _counters(out.device, plan.counters, stream)
    part_shape = (*plan.part_shape, plan.out_shape[2])
    if interpreting() or (out.is_cuda and torch.cuda.is_current_stream_capturing()):
        part = torch.empty(part_shape, device=out.device, dtype=torch.float32)
        lse = torch.empty(plan.part_shape, device=out.device, dtype=torch.float32)
        return part, lse, counters
    key = (out.device, stream)
    buf = _WORKSPACE.get(key)
    if plan.views is None or plan.views[0] is not buf:
        n_part = math.prod(part_shape)
        lse_at = cdiv(n_part, 4) * 4                          # the log-sum-exps start 16-byte aligned
        need = lse_at + math.prod(plan.part_shape)
        if buf is None or buf.numel() < need:
            buf = torch.empty(pow2(need), device=out.device, dtype=torch.float32)   # room to grow
            _WORKSPACE[key] = buf
        plan.views = (buf, buf[:n_part].view(part_shape), buf[lse_at:need].view(plan.part_shape))
    return plan.views[1], plan.views[2], counters


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     seqlens: torch.Tensor | None = None, sm_scale: float | None = None,
                     num_splits: int | None = None, block_table: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of one query token per sequence over its KV cache, split across the SMs.

    q (B, Hq, D); k_cache, v_cache (B, Hkv, Lmax, D), Hq a multiple of Hkv, any strides;
    fp16 or bf16, D <= 256. seqlens (B,) integer lengths in 0..Lmax (None: all Lmax; 0 gives
    zeros). sm_scale defaults to 1/sqrt(D). num_splits forces the number of KV splits (at most
    one per BLOCK_N tile; splits read balanced runs of whole tiles); None chooses it from the shape.
    Returns (B, Hq, D) in q's dtype.

    Paged caches: with block_table (B, max_pages) int32, k_cache and v_cache are pools of
    pages (num_pages, page_size, Hkv, D) with any strides, page_size a power of two in
    16..256, and token t of sequence b is slot t % page_size of page block_table[b, t // page_size];
    Lmax is max_pages * page_size. See the module docstring.
    """
    return _decode(q, k_cache, v_cache, seqlens, sm_scale, num_splits, block_table)


def decode_attention_nosplit(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                             seqlens: torch.Tensor | None = None, sm_scale: float | None = None) -> torch.Tensor:
    """Same computation with one program per (batch, kv head): the baseline without split-KV."""
    return _decode(q, k_cache, v_cache, seqlens, sm_scale, 1)


def paged_cache(k_cache: torch.Tensor, v_cache: torch.Tensor, page_size: int,
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A paged copy of contiguous caches (B, Hkv, Lmax, D): (k_pages, v_pages, block_table).

    Each sequence's Lmax tokens fill cdiv(Lmax, page_size) pages (the last one padded with
    zeros); the B * max_pages pages sit in the pool (num_pages, page_size, Hkv, D) in an order
    shuffled by `seed`, so no sequence's pages are adjacent by construction. block_table is
    (B, max_pages) int32 on the caches' device.
    """
    batch, heads_kv, cache_len, head_dim = k_cache.shape
    max_pages = cdiv(cache_len, page_size)
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(batch * max_pages, generator=gen)                       # pool slot of each page
    pools = []
    for cache in (k_cache, v_cache):
        pool = torch.zeros(batch * max_pages, page_size, heads_kv, head_dim, dtype=cache.dtype,
                           device=cache.device)                                     # (num_pages, P, Hkv, D)
        padded = torch.zeros(max_pages * page_size, heads_kv, head_dim, dtype=cache.dtype, device=cache.device)
        for b in range(batch):
            padded[:cache_len] = cache[b].transpose(0, 1)                           # (Lmax, Hkv, D)
            pool[order[b * max_pages:(b + 1) * max_pages].to(cache.device)] = \
                padded.view(max_pages, page_size, heads_kv, head_dim)
        pools.append(pool)
    table = order.view(batch, max_pages).to(device=k_cache.device, dtype=torch.int32)
    return pools[0], pools[1], table


def paged_reference(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor, block_table: torch.Tensor,
                    seqlens: torch.Tensor | None = None, sm_scale: float | None = None,
                    dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Decode attention over paged caches in `dtype`: each sequence's pages gathered, then `reference`."""
    batch, _, head_dim = q.shape
    page_size = k_pages.shape[1]
    full = block_table.shape[1] * page_size
    lengths = [full] * batch if seqlens is None else [int(n) for n in seqlens.tolist()]
    out = torch.zeros(batch, q.shape[1], head_dim, device=q.device, dtype=dtype)
    for b, n in enumerate(lengths):
        pages = block_table[b, :cdiv(n, page_size)].long().to(k_pages.device)
        k = k_pages[pages].flatten(0, 1)[:n].transpose(0, 1)[None]              # (1, Hkv, n, D)
        v = v_pages[pages].flatten(0, 1)[:n].transpose(0, 1)[None]
        if n:
            out[b] = reference(q[b:b + 1], k, v, None, sm_scale, dtype)[0]
    return out


def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              seqlens: torch.Tensor | None = None, sm_scale: float | None = None,
              dtype: torch.dtype = torch.float64, budget_bytes: int = 1 << 30) -> torch.Tensor:
    """Decode attention in `dtype`, one sequence (and a bounded number of KV heads) at a time.

    Each sequence attends to its valid prefix only; a length of 0 gives zeros. Returns
    (B, Hq, D) in `dtype`; at most ~budget_bytes of K and V are converted at once.
    """
    batch, heads_q, head_dim = q.shape
    _, heads_kv, cache_len, _ = k_cache.shape
    group = heads_q // heads_kv
    scale = 1.0 / math.sqrt(head_dim) if sm_scale is None else float(sm_scale)
    lengths = [cache_len] * batch if seqlens is None else [int(n) for n in seqlens.tolist()]
    out = torch.zeros(batch, heads_q, head_dim, device=q.device, dtype=dtype)
    element = torch.tensor([], dtype=dtype).element_size()
    for b, n in enumerate(lengths):
        if n == 0:
            continue
        step = max(1, budget_bytes // (2 * n * head_dim * element))
        for h0 in range(0, heads_kv, step):
            h1 = min(heads_kv, h0 + step)
            k = k_cache[b, h0:h1, :n].to(dtype)                                   # (h, n, D)
            v = v_cache[b, h0:h1, :n].to(dtype)
            qg = q[b, h0 * group:h1 * group].to(dtype).reshape(h1 - h0, group, head_dim)  # (h, G, D)
            p = torch.softmax(qg @ k.transpose(1, 2) * scale, dim=-1)               # (h, G, n)
            out[b, h0 * group:h1 * group] = (p @ v).reshape(-1, head_dim)
    return out
