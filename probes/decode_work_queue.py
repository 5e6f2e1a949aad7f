"""Probe: split-KV decode whose chunks are handed out on the device, against decode_attention
(measured and not kept: the numbers below).

The shipped kernel (kernels.flash_decoding) fixes each program's chunk when the launch is
planned, from the cache shape alone: the plan does not read the lengths, so with ragged lengths
the programs of short sequences exit at once while those of long ones hold the launch
(DIAG=ragged_contig of probes/decode_paged_ahead.py: 1.6x between S=4 and S=16 at B=4 Hkv=8
Lmax=32768, and the other way, 1-4%, at equal lengths). Here a persistent grid (PROGRAMS_PER_SM
programs an SM) takes work items (b, kv head, chunk of CHUNK tokens) from a counter in global
memory, one atomic add each, first chunks of every sequence first; an item past its sequence's
length costs a length load. Each chunk writes its partial and log-sum-exp, and the last chunk of
a (batch, kv head) to arrive merges them (kernels.flash_decoding._merge_group). The last program
to finish resets the counters, so consecutive launches on a stream share them.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_work_queue.py
Variants q<chunk>s<stages>p<programs an SM>; ours_4xS: decode_attention with S forced to four
times the plan's (at the time the plan's one-wave S; four waves were the rule from then until
chunks were dealt out by length). Compiled for sm_90, the
tile loop pipelines as the shipped kernel's does: 8 async copies, 104 KB of shared memory at 4
stages.

Measured on an H200 (fp16, Hq=32, D=128, CUPTI kernel time, L2 flushed; at 6c1e680, before
the four-wave rule), us, ours (the plan's S) / ours_4xS / the best queue variant:
ragged B=4 Hkv=8 Lmax=32768 103.7 (S=4) / 66.1 / 65.7 (q1024s2p4); its equal-length twin 134.2 /
137.7 / 137.8 (q2048s2p4); ragged B=1 Lmax=32768 36.7 (S=16) / 42.2 / 39.7 (q2048s4p2); ragged B=4
Lmax=4096 18.8 / 17.6 / 19.5 (q512s4p2); ragged B=16 Lmax=32768 260.2 / 259.5 / 261.9; ragged B=16
Lmax=4096 43.0 / 43.6 / 46.7; its twin 78.1 / 81.2 / 76.7 (q1024s2p4); ragged B=64 Lmax=4096 132.0 /
129.6 / 135.9. The queue is no faster than more splits fixed on the host where lengths differ, and
slower at equal lengths than one wave; the shipped kernel took the host-side split for B >= 2
(four waves, later replaced by chunks dealt out by length), and nothing launches this kernel.
Writes $OUT/decode_work_queue.csv and prints a short table last (decode_balance's helpers: every
variant checked against the float64 reference before it is timed, CUPTI kernel time, L2 flushed).
PROBE_DRYRUN=1 checks the kernel in Triton's CPU interpreter on small ragged shapes.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from kernels._device import pow2  # noqa: E402

fd, study = db.fd, db.study
PROGRAMS_PER_SM = 4
SHAPES = [(4, 8, 32768, True), (4, 8, 32768, False), (1, 8, 32768, True), (4, 8, 4096, True),
          (16, 8, 32768, True), (16, 8, 4096, True), (16, 8, 4096, False), (64, 8, 4096, True)]
# (chunk tokens, num_stages, programs an SM): 4 stages take 104 KB of shared memory (two programs
# an SM on an H200), 2 stages 39 KB
VARIANTS = [(512, 4, 2), (1024, 4, 2), (2048, 4, 2), (1024, 2, 4), (2048, 2, 4)]
if db.DRY:
    SHAPES, VARIANTS = [(3, 2, 300, True), (2, 2, 200, False)], [(64, 4, 2), (128, 2, 4)]


@triton.jit
def _queue_kernel(Q, K, V, Lens, Out, Part, Lse, Count, Work,
                  stride_qb, stride_qh, stride_kb, stride_kh, stride_kn, stride_vb, stride_vh, stride_vn,
                  heads_kv, cache_len, n_chunks, total_items, qk_scale,
                  GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, CHUNK: tl.constexpr,
                  BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                  BLOCK_S: tl.constexpr, BLOCK_MG: tl.constexpr, UPCAST_DOT: tl.constexpr):
    # q (B, Hq, D) and the caches (B, Hkv, Lmax, D) with unit stride along D; Out (B, Hq, D),
    # Part (B, Hq, n_chunks, D) fp32, Lse (B, Hq, n_chunks) fp32, Count (B * Hkv,) int32 zeros,
    # Work (2,) int32 zeros: the next item and the programs that have finished.
    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_g = offs_g < GROUP
    mask_d = offs_d < HEAD_DIM
    out_mask = mask_g[:, None] & mask_d[None, :]
    programs = tl.num_programs(0)
    B_H = total_items // n_chunks                                # items are chunk-major: c * (B * Hkv) + bh
    item = tl.atomic_add(Work, 1)
    while item < total_items:
        c = item // B_H
        bh = item % B_H
        b = bh // heads_kv
        h = bh % heads_kv
        b64 = b.to(tl.int64)
        seqlen = tl.minimum(tl.maximum(tl.load(Lens + b).to(tl.int32), 0), cache_len)
        start = c * CHUNK
        rows = b64 * (heads_kv * GROUP) + h * GROUP + offs_g
        if start < seqlen:
            end = tl.minimum(start + CHUNK, seqlen)
            q = tl.load(Q + b64 * stride_qb + (h * GROUP + offs_g)[:, None] * stride_qh + offs_d[None, :],
                        mask=out_mask, other=0.0)
            m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
            l_i = tl.zeros([BLOCK_G], tl.float32)
            acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
            start64 = start.to(tl.int64)
            k_ptrs = (K + b64 * stride_kb + h.to(tl.int64) * stride_kh + (start64 + offs_n)[:, None] * stride_kn
                      + offs_d[None, :])
            v_ptrs = (V + b64 * stride_vb + h.to(tl.int64) * stride_vh + (start64 + offs_n)[:, None] * stride_vn
                      + offs_d[None, :])
            for n0 in range(start, end, BLOCK_N):
                mask_n = (n0 + offs_n) < end
                m_i, l_i, acc = fd._attend_tile(q, k_ptrs, v_ptrs, mask_n, mask_d, m_i, l_i, acc, qk_scale,
                                                UPCAST_DOT)
                k_ptrs += BLOCK_N * stride_kn
                v_ptrs += BLOCK_N * stride_vn
            tl.store(Part + (rows * n_chunks + c)[:, None] * HEAD_DIM + offs_d[None, :], acc / l_i[:, None],
                     mask=out_mask)
            tl.store(Lse + rows * n_chunks + c, m_i + tl.math.log2(l_i), mask=mask_g)
            tl.debug_barrier()
            arrived = tl.atomic_add(Count + bh, 1, sem="acq_rel", scope="gpu")
            if arrived == tl.cdiv(seqlen, CHUNK) - 1:              # the last chunk of this sequence
                fd._merge_group(Part, Lse, Out, b64 * (heads_kv * GROUP) + h * GROUP, tl.cdiv(seqlen, CHUNK),
                                n_chunks, GROUP, HEAD_DIM, BLOCK_MG, BLOCK_S, BLOCK_D)
                tl.store(Count + bh, 0)
        else:
            if (c == 0) & (seqlen == 0):                           # an empty sequence attends to nothing
                zero = tl.zeros([BLOCK_G, BLOCK_D], tl.float32).to(Out.dtype.element_ty)
                tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :], zero, mask=out_mask)
        item = tl.atomic_add(Work, 1)
    done = tl.atomic_add(Work + 1, 1, sem="acq_rel", scope="gpu")
    if done == programs - 1:                                       # every other program has left its loop
        tl.store(Work, 0)
        tl.store(Work + 1, 0)


_SCRATCH: dict = {}


def queue_decode(q, k, v, lens, chunk: int, programs_per_sm: int = PROGRAMS_PER_SM,
                 block_n: int = 64, num_warps: int = 4, num_stages: int = 4):
    """decode_attention(q, k, v, lens) with chunks of `chunk` tokens handed out on the device."""
    batch, heads_q, head_dim = q.shape
    _, heads_kv, cache_len, _ = k.shape
    assert q.stride(2) == 1 and k.stride(3) == 1 and v.stride(3) == 1 and chunk % block_n == 0
    group = heads_q // heads_kv
    n_chunks = db.cdiv(cache_len, chunk)
    total = batch * heads_kv * n_chunks
    key = (q.device, batch, heads_q, n_chunks, head_dim)
    if key not in _SCRATCH:                                        # zeroed once; the kernel leaves them zero
        _SCRATCH[key] = (torch.empty(batch, heads_q, n_chunks, head_dim, device=q.device, dtype=torch.float32),
                         torch.empty(batch, heads_q, n_chunks, device=q.device, dtype=torch.float32),
                         torch.zeros(batch * heads_kv, device=q.device, dtype=torch.int32),
                         torch.zeros(2, device=q.device, dtype=torch.int32))
    part, lse, count, work = _SCRATCH[key]
    out = torch.empty_like(q)
    grid = (min(total, programs_per_sm * db.sm_count(q.device)),)
    _queue_kernel[grid](q, k, v, lens, out, part, lse, count, work,
                        q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
                        v.stride(0), v.stride(1), v.stride(2),
                        heads_kv, cache_len, n_chunks, total, head_dim ** -0.5 * fd.LOG2E,
                        GROUP=group, HEAD_DIM=head_dim, CHUNK=chunk, BLOCK_G=max(16, pow2(group)),
                        BLOCK_N=block_n, BLOCK_D=max(16, pow2(head_dim)),
                        BLOCK_S=fd.merge_step(group, head_dim), BLOCK_MG=fd.merge_rows(group),
                        UPCAST_DOT=q.dtype == torch.bfloat16 and db.DRY,
                        num_warps=num_warps, num_stages=num_stages)
    return out


def candidates(inputs, num_sms):
    """decode_attention with the lengths and the VARIANTS: ({name: factory}, {name: splits or chunks})."""
    q, k, v, lens = inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["seqlens"]
    batch, heads_kv, cache_len, _ = k.shape
    cands = {"ours": lambda: (lambda: fd.decode_attention(q, k, v, lens))}
    splits = {"ours": fd.planned_splits(batch, heads_kv, cache_len, db.D, 2, num_sms, db.HQ // heads_kv, False, True)}
    bn = 16 if db.DRY else 64
    more = min(4 * splits["ours"], db.cdiv(cache_len, bn))        # the ragged finding: more splits, fixed on the host
    cands["ours_4xS"] = lambda: (lambda: fd.decode_attention(q, k, v, lens, num_splits=more))
    splits["ours_4xS"] = more
    for chunk, stages, per_sm in VARIANTS:
        name = f"q{chunk}s{stages}p{per_sm}"
        cands[name] = (lambda c=chunk, st=stages, p=per_sm:
                       (lambda: queue_decode(q, k, v, lens, c, p, block_n=bn, num_stages=st)))
        splits[name] = db.cdiv(cache_len, chunk)
    return cands, splits


def main():
    table, path = db.sweep_to_csv(SHAPES, "work_queue", candidates, "decode_work_queue")
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}, lengths passed; (S): splits or chunks; "
          "x: over ours")
    db.print_ratios(table, ["ours", "ours_4xS", *(f"q{c}s{st}p{p}" for c, st, p in VARIANTS)], "ours", width=16)
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or torch.cuda.is_available()):
        sys.exit("decode_work_queue needs a CUDA GPU")
    main()
