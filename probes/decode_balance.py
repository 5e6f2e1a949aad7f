"""Probe: split-KV decode (kernels.flash_decoding) against forced split counts, cuDNN, FA2 and a read
of the same size, on one GPU.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_balance.py
Writes $OUT/decode_balance.csv (OUT defaults to ./probe_out) and prints a short table last.

Shapes follow the decode study (rooflab/studies/decode.py: Hq = 32, D = 128, fp16, inputs from
study.make_inputs, float64 reference from study.reference, cuDNN and FA2 from study.impls():
sdpa_cudnn and sdpa_flash). Implementations of ours:
  ours     decode_attention as shipped (contiguous: the one-wave rule's S, choose_splits, over balanced
           chunks, grouped merge; the same S as `wave`)
  S=<n>    a forced split count over balanced chunks (S=1: decode_attention_nosplit); the sweep holds
           the one-wave rule's count (choose_splits), shown as `wave`
  read     rooflab.ceilings' read kernel over a buffer of the KV bytes (best of two tilings)
Extra groups: `paged` (64-token pages as the study builds them, lengths passed: ours with
choose_splits' paged S, forced S; at B=16 Hkv=8 L=1024 in full also the contiguous cache with
lengths at the same S, two tilings and 16-token pages), `config` (BLOCK_N, warps, stages at
L=1024 and at B=4 L=16384) and two shapes where B * Hkv divides the SM count badly (B=3 and B=25:
the sweep holds the wave-filling counts S=11 and S=5 that were measured against the one-wave rule).
DIAG=losses: only the committed run's shapes slower than cuDNN (B=64 and B=16 Hkv=32 at 1024-4096
tokens), S up to 4 and eight (BLOCK_N, warps, stages) configs, the shipped one first.
SHAPES="4,32,1024;16,8,1024" (any DIAG): only those (B, Hkv, L) shapes, each with forced S and the
DIAG's configs; PROBE_DTYPE=bfloat16 for bf16 (the H100 run at f86f589 lost to cuDNN at these two
shapes in bf16, 0.975x and 0.978x, 128 unsplit programs on 132 SMs; fp16 tied):
    DIAG=losses SHAPES="4,32,1024;16,8,1024" PROBE_DTYPE=bfloat16 python3 probes/decode_balance.py
PROBE_HQ and PROBE_HEAD_DIM set Hq and D (32 and 128); PROBE_PAGED=1 adds paged rows of the SHAPES (the
first in full, with the forced tilings PAGED_CONFIGS="64x4x3,32x4x4"), e.g. the held-out head_dim-64
shape whose paged layout ran 0.927 of the contiguous speed (probes/heldout.py, H100 GPU-d693ff5a at
7b90060; 0.925 at f87c302):
    SHAPES="16,2,8192" PROBE_HQ=16 PROBE_HEAD_DIM=64 PROBE_PAGED=1 PROBE_DTYPE=bfloat16 python3 probes/decode_balance.py
Measured at 7b90060 (H100 GPU-d693ff5a, kernel time, us; the H100 run of that commit had both as
ties, 0.982x and 0.984x): ours 25.0-25.6 against cuDNN 24.8-25.0 (0.97-0.99x) in both dtypes, no forced
S faster; of the eight configs 64x4x3 was the fastest at every 128-program launch tried but one,
1.5-2.5% ahead of the shipped 64x4x4 at L=1024 and 2048 (bf16 B=4 Hkv=32 L=1024 24.6 against 25.0,
B=16 Hkv=8 24.9 against 25.4, B=4 Hkv=32 L=2048 45.3 against 46.0, fp16 B=8 Hkv=8 L=1024 S=2 15.4
against 15.8; fp16 alike) and 0.3-0.9% at 268-537 MB (fp16 B=1 Hkv=8 L=131072 173.9 against 175.4);
the one is B=1 Hkv=8 L=16384 S=16 (26.9 against 26.8). At 512 programs (B=64 Hkv=8 L=4096) it ran
10% behind FULL_GRID_CONFIG's 128x4x2 (376.1 against 340.3). resident_stages keeps 4 stages at
one program an SM: its H200 measurements did not include 3, and an H100 alone does not set it.
Paged at head_dim 64 (6e68086, H100 GPU-53e1c65c, bf16, B=16 Hq=16 Hkv=2 L=8192, 67 MB, us): contiguous
ours 26.7 at S=4 (cuDNN 27.3, FA2 32.4, the read 22.4), with lengths 27.2; paged ours 28.1 at S=4 (0.95
of the contiguous speed), paged forced S=2, 4 and 8 38.9, 27.6 and 29.9 against the contiguous cache with
lengths at the same S 34.7, 26.8 and 27.8 (the gather's cost 3-12%); 16-token pages 30.4; paged tiles
64x4x3 31.3, 32x4x4 46.0; contiguous tiles 128x8x3 27.1, 64x2x4 30.3, 64x8x4 32.0. Again with
PAGED_CONFIGS=128x8x3,128x8x2,128x4x3,256x8x2 (H100 GPU-c8dfcfde): paged ours 28.2, those tiles 28.8,
39.5, 28.9 and 34.3; forced S=4 27.6 paged and 26.8 contiguous with lengths, where the rule's S=4 takes
28.2 and 27.3: at both runs the same split count forced ran 2% faster than chosen, whose launch deals
chunks out by length (spread_by_length, part_splits = 4 S) even where the lengths are equal.
PROBE_SPLIT_LIMIT=1 runs the rule's launch with S slots a row instead of RAGGED_SPLIT_LIMIT * S (the slots'
share of that 2%).
DIAG=fullgrid: unsplit launches on a filled grid (B * Hkv >= 0.9 x SMs) up to L=131072, ours
(FULL_GRID_CONFIG) against the 64 x 4 x 4 tiles it replaced and 64 x 4 x 3.
DIAG=large: the KV reads of 268-537 MB that the c3249fa run read under 95% of the 4.69 TB/s read
ceiling on 128-program launches (B=1 Hkv=8 L=131072 0.92, B=4 Hkv=8 L=32768 0.94, B=1 Hkv=32
L=32768 0.945, B=1 Hkv=32 and B=4 Hkv=8 L=16384 0.90), while the calibrate job read 512 MiB at
0.99 of it: forced S up to 264 and 528 programs (two and four an SM, no SM idle) and six tilings,
beside cuDNN, FlashAttention-2 and the read kernel over the same bytes.
Measured at f35008f (H200 GPU-d7868900, fp16, us, kernel time): the read over the same bytes 59.7 at
268 MB (4.50 TB/s, 0.96 of the c3249fa run's 4.69) and 115.9-116.1 at 537 MB (4.63, 0.99); ours 63.6-64.0
and 120.8-124.1 (0.93-0.96 of the read), cuDNN 64.7-65.1 and 122.0-123.6. No forced S beat the rule's
(B=1 Hkv=8 L=131072: S=16 124.1, S=15 124.2, S=32 126.6, S=33 126.6 at two programs on every SM, S=66
137.4). At the rule's S, 64/4/4 tiles beat LONG_CHUNK_CONFIG's 128/8/3 by 2% at B=1 Hkv=8 L=131072
(121.7 against 124.3) and 1% at B=4 Hkv=8 L=32768 (121.2 against 122.2), where on earlier code
128/8/3 was 2-3% ahead (long_grouped_chunks' docstring); 128/4/3 121.6-122.8; 64/8/4 10-16% slower.
The table ends with geo-means of ours over the one-wave S (the same S forced: run-to-run spread)
and of cuDNN over ours.
Every implementation is checked against the float64 reference before it is timed (a mismatch is a
row, not a time). Kernel time: CUPTI device time between L2 flushes (rooflab.timing.CudaTimer, as
the study's `cupti` rows), all of a shape's implementations in one profiler session, in shuffled rounds.
"""
from __future__ import annotations

