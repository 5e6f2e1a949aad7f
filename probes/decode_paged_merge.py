"""Paged decode against the grouped merge's tile: registers, residency and time.

The grouped merge reads (G rows x splits x D) partials MERGE_TILE values a step; its tile sits in
the same kernel as the streaming loop, so it can raise the kernel's registers and lower the
programs resident per SM, which paged caches need (PAGED_PROGRAMS_PER_SM). For each MERGE_TILE,
the paged kernel (64-token pages, lengths passed, the study's layout) and the contiguous one at
a few shapes: time (do_bench median, L2 flushed), registers, spills, and the check against the
contiguous result. Writes $OUT/decode_paged_merge.csv.

    PYTHONUNBUFFERED=1 python3 probes/decode_paged_merge.py
"""
from __future__ import annotations

import csv
import os
import sys
import time

import torch
import triton

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if not torch.cuda.is_available():   # a check of the script itself, in Triton's CPU interpreter
    from rooflab import interpreter
    interpreter.enable()
from kernels import flash_decoding as fd  # noqa: E402

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "90"))
SHAPES = [(1, 32, 131072), (1, 32, 32768), (4, 32, 4096), (1, 8, 16384), (16, 8, 1024), (4, 8, 16384)]
TILES = (8192, 2048, 4096)
HQ, D = 32, 128
DEV = "cuda" if torch.cuda.is_available() else "cpu"
if DEV == "cpu":
    SHAPES = [(1, 8, 256)]


def _regs():
    best = None
    for plan in fd._PLANS.values():
        compiled = getattr(plan.fast, "compiled", None)
        if compiled is not None:
            best = (compiled.n_regs, compiled.n_spills)
    return best or ("", "")


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    t0 = time.perf_counter()
    rows = []
    for b, hkv, n in SHAPES:
        if time.perf_counter() - t0 > BUDGET_S:
            break
        torch.manual_seed(0)
        q = torch.randn(b, HQ, D, device=DEV, dtype=torch.float16)
        k = torch.randn(b, hkv, n, D, device=DEV, dtype=torch.float16)
        v = torch.randn(b, hkv, n, D, device=DEV, dtype=torch.float16)
        lens = torch.full((b,), n, dtype=torch.int32, device=DEV)
        kp, vp, table = fd.paged_cache(k, v, 64, seed=1)
        ref = fd.decode_attention(q, k, v).float()
        for tile in TILES:
            fd.MERGE_TILE = tile
            for layout in ("paged", "contiguous"):
                fd._PLANS.clear()
                if layout == "paged":
                    fn = lambda: fd.decode_attention(q, kp, vp, lens, block_table=table)  # noqa: E731
                else:
                    fn = lambda: fd.decode_attention(q, k, v)  # noqa: E731
                row = dict(batch=b, heads_kv=hkv, cache_len=n, merge_tile=tile, layout=layout)
                try:
                    out = fn().float()
                    row["max_abs_err"] = (out - ref).abs().max().item()
                    row["splits"] = fd.planned_splits(b, hkv, n, D, 2, fd.sm_count(q.device), HQ // hkv,
                                                      layout == "paged", layout == "paged")
                    row["regs"], row["spills"] = _regs()
                    row["us"] = (round(float(triton.testing.do_bench(fn, warmup=10, rep=50,
                                                                     return_mode="median")) * 1e3, 2)
                                 if DEV == "cuda" else 0.0)
                except Exception as exc:
                    row["error"] = f"{type(exc).__name__}: {exc}"[:160]
                rows.append(row)
        print(f"# B={b} Hkv={hkv} L={n} done at {time.perf_counter() - t0:.0f} s", flush=True)
        del q, k, v, kp, vp, table
        torch.cuda.empty_cache()
    cols = ["batch", "heads_kv", "cache_len", "merge_tile", "layout", "splits", "regs", "spills", "us",
            "max_abs_err", "error"]
    with open(os.path.join(OUT, "decode_paged_merge.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    print("us (regs) by MERGE_TILE; fp16 Hq=32 D=128, 64-token pages with lengths")
    print(f"{'B':>3} {'Hkv':>3} {'L':>7} {'layout':>10} " + " ".join(f"{t:>14}" for t in TILES))
    for key in dict.fromkeys((r["batch"], r["heads_kv"], r["cache_len"], r["layout"]) for r in rows):
        cells = []
        for t in TILES:
            hit = [r for r in rows if (r["batch"], r["heads_kv"], r["cache_len"], r["layout"]) == key
                   and r["merge_tile"] == t]
            r = hit[0] if hit else {}
            bad = "*" if r.get("max_abs_err", 0) > 1e-2 else " "
            cells.append(f"{r.get('us', 'E'):>8}({r.get('regs', '')}){bad}" if "us" in r else f"{'E':>14}")
        print(f"{key[0]:>3} {key[1]:>3} {key[2]:>7} {key[3]:>10} " + " ".join(f"{c:>14}" for c in cells))
    for r in rows:
        if r.get("error"):
            print("ERROR", r)
    print(f"# total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
