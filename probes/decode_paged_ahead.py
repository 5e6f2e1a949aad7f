"""Probe: paged decode with each tile's page indices loaded a tile ahead (kernels.flash_decoding
PAGED_TABLE_AHEAD, the first tile's before the length is read), against the per-tile lookup and
the contiguous cache, at the shapes where the committed run's paged rows were more than 5% slower.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_paged_ahead.py
Writes $OUT/decode_paged_ahead.csv (OUT defaults to ./probe_out) and prints a short table last.

Shapes and inputs as the decode study builds them (fp16, Hq = 32, D = 128, 64-token pages shuffled
by study.PAGE_SEED, lengths always passed to the paged cache). Implementations:
  contig       decode_attention on the contiguous cache, lengths only when ragged (the study's `ours`)
  contig_lens  the same with every call's lengths passed (what the paged call is given)
  tile         paged, the shipped per-tile lookup (64-token tiles, 4 warps, 4 stages)
  tile_s2      paged, per-tile lookup with 2 stages
  ahead_s<n>   paged, indices a tile ahead, 64-token tiles, 4 warps, n stages
  *_r128       the same with registers capped at 128 a thread (maxnreg; DIAG=g1: Hkv = Hq shapes)
  shipped      decode_attention's paged plan (DIAG=shipped: the committed run's paged rows > 5% slower)
  *_halfS, *_2xS  the paged rule's S halved or doubled (DIAG=ragged: ragged lengths and their twins)
  contig_<m>xS the contiguous cache with lengths at m times its rule's S (DIAG=ragged_contig)
  s4_free      indices ahead, 4 stages, registers not capped (DIAG=ragged_paged: the paged ragged rows
               against the contiguous cache's four-wave split of the time, equal-length twins)
  plan_<m>xS   decode_attention's paged plan at m times its S, the stages and register cap following
               the launch (DIAG=paged_splits: the committed run's slow equal-length paged rows;
               DIAG=paged_filled: filled grids, equal and ragged lengths; DIAG=paged_unsplit: unsplit
               launches of 4 or more programs an SM, configs without the register cap; DIAG=paged_below:
               the grid's launches below the fill at half the rule's S; DIAG=below2: the rule's
               two programs an SM below the fill against twice its S)
  st4_free     the plan's S with 4 stages, registers not capped (DIAG=filled_equal: filled grids; run at
               bb6bc98, whose kernel ran equal tile counts unsplit on the device, measured and not kept:
               docs/kernels/decode.md, the split rule)
  *_spread     the rule's S times m, chunks dealt out by length (DIAG=big_ragged: ragged grids that fill
               the SMs, where the rule keeps S = 1 at B=64 Hkv=8 L=4096, 85% of the read ceiling)
  paged_nolens decode_attention on the paged cache without lengths (DIAG=nolens: filled equal-length
               grids, where the plan now takes one program a sequence, against `shipped` with lengths)
  static       the plan with every sequence split alike, chunks from Lmax (DIAG=spread and spread2:
               against the shipped plan, which deals chunks out by length where the lengths differ;
               *_static and *_spread: the same choice forced on a variant)
DIAG=paged_filled, measured on an H200 after the run at 810be35 (L2 flushed by a read), us, contig
(S) / shipped paged plan (S) / the plan at a quarter of its S / at half: B=16 Hkv=8 L=1024 19.6 (1) /
23.1 (4) / 19.3 (1) / 21.4 (2); L=4096 63.9 / 69.7 / 65.5 / 67.7; ragged L=4096 36.4 (2) / 36.8 (4) /
60.8 (1) / 51.4 (2); B=4 Hkv=32 L=1024 19.4 / 23.8 / 19.1 / 21.5; L=4096 63.7 / 70.5 / 65.2 / 68.1;
ragged B=16 Hkv=8 L=32768 251.4 (8) / 256.1 (8) / 368.6 (2) / 365.7 (4); B=16 Hkv=32 L=1024 65.7 (1) /
67.8 (1); ragged B=64 Hkv=8 L=4096 122.9 (1) / 152.5 (1); L=32768 921.4 (8) / 958.9 (8) / 1117.0 (2) /
996.3 (4). On a filled grid, equal lengths want one program a sequence (S=1 within 3% of the
contiguous cache) and ragged ones the split (S=1 1.67x): the host cannot tell them apart.
At ragged B=64 L=4096 (S=1 either way) the paged launch's 128-register cap and 2-stage ring cost
24%; the default set's ahead_s4 (4 stages, no cap) took 132.9 us there (1.08x).
After the run at da7f2b4 (same host, us, contig / the call as planned): DIAG=nolens, paged without
lengths at S=1 against the paged split with them: B=16 Hkv=8 L=1024 19.3 / 19.1 (22.7 split), L=4096
62.4 / 64.6 (68.9), L=32768 461.6 / 490.4 (483.9), L=131072 1828.1 / 1936.7 (1922.4); B=4 Hkv=32
L=1024 18.8 / 18.8 (23.5), L=16384 234.9 / 240.7 (244.1); B=64 Hkv=8 L=32768 1850.2 / 1878.7
(1911.7). DIAG=big_ragged, the paged plan at 1 / 2 / 4 times its S (1) and the contiguous cache at
2 and 4 times its own: ragged B=64 Hkv=8 L=4096 151.0 / 133.3 / 135.7, contiguous 121.0 (S=1) /
124.1 / 129.4; its lengths all equal 245.2 / 247.9 / 254.6, contiguous 237.2 / 248.4 / 252.3 (hence
kernels.flash_decoding.PAGED_FILLED_MIN_SPLITS).
Every paged launch takes choose_splits' paged S. Each implementation is checked against the float64
reference before it is timed; CUPTI kernel time with the L2 flushed (decode_balance's helpers).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)

import torch  # noqa: E402

fd, study = db.fd, db.study
SHAPES = [  # batch, heads_kv, cache_len, ragged
    (1, 8, 1024, False), (1, 8, 4096, False), (1, 8, 16384, False), (1, 32, 1024, False), (4, 8, 1024, False),
    (4, 8, 16384, False), (16, 8, 4096, True), (64, 8, 4096, True), (16, 8, 4096, False), (1, 8, 131072, False),
]
VARIANTS = {  # name: (table_ahead, BLOCK_N, warps, stages, maxnreg)
    "tile": (False, None, None, None, None), "tile_s2": (False, 64, 4, 2, None),
    "ahead_s4": (True, 64, 4, 4, None), "ahead_s3": (True, 64, 4, 3, None), "ahead_s2": (True, 64, 4, 2, None),
}
if os.environ.get("DIAG") == "g1":   # one query head a KV head (Hkv = Hq = 32), registers capped or not
    SHAPES = [(1, 32, 16384, False), (1, 32, 131072, False), (4, 32, 1024, False), (4, 32, 16384, False),
              (16, 32, 16384, False), (1, 8, 16384, False), (16, 8, 4096, True)]
    VARIANTS = {"tile": (False, None, None, None, None), "ahead_s2": (True, 64, 4, 2, None),
                "ahead_s2_r128": (True, 64, 4, 2, 128), "tile_s2_r128": (False, 64, 4, 2, 128)}
if os.environ.get("DIAG") == "shipped":   # decode_attention's paged plan against the per-tile lookup
    SHAPES = [(b, h, n, False) for b, h, n in (
        (1, 8, 1024), (1, 8, 4096), (1, 8, 16384), (1, 8, 32768), (1, 32, 4096), (1, 32, 16384), (1, 32, 32768),
        (1, 32, 131072), (4, 8, 1024), (4, 8, 4096), (4, 32, 1024), (4, 32, 4096), (4, 32, 16384),
        (4, 32, 32768), (16, 8, 1024), (16, 32, 16384))] + [(16, 8, 4096, True), (64, 8, 4096, True)]
    VARIANTS = {"tile": (False, None, None, None, None), "shipped": (None, None, None, None, None)}
if os.environ.get("DIAG") == "ragged":   # lengths that differ: deeper rings, fewer or more splits
    SHAPES = [(16, 8, 4096, True), (64, 8, 4096, True), (4, 8, 32768, True), (16, 8, 32768, True),
              (16, 8, 4096, False), (64, 8, 4096, False)]
    VARIANTS = {"shipped": (None, None, None, None, None), "s4": (True, 64, 4, 4, 128),
                "s3": (True, 64, 4, 3, 128), "s4_halfS": (True, 64, 4, 4, 128, 0.5),
                "s2_2xS": (True, 64, 4, 2, 128, 2.0), "s4_2xS": (True, 64, 4, 4, 128, 2.0)}
if os.environ.get("DIAG") == "ragged_paged":   # paged ragged rows against contiguous's four waves (then the rule)
    SHAPES = [(4, 8, 32768, True), (4, 8, 4096, True), (16, 8, 4096, True), (64, 8, 4096, True),
              (16, 8, 32768, True), (4, 8, 32768, False), (16, 8, 4096, False)]
    VARIANTS = {"shipped": (None, None, None, None, None), "s4": (True, 64, 4, 4, 128),
                "s4_free": (True, 64, 4, 4, None), "s3": (True, 64, 4, 3, 128),
                "s4_halfS": (True, 64, 4, 4, 128, 0.5), "s2_2xS": (True, 64, 4, 2, 128, 2.0),
                "s4_2xS": (True, 64, 4, 4, 128, 2.0)}
if os.environ.get("DIAG") == "paged_splits":   # the paged rule's S scaled, stages and registers as planned
    SHAPES = [(1, 8, 1024, False), (1, 8, 4096, False), (1, 8, 16384, False), (1, 8, 32768, False),
              (1, 8, 131072, False), (1, 32, 4096, False), (4, 32, 1024, False), (4, 8, 4096, False),
              (4, 8, 32768, False), (16, 8, 1024, False)]
    VARIANTS = {"shipped": (None, None, None, None, None),
                **{f"plan_{m}xS": (None, None, None, None, None, m) for m in (0.25, 0.5, 2.0)}}
if os.environ.get("DIAG") == "paged_filled":   # filled grids (B * Hkv >= 0.9 x SMs): the paged rule's S scaled
    SHAPES = [(16, 8, 1024, False), (16, 8, 4096, False), (16, 8, 4096, True), (4, 32, 1024, False),
              (4, 32, 4096, False), (16, 8, 32768, True), (16, 32, 1024, False), (64, 8, 4096, True),
              (64, 8, 32768, True)]
    VARIANTS = {"shipped": (None, None, None, None, None),
                **{f"plan_{m}xS": (None, None, None, None, None, m) for m in (0.25, 0.5)}}
if os.environ.get("DIAG") == "paged_below":   # launches below the fill: the paged rule's S halved (2 programs an SM)
    SHAPES = [(b, h, n, False) for b, h in ((1, 8), (1, 32), (4, 8)) for n in (1024, 4096, 16384, 32768, 131072)]
    VARIANTS = {"shipped": (None, None, None, None, None),
                **{f"plan_{m}xS": (None, None, None, None, None, m) for m in (0.5,)}}
if os.environ.get("DIAG") == "paged_unsplit":   # unsplit paged launches of 4 or more programs an SM: configs
    SHAPES = [(64, 8, 1024, False), (64, 8, 4096, False), (64, 8, 4096, True), (16, 32, 1024, False),
              (16, 32, 4096, False), (64, 32, 1024, False)]
    VARIANTS = {"shipped": (None, None, None, None, None), "ahead_s4": (True, 64, 4, 4, None),
                "ahead_s3": (True, 64, 4, 3, None), "ahead128_s2": (True, 128, 4, 2, None),
                "ahead128_s3": (True, 128, 4, 3, None)}
if os.environ.get("DIAG") == "filled_equal":   # filled grids: equal tile counts run unsplit (FILLED), rings, S=2
    SHAPES = [(16, 8, 1024, False), (16, 8, 4096, False), (16, 8, 4096, True), (4, 32, 1024, False),
              (4, 32, 4096, False), (16, 8, 32768, False), (16, 8, 32768, True), (64, 8, 4096, True),
              (64, 8, 32768, False), (16, 32, 1024, False)]
    VARIANTS = {"shipped": (None, None, None, None, None), "st4_free": (True, 64, 4, 4, None),
                "plan_0.25xS": (None, None, None, None, None, 0.25), "plan_0.5xS": (None, None, None, None, None, 0.5)}
if os.environ.get("DIAG") == "below2":   # below the fill: the rule's two programs an SM against twice its S
    SHAPES = [(4, 8, n, False) for n in (1024, 4096, 16384, 32768, 131072)] + [
        (4, 8, 4096, True), (4, 8, 32768, True), (1, 8, 4096, False), (1, 8, 131072, False),
        (1, 32, 16384, False), (1, 32, 32768, False), (1, 32, 131072, False)]
    VARIANTS = {"shipped": (None, None, None, None, None),
                "plan_2xS": (None, None, None, None, None, 2.0)}
if os.environ.get("DIAG") == "ragged_contig":   # the contiguous cache with lengths: more splits
    SHAPES = [(4, 8, 32768, True), (4, 8, 32768, False), (1, 8, 32768, True), (4, 8, 4096, True),
              (16, 8, 32768, True), (16, 8, 4096, True), (16, 8, 4096, False)]
    VARIANTS = {"shipped": (None, None, None, None, None),
                **{f"contig_{m}xS": ("contiguous", None, None, None, None, m) for m in (2, 4, 8)}}
if os.environ.get("DIAG") == "spread":   # chunks dealt out by length (_ragged_chunk) against Lmax's chunks
    SHAPES = [(4, 8, 32768, True), (4, 8, 4096, True), (16, 8, 4096, True), (64, 8, 4096, True),
              (16, 8, 32768, True), (4, 8, 32768, False), (16, 8, 4096, False), (16, 8, 1024, False),
              (4, 32, 1024, False), (64, 8, 4096, False)]
    VARIANTS = {"shipped": (None, None, None, None, None), "static": (None, None, None, None, None, 1.0, False),
                "s2_2xS_static": (True, 64, 4, 2, 128, 2.0, False),
                "plan_2xS_spread": (None, None, None, None, None, 2.0, True),
                **{f"contig_{m}xS_{'spread' if on else 'static'}": ("contiguous", None, None, None, None, m, on)
                   for m in (0.25, 0.5, 1.0) for on in (True, False)}}
if os.environ.get("DIAG") == "spread2":   # the same with one body a path, and the rules that go with it
    SHAPES = [(4, 8, 32768, True), (4, 8, 4096, True), (16, 8, 4096, True), (64, 8, 4096, True),
              (16, 8, 32768, True), (4, 8, 32768, False), (4, 8, 4096, False), (16, 8, 4096, False),
              (16, 8, 1024, False), (4, 32, 1024, False), (4, 32, 4096, False)]
    VARIANTS = {"shipped": (None, None, None, None, None), "static": (None, None, None, None, None, 1.0, False),
                **{f"plan_{m}xS_spread": (None, None, None, None, None, m, True) for m in (0.25, 0.5)},
                **{f"contig_{m}xS_static": ("contiguous", None, None, None, None, m, False) for m in (1, 2, 4)}}
if os.environ.get("DIAG") == "nolens":   # filled equal-length grids: the paged call without lengths (one
    # program a sequence, as the contiguous cache takes) against it with them (the split), as the study now calls
    SHAPES = [(16, 8, n, False) for n in (1024, 4096, 32768, 131072)] + [
        (4, 32, n, False) for n in (1024, 4096, 16384)] + [(64, 8, 1024, False), (16, 32, 1024, False),
                                                          (64, 8, 32768, False)]
    VARIANTS = {"shipped": (None, None, None, None, None), "paged_nolens": ("nolens", None, None, None, None)}
if os.environ.get("DIAG") == "big_ragged":   # ragged filled grids: more splits than the rule's, dealt by length
    SHAPES = [(64, 8, 4096, True), (64, 8, 32768, True), (16, 8, 4096, True), (64, 8, 4096, False)]
    VARIANTS = {"shipped": (None, None, None, None, None),
                **{f"plan_{m}xS_spread": (None, None, None, None, None, m, True) for m in (2, 4)},
                **{f"contig_{m}xS_spread": ("contiguous", None, None, None, None, m, True) for m in (1, 2, 4, 8)}}
if db.DRY:
    SHAPES = [(2, 2, 300, True), (1, 2, 200, False), (2, 2, 128, False)]
    if not os.environ.get("DIAG"):   # a DIAG's own variants are run as they are, on the tiny shapes
        VARIANTS = {"tile": (False, None, None, None, None), "ahead_s2": (True, 16, 2, 2, 128),
                    "ahead_halfS": (True, 16, 2, 2, 128, 0.5), "contig_2xS": ("contiguous", None, None, None, None, 2)}


def candidates(inputs, num_sms):
    """The contiguous calls and VARIANTS on a paged copy of the cache: ({name: factory}, {name: S})."""
    q, k, v, lens = inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["seqlens"]
    batch, heads_kv, cache_len, _ = k.shape
    ragged = inputs["ragged"]
    kp, vp, tab = fd.paged_cache(k, v, study.PAGE_SIZE, seed=study.PAGE_SEED)
    group = db.HQ // heads_kv
    cands = {"contig": lambda: (lambda: fd.decode_attention(q, k, v, lens if ragged else None)),
             "contig_lens": lambda: (lambda: fd.decode_attention(q, k, v, lens))}
    splits = {"contig": fd.planned_splits(batch, heads_kv, cache_len, db.D, 2, num_sms, group, False, ragged),
              "contig_lens": fd.planned_splits(batch, heads_kv, cache_len, db.D, 2, num_sms, group, False, True)}
    paged_s = fd.planned_splits(batch, heads_kv, cache_len, db.D, 2, num_sms, group, True, True)
    for name, (ahead, bn, w, st, regs, *extra) in VARIANTS.items():
        if ahead == "nolens":                  # the paged cache without lengths: every sequence holds its pages
            if ragged or cache_len % study.PAGE_SIZE:
                continue
            cands[name] = lambda: (lambda: fd.decode_attention(q, kp, vp, None, block_table=tab))
            splits[name] = fd.planned_splits(batch, heads_kv, cache_len, db.D, 2, num_sms, group, True, False)
            continue
        contiguous = ahead == "contiguous"     # the contiguous cache with lengths, S scaled from its own rule
        base_s = splits["contig_lens"] if contiguous else paged_s
        forced = max(1, int(base_s * extra[0])) if extra else None     # a multiple of the rule's S
        spread = extra[1] if len(extra) > 1 else None                   # chunks by length: None = the rule
        kk, vv, tt, aa = (k, v, None, None) if contiguous else (kp, vp, tab, ahead)
        cands[name] = (lambda kk=kk, vv=vv, tt=tt, a=aa, bn=bn, w=w, st=st, regs=regs, s=forced, sp=spread:
                       (lambda: fd._decode(q, kk, vv, lens, None, s, tt, bn, w, st, a, regs, sp)))
        splits[name] = fd.launch_shape(batch, heads_kv, group, cache_len, db.D, 2, num_sms, not contiguous,
                                       True, forced, bn, w, st)[0]
    return cands, splits


def main():
    table, path = db.sweep_to_csv(SHAPES, "paged_ahead", candidates, "decode_paged_ahead")
    kernels = db.kernel_rows(os.path.join(db.OUT, "decode_paged_ahead_kernels.csv"))
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}, {study.PAGE_SIZE}-token pages; (S): splits; "
          "x: over contig")
    db.print_ratios(table, ["contig", "contig_lens", *VARIANTS], "contig")
    shown = sorted({(r["num_stages"], r["regs"], r["spills"], r["shared"]) for r in kernels if r["paged"]},
                   key=db._sort_key)
    print("paged kernels (stages, regs, spills, shared bytes): " + "; ".join(map(str, shown)))
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or torch.cuda.is_available()):
        sys.exit("decode_paged_ahead needs a CUDA GPU")
    main()