import math
import os
import random
import statistics
import sys
import time

T0 = time.perf_counter()
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "105"))    # stop starting new work after this
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DRY = os.environ.get("PROBE_DRYRUN") == "1"   # CPU smoke test of the probe itself: interpreter, tiny shapes
if DRY:
    from rooflab import interpreter
    interpreter.enable()

import torch  # noqa: E402

from kernels import flash_decoding as fd  # noqa: E402
from probe_csv import write_csv  # noqa: E402
from kernels._device import cdiv, sm_count  # noqa: E402
from rooflab.ceilings import _read_kernel  # noqa: E402
from rooflab.studies import decode as study  # noqa: E402
from rooflab.timing import CudaTimer  # noqa: E402

if os.environ.get("PROBE_SPLIT_LIMIT"):   # the partials' slots a row under the length-dealt launch: LIMIT * S
    fd.RAGGED_SPLIT_LIMIT = int(os.environ["PROBE_SPLIT_LIMIT"])

DEVICE = "cpu" if DRY else "cuda"
HQ, D = (8, 32) if DRY else (int(os.environ.get("PROBE_HQ", "32")), int(os.environ.get("PROBE_HEAD_DIM", "128")))
READ_TBPS = 4.57             # the committed run's read ceiling (data/results/nvidia-h200/ceilings.csv)
DTYPE_NAME = os.environ.get("PROBE_DTYPE", "float16")   # float16 or bfloat16
DTYPE = getattr(torch, DTYPE_NAME)
ROUNDS, CALLS = 3, 10        # timed calls per implementation: ROUNDS shuffled rounds of CALLS
OUT = os.environ.get("OUT", "./probe_out")
MAIN_SHAPES = [(1, 8, 1024), (1, 8, 16384), (1, 8, 65536), (4, 8, 1024), (4, 8, 16384), (16, 8, 1024),
               (16, 32, 4096), (64, 32, 1024)]
