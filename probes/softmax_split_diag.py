"""Where split's time goes at the few-long-row shapes: launch settings and the cost of its sync.

Times kernels.fused_softmax's split (forced) under its own launch table and under other settings
(programs per SM, warps, tiles per segment), and two copies of the module changed for timing only:
`relaxed` (the arrive / wait / depart atomics without release / acquire ordering: the fences'
cost) and `nowait` (no wait for the row's other segments: what the sync costs in all; its output is
wrong by construction and only timed). Looped (forced), torch.softmax and a copy of the same bytes
are the references. Every variant's output is checked against float64 and its error reported.
With DIAG=looped: split's launch table and looped on persistent grids of 2-16 programs an SM (does
a persistent grid alone cost looped what it costs split?). With DIAG=bigtile: split with 32-64 KB
tiles, one-tile (register-resident) and 2-4-tile segments, 8-32 warps (BIG_TILES). With
DIAG=stages: split and looped with their tile loops software-pipelined by Triton (tl.range with
num_stages: the next tiles stream into shared memory, cp.async, while one is reduced; `st3`, `st4`
the running-stats loop, `st3n3` the normalising loop too, `st3_r64` and `st4_r64` capped at 64
registers) and split with a relaxed depart (`depart_relaxed`: no fence after the segment's stores).
With DIAG=looped_l2: does looped lose its second read to L2 capacity at long rows? One program a
row keeps every resident program's row in flight (4-8 an SM: 528-1056 rows, 67-135 MB at
2048x65537 16-bit, over the H200's 60 MB L2), and looped reads 4096x32768 16-bit (64 KB rows) at
0.86-0.87 of the copy but 2048x65537 (128 KB) at 0.66. A persistent grid of per_sm programs an SM
holds per_sm x SMs rows in flight (1: 132 rows, 17-40 MB at 128-304 KB rows); LOOPED_L2 times
looped at per_sm 0-3 with 8-32 warps and 16-32 KB tiles (a program has one tile in flight, so few
programs an SM need wide tiles) at the long-row shapes where split or looped ships
(L2_SHAPES), and L2_SPLIT split's launch table against 1-2 programs an SM and 2- or 8-tile
segments there and at two few-long-row shapes (L2_SPLIT_SHAPES), whose 20% of second reads that
miss L2 (Nsight Compute, kernels/fused_softmax.py) may be the same overflow.
Timing: triton.testing.do_bench median (L2 flushed before each call). Writes
$OUT/softmax_split_diag.csv.

    PYTHONUNBUFFERED=1 python3 probes/softmax_split_diag.py
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
from kernels import fused_softmax as fs  # noqa: E402
from module_copy import import_source  # noqa: E402  (probes/, beside this script)

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "100"))
SHAPES = [(16, 4194304, torch.float16), (256, 262144, torch.float16), (1024, 131072, torch.float16),
          (4096, 32768, torch.float16), (64, 1048576, torch.float32), (1024, 131072, torch.float32)]
EXTRA_SHAPES = [(2048, 65537, torch.float16), (512, 151936, torch.bfloat16)]   # DIAG=stages adds these
# (name, per_sm, num_warps, seg_tiles, tile bytes); None: the launch table's value
SETTINGS = [("table", None, None, None, None), ("pm8", 8, None, None, None), ("w4", None, 4, None, None),
            ("w4_pm8", 8, 4, None, None), ("w4_pm16", 16, 4, None, None), ("s2", None, None, 2, None),
            ("s8", None, None, 8, None)]
# DIAG=bigtile: fewer, larger rounds per byte. One-tile segments stay in registers across the
# exchange (no second read from L2) and tiles of 32-64 KB move 2-4x the bytes of the table's
# 16 KB tile per exchange; two-tile segments of 32 KB for comparison.
BIG_TILES = [("table", None, None, None, None), ("t32k_w16_s1", None, 16, 1, 32768),
             ("t64k_w16_s1", None, 16, 1, 65536), ("t64k_w32_s1", None, 32, 1, 65536),
             ("t32k_w16_s2", None, 16, 2, 32768), ("t32k_w8_s4", None, 8, 4, 32768)]
# looped on a persistent grid of per_sm programs an SM (0: one program a row, the launch table's)
LOOPED_PER_SM = (0, 2, 4, 8, 16)
L2_ONLY = os.environ.get("DIAG") == "looped_l2"   # just split's table and looped at LOOPED_L2
L2_SHAPES = [(2048, 65537, torch.float16), (2048, 65537, torch.bfloat16), (2048, 65537, torch.float32),
             (1024, 131072, torch.float16), (1024, 131072, torch.float32), (512, 151936, torch.bfloat16),
             (256, 262144, torch.float16), (4096, 32768, torch.float16)]
# (per_sm, num_warps, tile bytes); None: the table's (16 KB tiles, 8 warps in 16 bits, 16 in fp32). A
# looped program has one tile in flight, so 1-2 an SM need wider tiles to keep HBM busy.
LOOPED_L2 = [(0, None, None), (1, 8, None), (1, 16, None), (1, 16, 32768), (1, 32, 32768), (2, 8, None),
             (2, 16, None), (2, 16, 32768), (3, 8, None)]
# split's segments in flight are resident programs x segment bytes (528 x 64 KB at 4 an SM); the
# same question for split at the few-long-row shapes (looped is not timed where rows < SMs)
L2_SPLIT_SHAPES = [(16, 4194304, torch.float16), (64, 1048576, torch.float32)]
L2_SPLIT = [("table", None, None, None, None), ("pm1", 1, None, None, None), ("pm1_w16", 1, 16, None, None),
            ("pm2", 2, None, None, None), ("pm2_s2", 2, None, 2, None), ("pm2_s8", 2, None, 8, None)]
ONLY_LOOPED = os.environ.get("DIAG") == "looped"   # just split's table and looped at LOOPED_PER_SM
BIG = os.environ.get("DIAG") == "bigtile"          # just split's table and BIG_TILES
STAGES = os.environ.get("DIAG") == "stages"        # the tile loops software-pipelined (cp.async)
EDITS = {   # module copies, timing only
    "relaxed": [('sem="release"', 'sem="relaxed"'), ('sem="acquire"', 'sem="relaxed"'),
                ('sem="acq_rel"', 'sem="relaxed"')],
    "nowait": [("while arrived < n_segs:", "while arrived < 0:")],
}
_STATS_LOOP = ("    for t in range(0, n_tiles):\n        offs = start + t * BLOCK + cols\n"
               "        mask = tl.max_constancy(offs < n_cols, VEC)\n"
               "        x = tl.load(x_row + offs, mask=mask, other=-float(\"inf\"),\n"
               "                    eviction_policy=\"evict_last\")")
_NORM_LOOP = "    for t in range(0, n_tiles):\n        offs = start + (n_tiles - 1 - t) * BLOCK + cols"


def _staged(loop: str, k: int) -> tuple[str, str]:
    return loop, loop.replace("range(0, n_tiles)", f"tl.range(0, n_tiles, num_stages={k})", 1)


STAGE_EDITS = {   # DIAG=stages: the running-stats loop (and the normalising loop) as tl.range(num_stages=k)
    "st3": [_staged(_STATS_LOOP, 3)],
    "st4": [_staged(_STATS_LOOP, 4)],
    "st3n3": [_staged(_STATS_LOOP, 3), _staged(_NORM_LOOP, 3)],
    # ... and capped at 64 registers (maxnreg), as many programs an SM as the unpipelined kernel
    "st3_r64": [_staged(_STATS_LOOP, 3), ("launch_cooperative_grid=True", "launch_cooperative_grid=True, maxnreg=64")],
    "st4_r64": [_staged(_STATS_LOOP, 4), ("launch_cooperative_grid=True", "launch_cooperative_grid=True, maxnreg=64")],
    "depart_relaxed": [('departed = tl.atomic_add(depart_ptr + row, 1, sem="acq_rel")',
                        'departed = tl.atomic_add(depart_ptr + row, 1, sem="relaxed")')],
}


def _module_copy(name: str, edits):
    src = open(fs.__file__).read()
    for old, new in edits:
        assert old in src, (name, old)
        src = src.replace(old, new)
    return import_source(f"fused_softmax_{name}", src)


def _bench(fn) -> float:
    return float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")) * 1e3   # us


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    t0 = time.perf_counter()
    edits = {**EDITS, **STAGE_EDITS} if STAGES else EDITS
    mods = {"main": fs, **{n: _module_copy(n, e) for n, e in edits.items()}}
    rows_out = []
    for r, c, dt in L2_SHAPES + L2_SPLIT_SHAPES if L2_ONLY else SHAPES + (EXTRA_SHAPES if STAGES else []):
        if time.perf_counter() - t0 > BUDGET_S:
            rows_out.append(dict(shape=f"{r}x{c}", dtype=str(dt)[6:], variant="-", error="skipped (budget)"))
            continue
        torch.manual_seed(0)
        x = torch.randn(r, c, device="cuda", dtype=torch.float32).mul_(4).to(dt)
        x[0, 5] = float("-inf")
        ref = torch.softmax(x.double(), dim=-1)
        out = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        copy_us = _bench(lambda: out.copy_(x))
        base = fs.config("split", c, dt, r, fs.num_sms(x.device))
        cases = []
        settings = (BIG_TILES if BIG else L2_SPLIT if L2_ONLY else SETTINGS[:1] if ONLY_LOOPED or STAGES
                    else SETTINGS)
        for name, per_sm, warps, seg, tile_bytes in settings:
            block = tile_bytes // x.element_size() if tile_bytes else base.block
            cfg = fs.Config(block=min(block, triton.next_power_of_2(c)), num_warps=warps or base.num_warps,
                            per_sm=per_sm or base.per_sm, prefetch=base.prefetch, seg_tiles=seg or base.seg_tiles)
            cases.append((f"split_{name}", fs, "split", cfg))
        for mname in STAGE_EDITS if STAGES else () if ONLY_LOOPED or BIG or L2_ONLY else EDITS:
            cases.append((f"split_{mname}", mods[mname], "split", None))
        looped = fs.config("looped", c, dt, r, fs.num_sms(x.device))
        for mname in ("st3", "st3n3") if STAGES else ():
            cases.append((f"looped_{mname}", mods[mname], "looped", None))
        if L2_ONLY:
            looped_settings = LOOPED_L2 if r >= fs.num_sms(x.device) else []
        else:
            looped_settings = [(per_sm, None, None) for per_sm in ((0,) if BIG or STAGES else LOOPED_PER_SM)]
        for per_sm, warps, tile_bytes in looped_settings:
            name = ((f"looped_pm{per_sm}" if per_sm else "looped") + (f"_w{warps}" if warps else "")
                    + (f"_t{tile_bytes >> 10}k" if tile_bytes else ""))
            block = min(tile_bytes // x.element_size(), triton.next_power_of_2(c)) if tile_bytes else looped.block
            cases.append((name, fs, "looped",
                          fs.Config(block=block, num_warps=warps or looped.num_warps, per_sm=per_sm)))
        for variant, mod, strat, cfg in cases:
            row = dict(shape=f"{r}x{c}", dtype=str(dt)[6:], variant=variant)
            try:
                out.fill_(float("nan"))
                mod.STRATEGIES[strat].run(x, out, cfg)
                torch.cuda.synchronize()
                err = (out.double() - ref).abs().max().item()
                row["max_abs_err"] = err
                us = _bench(lambda: mod.STRATEGIES[strat].run(x, out, cfg))
                row.update(us=round(us, 2), of_copy=round(copy_us / us, 3), tbs=round(nbytes / us / 1e6, 3))
            except Exception as exc:   # a refused config is a row, the probe goes on
                row["error"] = f"{type(exc).__name__}: {exc}"[:160]
            rows_out.append(row)
        us = _bench(lambda: torch.softmax(x, dim=-1))
        rows_out.append(dict(shape=f"{r}x{c}", dtype=str(dt)[6:], variant="torch", us=round(us, 2),
                             of_copy=round(copy_us / us, 3)))
        rows_out.append(dict(shape=f"{r}x{c}", dtype=str(dt)[6:], variant="copy", us=round(copy_us, 2),
                             of_copy=1.0, tbs=round(nbytes / copy_us / 1e6, 3)))
        print(f"# {r}x{c} {dt} done at {time.perf_counter() - t0:.0f} s", flush=True)
        del x, out, ref
        torch.cuda.empty_cache()
    cols = ["shape", "dtype", "variant", "us", "of_copy", "tbs", "max_abs_err", "error"]
    with open(os.path.join(OUT, "softmax_split_diag.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows_out)
    variants = [v for v in dict.fromkeys(r["variant"] for r in rows_out) if v != "-"]
    print("share of the copy (copy us / us); errors marked *; E = refused")
    print(f"{'shape':>12} {'dt':>8} " + " ".join(f"{v.replace('split_', ''):>8}" for v in variants))
    for key in dict.fromkeys((r["shape"], r["dtype"]) for r in rows_out):
        cells = []
        for v in variants:
            hit = [r for r in rows_out if (r["shape"], r["dtype"]) == key and r["variant"] == v]
            if not hit or "us" not in hit[0]:
                cells.append(f"{'E' if hit and hit[0].get('error') else '-':>8}")
                continue
            bad = hit[0].get("max_abs_err", 0) > 2e-3
            cells.append(f"{hit[0]['of_copy']:>7.3f}{'*' if bad else ' '}")
        print(f"{key[0]:>12} {key[1]:>8} " + " ".join(cells))
    for r in rows_out:
        if r.get("error"):
            print("ERROR", r["shape"], r["dtype"], r["variant"], r["error"])
    print(f"# total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