EXTRA_SHAPES = [(3, 8, 16384), (25, 8, 4096)]             # B * Hkv divides the SM count badly
PAGED_SHAPE = (16, 8, 1024)                          # paged, in full (forced S, contiguous with lengths)
PAGED_CONFIGS = [tuple(int(v) for v in c.split("x"))     # paged, in full: forced BLOCK_N x warps x stages
                 for c in os.environ.get("PAGED_CONFIGS", "64x4x3,32x4x4").split(",")]
PAGED_SHAPES = [PAGED_SHAPE, (1, 8, 16384), (4, 8, 16384)]   # paged: ours and forced S
CONFIG_SHAPES = [(1, 8, 1024), (4, 8, 1024), (4, 8, 16384)]
CONFIGS = [(32, 4, 4), (64, 2, 4), (64, 8, 4), (64, 4, 2), (32, 2, 3), (128, 8, 3)]   # (BLOCK_N, warps, stages)
DIAG = os.environ.get("DIAG", "")
if DIAG == "losses":   # the committed run's shapes slower than cuDNN (0.974-0.997x): S and configs
    MAIN_SHAPES = [(64, 32, 4096), (64, 8, 1024), (64, 32, 1024), (16, 32, 1024)]
    EXTRA_SHAPES, PAGED_SHAPES, CONFIG_SHAPES = [], [], MAIN_SHAPES
    CONFIGS = [(64, 4, 4), (32, 4, 4), (32, 4, 5), (64, 4, 3), (64, 8, 4), (128, 8, 3), (128, 4, 2), (32, 2, 4)]
if DIAG == "fullgrid":   # unsplit launches on a filled grid, FULL_GRID_CONFIG against the tiles before it
    MAIN_SHAPES = [(16, 8, 1024), (16, 8, 4096), (16, 8, 32768), (16, 8, 131072), (16, 32, 4096), (16, 32, 32768),
                   (64, 8, 4096), (64, 8, 32768), (64, 32, 16384)]
    EXTRA_SHAPES, PAGED_SHAPES, CONFIG_SHAPES = [], [], MAIN_SHAPES
    CONFIGS = [(64, 4, 4), (128, 4, 2), (64, 4, 3)]
if DIAG == "large":   # KV reads of 268-537 MB on 128-program launches, under 95% of the read ceiling at c3249fa
    MAIN_SHAPES = [(1, 8, 131072), (4, 8, 32768), (1, 32, 32768), (1, 32, 16384), (4, 8, 16384)]
    EXTRA_SHAPES, PAGED_SHAPES, CONFIG_SHAPES = [], [], MAIN_SHAPES
    CONFIGS = [(64, 4, 4), (64, 4, 6), (128, 8, 3), (128, 8, 4), (128, 4, 3), (64, 8, 4)]
if DRY:
    ROUNDS, CALLS = 1, 2
    MAIN_SHAPES, EXTRA_SHAPES, PAGED_SHAPE = [(1, 2, 300), (2, 2, 200)], [], (2, 2, 200)
    PAGED_SHAPES = [PAGED_SHAPE, (1, 2, 300)]
    CONFIG_SHAPES, CONFIGS = [(1, 2, 300)], [(32, 4, 4), (16, 2, 2)]
if os.environ.get("SHAPES"):   # "B,Hkv,L;B,Hkv,L": only these shapes, with the DIAG's configs (as DIAG=losses)
    MAIN_SHAPES = [tuple(int(v) for v in item.split(",")) for item in os.environ["SHAPES"].split(";")]
    EXTRA_SHAPES, PAGED_SHAPES, CONFIG_SHAPES = [], [], MAIN_SHAPES
    if os.environ.get("PROBE_PAGED") == "1":   # ... and paged rows of them, the first in full
        PAGED_SHAPE, PAGED_SHAPES = MAIN_SHAPES[0], MAIN_SHAPES

ROWS: list[dict] = []
timer = None


def left() -> float:
    return BUDGET_S - (time.perf_counter() - T0)


def shape_dict(batch, heads_kv, cache_len):
    return {"batch": batch, "heads_q": HQ, "heads_kv": heads_kv, "cache_len": cache_len, "head_dim": D,
            "ragged": False}


def kv_bytes(shape) -> int:
    return fd.decode_traffic(shape["batch"] * shape["cache_len"], shape["batch"], HQ, shape["heads_kv"], D, 2)[0]


def row(shape, group, impl, splits="", us=None, status="ok", message="", rel=None, reps=0):
    nbytes = kv_bytes(shape)
    r = {"batch": shape["batch"], "heads_q": HQ, "heads_kv": shape["heads_kv"], "cache_len": shape["cache_len"],
         "head_dim": D, "dtype": DTYPE_NAME, "group": group, "impl": impl, "splits": splits,
         "median_us": "" if us is None else round(us, 3), "reps": reps, "kv_bytes": nbytes,
         "tbps": "" if us is None else round(nbytes / us / 1e6, 4),
         "share_4p57": "" if us is None else round(nbytes / us / 1e6 / READ_TBPS, 4),
         "share_read": "", "vs_cudnn": "", "rel_err": "" if rel is None else f"{rel:.3g}",
         "status": status, "message": message[:300]}
    ROWS.append(r)
    return r


def checked(shape, group, candidates: dict, ref, splits_of: dict) -> dict:
    """The candidates that run and match the reference; a row for each that does not."""
    good = {}
    tol = study.tolerance(DTYPE_NAME)
    for name, make in candidates.items():
        if left() < 0:
            row(shape, group, name, splits_of.get(name, ""), status="skipped", message="probe time budget spent")
            continue
        try:
            fn = make()
            out = fn()
            if ref is None:            # the read kernels: nothing to compare
                good[name] = fn
                continue
            _, rel = study.check(out, ref, None)
            if not rel <= tol:
                row(shape, group, name, splits_of.get(name, ""), status="mismatch", rel=rel,
                    message=f"relative error {rel:.3g} above {tol}")
                continue
            good[name] = (fn, rel)
        except Exception as exc:       # one failing implementation must not stop the probe
            row(shape, group, name, splits_of.get(name, ""), status="error",
                message=f"{type(exc).__name__}: {exc}".replace("\n", " "))
            print(f"  {name}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
    return good


def time_all(fns: dict) -> dict:
    """{name: list of ms}: CUPTI device time of each call, flushed before, in one profiler session."""
    for fn in fns.values():            # warm-up outside the session
        for _ in range(1 if DRY else 3):
            fn()
    order = []
    names = list(fns)
    for _ in range(ROUNDS):
        random.shuffle(names)
        for name in names:
            order.extend([name] * CALLS)
    if DRY:                            # no GPU: host wall-clock, only to exercise the probe
        out = {name: [] for name in fns}
        for name in order:
            t = time.perf_counter()
            fns[name]()
            out[name].append((time.perf_counter() - t) * 1e3)
        return out
    out = {name: [] for name in fns}
    for name, ms in zip(order, timer.cupti_calls([fns[name] for name in order])):
        out[name].append(ms)
    return out


def read_candidates(nbytes: int):
    """rooflab.ceilings' read kernel over nbytes of fp32, one program per block (what won at 128 MiB-1 GiB)."""
    src = torch.rand(nbytes // 4, device=DEVICE)
    n = src.numel()
    out = {}
    for block in (2048, 4096):
        partial = torch.empty(cdiv(n, block), device=DEVICE, dtype=torch.float32)
        out[f"read{block}"] = (lambda p=partial, b=block:
                               (lambda: _read_kernel[(p.numel(),)](src, p, n, 1, BLOCK=b, num_warps=8)))
    return out, src


def wave_splits(batch, heads_kv, cache_len, num_sms) -> int:
    """The one-wave rule's S (choose_splits, contiguous), over the tiles launch_config gives."""
    return fd.choose_splits(batch, heads_kv, cache_len, fd.launch_config(D, 2)[0], num_sms)


def sweep_splits(batch, heads_kv, cache_len, wave, num_sms) -> list[int]:
    """Forced counts around the one-wave S, and whole waves of programs (B=3 Hkv=8: S=11, two waves of
    132 SMs; B=25 Hkv=8: S=5, the wave-filling rule's count measured against the one-wave rule)."""
    programs, n_blocks = batch * heads_kv, cdiv(cache_len, fd.launch_config(D, 2)[0])
    cands = {wave // 2, wave - 1, wave, wave + 1, 2 * wave, num_sms // programs, 2 * num_sms // programs,
             4 * num_sms // programs}
    if (batch, heads_kv, cache_len) == (25, 8, 4096):
        cands.add(5)
    if 2 * programs >= num_sms:
        cands.add(1)
    if DIAG == "losses":
        cands |= {3, 4}
    return sorted(s for s in cands if 1 <= s <= n_blocks)


def run_group(shape, group, candidates, splits_of, ref, with_read=False, with_peers=False):
    inputs = shape.get("_inputs")
    fns = {}
    good = checked(shape, group, candidates, ref, splits_of)
    rels = {}
    for name, (fn, rel) in good.items():
        fns[name], rels[name] = fn, rel
    keep = None
    if with_peers:
        peers = {"cudnn": (lambda: study.impls()["sdpa_cudnn"](inputs)),
                 "fa2": (lambda: study.impls()["sdpa_flash"](inputs))}
        for name, (fn, rel) in checked(shape, group, peers, ref, {}).items():
            fns[name], rels[name] = fn, rel
    if with_read:
        reads, keep = read_candidates(kv_bytes(shape))
        fns.update(checked(shape, group, reads, None, {}))
    if not fns:
        return {}
    if left() < 0:
        for name in fns:
            row(shape, group, name, splits_of.get(name, ""), status="skipped", message="probe time budget spent")
        return {}
    try:
        times = time_all(fns)
    except Exception as exc:
        for name in fns:
            row(shape, group, name, splits_of.get(name, ""), status="error",
                message=f"timing: {type(exc).__name__}: {exc}")
        return {}
    del keep
    result = {}
    for name, ms in times.items():
        us = statistics.median(ms) * 1e3
        result[name] = us
        row(shape, group, name, splits_of.get(name, ""), us=us, rel=rels.get(name), reps=len(ms))
    return result


def finish(shape_rows_from: int, result: dict):
    """Fill share_read and vs_cudnn of this shape's rows."""
    reads = [result[k] for k in ("read2048", "read4096") if k in result]
    read_us = min(reads) if reads else None
    cudnn = result.get("cudnn")
    for r in ROWS[shape_rows_from:]:
        if r["median_us"] == "":
            continue
        if read_us:
            r["share_read"] = round(read_us / r["median_us"], 4)
        if cudnn:
            r["vs_cudnn"] = round(cudnn / r["median_us"], 4)


def paged_operands(inputs) -> tuple:
    """The paged probes' operands of the study's inputs: (q, k, v, lens, kp, vp, table, contig_lens):
    q, the contiguous caches, the lengths, the study's paged pool and table (PAGE_SIZE-token pages,
    shuffled) and the lengths the study's contiguous call passes (only where ragged, else None)."""
    k, v, lens = inputs["k_cache"], inputs["v_cache"], inputs["seqlens"]
    kp, vp, table = fd.paged_cache(k, v, study.PAGE_SIZE, seed=study.PAGE_SEED)
    return inputs["q"], k, v, lens, kp, vp, table, lens if inputs["ragged"] else None


def paged_group(shape, inputs, ref, result, num_sms, full: bool):
    """Paged rows of a shape: ours and forced S; with `full`, the contiguous cache with lengths at the
    same S, two tilings and 16-token pages."""
    batch, heads_kv, cache_len = shape["batch"], shape["heads_kv"], shape["cache_len"]
    group = HQ // heads_kv
    q, k, v, lens = inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["seqlens"]
    start = len(ROWS)
    kp, vp, table = fd.paged_cache(k, v, study.PAGE_SIZE, seed=study.PAGE_SEED)
    pc, pso = {}, {}

    def paged(s):
        return lambda: (lambda: fd.decode_attention(q, kp, vp, lens, num_splits=s, block_table=table))

    def contiguous(s):
        return lambda: (lambda: fd.decode_attention(q, k, v, lens, num_splits=s))

    pc["paged_ours"] = paged(None)
    pso["paged_ours"] = fd.planned_splits(batch, heads_kv, cache_len, D, 2, num_sms, group, True, True)
    # The contiguous rule's count (the one-wave rule's) and the paged rule's, halved.
    sweep = {fd.planned_splits(batch, heads_kv, cache_len, D, 2, num_sms, group),
             wave_splits(batch, heads_kv, cache_len, num_sms), pso["paged_ours"], max(1, pso["paged_ours"] // 2)}
    if full:
        pc["lens_ours"] = contiguous(None)
        pso["lens_ours"] = fd.planned_splits(batch, heads_kv, cache_len, D, 2, num_sms, group, False, True)
        sweep |= {1, 2, 4, 8}
        for bn, w, st in PAGED_CONFIGS:
            pc[f"paged_{bn}x{w}x{st}"] = (lambda bn=bn, w=w, st=st: (
                lambda: fd._decode(q, kp, vp, lens, None, None, table, bn, w, st)))
            pso[f"paged_{bn}x{w}x{st}"] = fd.launch_shape(batch, heads_kv, group, cache_len, D, 2, num_sms, True,
                                                          True, None, bn, w, st)[0]
        kp16, vp16, table16 = fd.paged_cache(k, v, 16, seed=study.PAGE_SEED)          # vLLM's default page
        pc["paged16_ours"] = lambda: (lambda: fd.decode_attention(q, kp16, vp16, lens, block_table=table16))
        pso["paged16_ours"] = pso["paged_ours"]
    n_blocks = cdiv(cache_len, fd.launch_config(D, 2)[0])
    for s in sorted(x for x in sweep if 1 <= x <= n_blocks):
        pc[f"paged_S={s}"] = paged(s)
        pso[f"paged_S={s}"] = s
        if full:
            pc[f"lens_S={s}"] = contiguous(s)
            pso[f"lens_S={s}"] = s
    presult = run_group(shape, "paged", pc, pso, ref)
    for key in ("cudnn", "read2048", "read4096"):
        if result.get(key):
            presult[key] = result[key]
    finish(start, presult)
    presult["contiguous_ours"] = result.get("ours")
    return presult, pso


def kernel_rows(path):
    """Registers, spills and shared memory of every kernel the probe's plans compiled."""
    rows = []
    for key, plan in list(fd._PLANS.items()):
        compiled = getattr(plan.fast, "compiled", None)
        if compiled is None:
            continue
        q_layout, k_layout = key[0], key[1]
        rows.append({"q_shape": tuple(q_layout[0]), "cache_shape": tuple(k_layout[0]), "paged": key[4] is not None,
                     "num_splits": key[7], "block_n": key[9], "num_warps": key[10], "num_stages": key[11],
                     "grid": plan.grid, "regs": getattr(compiled, "n_regs", ""),
                     "spills": getattr(compiled, "n_spills", ""), "shared": compiled.metadata.shared})
    if rows:
        write_csv(path, rows)
    return rows


def print_bad(path: str) -> None:
    """The row count, the CSV written, the wall time and the first rows that are not ok."""
    bad = [r for r in ROWS if r["status"] != "ok"]
    print(f"{len(ROWS)} rows ({len(bad)} not ok) -> {path}; wall {time.perf_counter() - T0:.0f} s")
    for r in bad[:6]:
        print(f"  {r['status']}: B={r['batch']} Hkv={r['heads_kv']} L={r['cache_len']} {r['impl']}: "
              f"{r['message'][:100]}")


def sweep(shapes, group: str, candidates, with_read: bool = False) -> list:
    """For each (B, Hkv, Lmax, ragged) of `shapes` while the budget lasts: the study's inputs and float64
    reference, then `candidates(inputs, num_sms)` -> ({name: factory}, {name: S}) checked and timed by
    run_group (rows tagged with `ragged`; with_read: beside the read kernel over the cache's whole K and V,
    Lmax tokens a sequence, and each row's share of it and ratio to cuDNN filled in).
    Returns [((B, Hkv, Lmax, ragged), {name: us}, {name: S})]."""
    num_sms = sm_count(torch.device(DEVICE))
    table = []
    for batch, heads_kv, cache_len, ragged in shapes:
        if left() < 0:
            break
        shape = dict(shape_dict(batch, heads_kv, cache_len), ragged=ragged)
        inputs = study.make_inputs(shape, DTYPE, DEVICE)
        ref = study.reference(inputs)
        cands, splits = candidates(inputs, num_sms)
        first_row = len(ROWS)
        res = run_group(shape, group, cands, splits, ref, with_read=with_read)
        if with_read:
            finish(first_row, res)
        for r in ROWS[first_row:]:
            r["ragged"] = ragged
        table.append(((batch, heads_kv, cache_len, ragged), res, splits))
        del inputs, ref, cands
        if not DRY:
            torch.cuda.empty_cache()
        print(f"  done B={batch} Hkv={heads_kv} L={cache_len} ragged={ragged} at {time.perf_counter() - T0:.0f} s",
              flush=True)
    return table


def sweep_to_csv(shapes, group: str, candidates, name: str, with_read: bool = False):
    """A probe's whole sweep: $OUT, the CUPTI timer and the device line, then `sweep`, its rows written
    to $OUT/<name>.csv. Returns (the sweep's table, the CSV's path)."""
    global timer
    os.makedirs(OUT, exist_ok=True)
    timer = None if DRY else CudaTimer()
    print(f"device {'CPU interpreter' if DRY else torch.cuda.get_device_name()}", flush=True)
    table = sweep(shapes, group, candidates, with_read)
    path = os.path.join(OUT, f"{name}.csv")
    write_csv(path, ROWS)
    return table, path


def print_ratios(table: list, names: list[str], base: str, width: int = 15) -> None:
    """sweep's table as us(S) and the ratio over `base` per shape, then each variant's median, min and max
    ratio over `base` and at how many shapes it is within 5% of it."""
    print(f"{'B':>3} {'Hkv':>3} {'L':>6} {'rag':>3} | " + " ".join(f"{n:>{width}}" for n in names))
    for (b, h, n, rag), res, sp in table:
        ref = res.get(base)
        cells = [(f"{res[x]:.1f}({sp[x]})" + (f" {res[x] / ref:.2f}" if ref and x != base else ""))
                 if res.get(x) else "-" for x in names]
        print(f"{b:>3} {h:>3} {n:>6} {'y' if rag else 'n':>3} | " + " ".join(f"{c:>{width}}" for c in cells))
    for name in names:
        xs = [res[name] / res[base] for _, res, _ in table if name != base and res.get(name) and res.get(base)]
        if xs:
            print(f"{name}: over {base} median {statistics.median(xs):.3f}, min {min(xs):.3f}, max {max(xs):.3f}; "
                  f"within 5% at {sum(x <= 1.05 for x in xs)} of {len(xs)}")


def main():
    global timer
    os.makedirs(OUT, exist_ok=True)
    random.seed(0)
    timer = None if DRY else CudaTimer()
    num_sms = sm_count(torch.device(DEVICE))
    name = "CPU interpreter (dry run)" if DRY else torch.cuda.get_device_name()
    print(f"device {name} SMs {num_sms}; torch {torch.__version__}", flush=True)
    summary = []       # (label, dict) for the table
    for batch, heads_kv, cache_len in MAIN_SHAPES + EXTRA_SHAPES:
        if left() < 0:
            row(shape_dict(batch, heads_kv, cache_len), "main", "all", status="skipped",
                message="probe time budget spent")
            continue
        shape = shape_dict(batch, heads_kv, cache_len)
        start = len(ROWS)
        try:
            inputs = study.make_inputs(shape, DTYPE, DEVICE)
            ref = study.reference(inputs)
        except Exception as exc:
            row(shape, "main", "inputs", status="error", message=f"{type(exc).__name__}: {exc}")
            continue
        shape["_inputs"] = inputs
        q, k, v = inputs["q"], inputs["k_cache"], inputs["v_cache"]
        group = HQ // heads_kv
        wave = wave_splits(batch, heads_kv, cache_len, num_sms)
        planned = fd.planned_splits(batch, heads_kv, cache_len, D, 2, num_sms, group)   # equals wave
        cands = {"ours": lambda: (lambda: fd.decode_attention(q, k, v))}
        splits_of = {"ours": planned, "wave": wave}
        for s in sweep_splits(batch, heads_kv, cache_len, wave, num_sms):
            name = f"S={s}"
            splits_of[name] = s
            if s == 1:
                cands[name] = lambda: (lambda: fd.decode_attention_nosplit(q, k, v))
            else:
                cands[name] = lambda s=s: (lambda: fd.decode_attention(q, k, v, num_splits=s))
        result = run_group(shape, "main", cands, splits_of, ref, with_read=True, with_peers=True)
        finish(start, result)
        if result:
            summary.append(((batch, heads_kv, cache_len), result, splits_of))

        if (batch, heads_kv, cache_len) in PAGED_SHAPES and left() > 0:
            presult, pso = paged_group(shape, inputs, ref, result, num_sms,
                                       full=(batch, heads_kv, cache_len) == PAGED_SHAPE)
            summary.append((("paged", batch, heads_kv, cache_len), presult, pso))

        if (batch, heads_kv, cache_len) in CONFIG_SHAPES and left() > 0:
            start = len(ROWS)
            cc = {}
            cso = {}
            for bn, w, st in CONFIGS:
                name = f"ours_{bn}x{w}x{st}"
                cc[name] = lambda bn=bn, w=w, st=st: (lambda: fd._decode(q, k, v, None, None, None, None, bn, w, st))
                cso[name] = fd.launch_shape(batch, heads_kv, group, cache_len, D, 2, num_sms, False, False,
                                            None, bn, w, st)[0]
            cresult = run_group(shape, "config", cc, cso, ref)
            cresult["cudnn"] = result.get("cudnn")
            finish(start, {k: v for k, v in cresult.items() if v})
            summary.append((("config", batch, heads_kv, cache_len), cresult, cso))
        del inputs, q, k, v, ref, shape["_inputs"]
        if not DRY:
            torch.cuda.empty_cache()
        print(f"  done B={batch} Hkv={heads_kv} L={cache_len} at {time.perf_counter() - T0:.0f} s", flush=True)

    path = os.path.join(OUT, "decode_balance.csv")
    write_csv(path, ROWS)
    kernels = kernel_rows(os.path.join(OUT, "decode_balance_kernels.csv"))
    print_table(summary)
    paged_kernels = sorted({(r["block_n"] or "-", r["regs"], r["spills"], r["shared"]) for r in kernels if r["paged"]},
                           key=_sort_key)
    if paged_kernels:
        print("paged kernels (BLOCK_N forced, regs, spills, shared bytes): "
              + "; ".join(map(str, paged_kernels[:6])))
    print_bad(path)


def _sort_key(values: tuple) -> tuple:
    """Sort key for tuples mixing ints and strings ("-", ""): numbers first, by value, then text."""
    return tuple((0, v, "") if isinstance(v, (int, float)) else (1, 0, str(v)) for v in values)


def _us(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def print_table(summary):
    print(f"\nus: CUPTI kernel time, {DTYPE_NAME}, Hq={HQ}, D={D}. ours: decode_attention; wave: forced S of the one-wave "
          f"rule; TB/s, fill%: KV bytes / ours' time, and over {READ_TBPS} TB/s; rd%: the same-size read's time "
          "over ours'; xC: cuDNN us / ours us (> 1: ours faster)")
    print(f"{'B':>3} {'Hkv':>3} {'L':>6} {'MB':>5} | {'ours(S)':>11} {'wave(S)':>11} {'bestS(S)':>11} | "
          f"{'cuDNN':>6} {'FA2':>6} {'read':>6} | {'TB/s':>4} {'fill%':>5} {'rd%':>4} {'xC':>5}")
    for key, res, splits in summary:
        if key[0] in ("paged", "config"):
            continue
        b, h, n = key
        nbytes = kv_bytes(shape_dict(b, h, n))
        sweep = {k: v for k, v in res.items() if k.startswith("S=")}
        best = min(sweep, key=sweep.get) if sweep else None
        read = min([res[k] for k in ("read2048", "read4096") if k in res], default=None)
        ours, cud, wave = res.get("ours"), res.get("cudnn"), res.get(f"S={splits.get('wave')}")
        share = f"{nbytes / ours / 1e6:4.2f} {nbytes / ours / 1e6 / READ_TBPS * 100:5.1f}" if ours else "   -     -"
        rd = f"{read / ours * 100:4.0f}" if ours and read else "   -"
        xc = f"{cud / ours:5.2f}" if ours and cud else "    -"
        print(f"{b:>3} {h:>3} {n:>6} {nbytes / 1e6:>5.0f} | {_us(ours):>7}({splits.get('ours', '')!s:>2}) "
              f"{_us(wave):>7}({splits.get('wave', '')!s:>2}) "
              f"{_us(sweep.get(best)):>7}({best[2:] if best else '':>2}) | {_us(cud):>6} {_us(res.get('fa2')):>6} "
              f"{_us(read):>6} | {share} {rd} {xc}")
    main = [(res, splits) for key, res, splits in summary if key[0] not in ("paged", "config")]
    pairs = [(r["ours"], r[f"S={sp['wave']}"]) for r, sp in main if r.get("ours") and r.get(f"S={sp['wave']}")]
    if pairs:
        geo = math.exp(sum(math.log(f / c) for f, c in pairs) / len(pairs))
        print(f"ours / one-wave S: geo-mean {geo:.3f}; faster by > 2% at {sum(f < 0.98 * c for f, c in pairs)}, "
              f"slower by > 2% at {sum(f > 1.02 * c for f, c in pairs)} of {len(pairs)} shapes")
    ratios = [r["cudnn"] / r["ours"] for r, _ in main if r.get("cudnn") and r.get("ours")]
    if ratios:
        print(f"cuDNN / ours: geo-mean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}, "
              f"min {min(ratios):.2f}, below 0.98 at {sum(x < 0.98 for x in ratios)} of {len(ratios)}")
    for key, res, splits in summary:
        if key[0] == "paged":
            _, b, h, n = key
            base = res.get("contiguous_ours")
            print(f"paged B={b} Hkv={h} L={n}, {study.PAGE_SIZE}-token pages (paged16_*: 16), lengths passed "
                  f"(lens_*: the contiguous cache with lengths; x: over contiguous ours without lengths, "
                  f"{_us(base)} us):")
            names = [k for k in res if k.startswith(("paged_", "paged16_", "lens_")) and res[k]]
            cells = [f"{k}{'' if 'S=' in k or k not in splits else '(' + str(splits[k]) + ')'} {res[k]:.1f}"
                     + (f" x{res[k] / base:.2f}" if base else "") for k in names]
            for i in range(0, len(cells), 4):
                print("  " + "; ".join(cells[i:i + 4]))
            gaps = [f"S={s} {res[f'paged_S={s}'] / res[f'lens_S={s}']:.3f}" for s in (1, 2, 4, 8)
                    if res.get(f"paged_S={s}") and res.get(f"lens_S={s}")]
            if gaps:
                print("  paged / contiguous with lengths at the same S (the gather's cost): " + ", ".join(gaps))
        if key[0] == "config":
            _, b, h, n = key
            items = sorted((v, k) for k, v in res.items() if k.startswith("ours_") and v)
            print(f"config B={b} Hkv={h} L={n}, BLOCK_NxwarpsxstagesS(S) us: "
                  + ", ".join(f"{k[5:]}({splits.get(k, '')}) {v:.1f}" for v, k in items))


if __name__ == "__main__":
    if not (DRY or torch.cuda.is_available()):
        sys.exit("decode_balance needs a CUDA GPU")
    main()
