"""Small softmax shapes where the committed run has `ours` behind Liger or torch.compile on kernel time:
the rows and row strategies over a grid of launch settings, against Liger and torch.

For each shape (fp16 and fp32): `ours` (softmax as shipped, its dispatch and launch table),
`rows RxW` (R rows a program on W warps), `row W` (one row a program on W warps), Liger and
torch.softmax. Every variant is checked against a float64 softmax before it is timed (a mismatch
is a row, not a time). Kernel time: CUPTI device time between L2 flushes (rooflab.timing, as the
study's `cupti` rows), every variant of a shape in one profiler session, in shuffled rounds.
Writes $OUT/softmax_small.csv; prints, per shape, ours, the fastest setting and the peers (us).
DIAG=mid: the short-row shapes of at least 8 MB (65536x128, 16384x1024), rows settings of 4-64 rows on
2-8 warps, each also in the persistent loop, and torch.compile's kernel beside Liger and torch.
DIAG=onecol: one-column rows (4096x1, 1048576x1, every dtype), the one-column grid of rows settings,
and torch.compile's kernel.
DIAG=loop adds each rows/row setting again as `<setting> loop`: the same tiles through the
kernels' persistent loop (Config.per_sm > 0), where the plain settings take one tile a program.

    PYTHONUNBUFFERED=1 python3 probes/softmax_small.py
"""
from __future__ import annotations

import csv
import os
import random
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402
from kernels._device import pow2  # noqa: E402
# the sweep's torch.compile peer: one graph a shape, past Dynamo's default limit of eight graphs too
from rooflab.studies.softmax import _compiled as compiled_softmax  # noqa: E402
from rooflab.timing import CudaTimer  # noqa: E402

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "60"))
ROUNDS, CALLS = 3, 10
SHAPES = [(256, 256, torch.float16), (256, 256, torch.float32), (512, 512, torch.float32),
          (1024, 1024, torch.float16), (1024, 1000, torch.float32), (1024, 1024, torch.float32),
          (4096, 1, torch.float16), (1048576, 1, torch.float16), (4096, 4096, torch.float32)]
if os.environ.get("DIAG") == "grid":   # every shape of the full grid under 8 MB, in its swept dtypes
    SHAPES = [(256, 256, d) for d in (torch.float32, torch.float16, torch.bfloat16)] \
        + [(512, 512, d) for d in (torch.float32, torch.float16, torch.bfloat16)] \
        + [(1024, 1024, torch.float16), (1024, 1024, torch.bfloat16), (1024, 1000, torch.float16),
           (1024, 1000, torch.bfloat16)] \
        + [(1024, 128, d) for d in (torch.float32, torch.float16, torch.bfloat16)] \
        + [(4096, c, d) for c in (1, 7) for d in (torch.float32, torch.float16, torch.bfloat16)] \
        + [(1048576, 1, torch.float16), (1048576, 1, torch.bfloat16)]
if os.environ.get("DIAG") == "loop":   # the shapes where Liger led every setting, and two near ties
    SHAPES = [(1024, 1024, torch.float16), (1024, 1000, torch.float32), (1024, 1024, torch.float32),
              (512, 512, torch.float32), (256, 256, torch.float16), (4096, 4096, torch.float32)]
if os.environ.get("DIAG") == "onecol":   # one-column rows, where torch.compile led by 32-64 ns (a188f76 run)
    SHAPES = [(4096, 1, d) for d in (torch.float32, torch.float16, torch.bfloat16)] \
        + [(1048576, 1, d) for d in (torch.float32, torch.float16, torch.bfloat16)]
if os.environ.get("DIAG") == "mid":    # short rows of at least 8 MB where torch.compile led (da7f2b4 run)
    SHAPES = [(65536, 128, torch.float32), (65536, 128, torch.float16), (65536, 128, torch.bfloat16),
              (16384, 1024, torch.float32)]
ROWS_GRID = [(r, w) for r in (1, 2, 4, 8, 16) for w in (1, 2, 4, 8)]
if os.environ.get("DIAG") == "mid":
    ROWS_GRID = [(r, w) for r in (4, 8, 16, 32, 64) for w in (2, 4, 8)]
ONE_COL_GRID = [(r, w) for r in (32, 64, 128, 256, 512, 1024) for w in (1, 2, 4)]
ROW_WARPS = (1, 2, 4, 8, 16)
LOOP_PER_SM = 64     # DIAG=loop: programs an SM of the persistent variants (the grid stays one a tile here)


def ours_and_peers(x: torch.Tensor) -> dict:
    """`ours` (softmax as shipped), torch.softmax and, where it is installed, Liger's softmax of x."""
    fns = {"ours": lambda: fs.softmax(x, -1), "torch": lambda: torch.softmax(x, -1)}
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        fns["liger"] = lambda: LigerSoftmaxFunction.apply(x)
    except ImportError as exc:
        print("no liger:", exc)
    return fns


def variants(x: torch.Tensor, out: torch.Tensor) -> dict:
    rows, cols = x.shape
    fns = ours_and_peers(x)
    if os.environ.get("DIAG") in ("mid", "loop", "onecol"):   # inductor's kernel for this shape, compiled once
        compiled = compiled_softmax()
        fns["torch_compile"] = lambda: compiled(x)
    block = pow2(cols)
    for r, w in ONE_COL_GRID if cols == 1 else ROWS_GRID:
        if cols <= 4096 and r * block <= 16384 and r * block >= 32 * w:
            cfg = fs.Config(block=block, num_warps=w, rows=r)
            fns[f"rows {r}x{w}"] = lambda cfg=cfg: fs.STRATEGIES["rows"].run(x, out, cfg)
    if cols > 1:
        for w in ROW_WARPS:
            if block >= 32 * w:
                cfg = fs.Config(block=block, num_warps=w)
                fns[f"row {w}"] = lambda cfg=cfg: fs.STRATEGIES["row"].run(x, out, cfg)
    if os.environ.get("DIAG") in ("loop", "mid"):   # the same tiles in the persistent loop (per_sm > 0)
        for name in [n for n in fns if n.startswith(("row ", "rows "))]:
            kind, setting = name.split(" ")
            if kind == "row":
                cfg = fs.Config(block=block, num_warps=int(setting), per_sm=LOOP_PER_SM)
            else:
                r, w = map(int, setting.split("x"))
                cfg = fs.Config(block=block, num_warps=w, rows=r, per_sm=LOOP_PER_SM)
            fns[f"{name} loop"] = lambda cfg=cfg, kind=kind: fs.STRATEGIES[kind].run(x, out, cfg)
    return fns


def time_all(fns: dict, timer: CudaTimer) -> dict:
    """{name: list of us}: every variant's calls in shuffled rounds, one profiler session."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    order, names = [], list(fns)
    for _ in range(ROUNDS):
        random.shuffle(names)
        for name in names:
            order.extend([name] * CALLS)
    got = {name: [] for name in fns}
    for name, ms in zip(order, timer.cupti_calls([fns[name] for name in order])):
        got[name].append(ms * 1e3)
    return got


def shape_label(rows: int, cols: int, dtype: torch.dtype) -> str:
    return f"{rows}x{cols} {str(dtype)[6:]}"


def case(rows: int, cols: int, dtype: torch.dtype, hostile: bool = False):
    """(x, out, float64 reference, tolerance) of a shape: randn * 4, seed 0; hostile adds
    -inf entries (every 7th of row 0), a row of -inf (the last) and one huge entry (row 1, column 5
    or the last where rows are narrower)."""
    torch.manual_seed(0)
    x = (torch.randn(rows, cols, device="cuda") * 4).to(dtype)
    if hostile:
        x[0, ::7] = float("-inf")
        x[-1] = float("-inf")
        x[min(1, rows - 1), min(5, cols - 1)] = 3e4 if dtype != torch.float32 else 1e30
    tol = 2e-3 if dtype != torch.float32 else 1e-5
    return x, torch.empty_like(x), torch.softmax(x.double(), -1), tol


def print_notes(rows_out: list, t0: float) -> None:
    """The rows that are not times (mismatches, refusals, budget skips), then the probe's time."""
    for r in rows_out:
        if r["status"] != "ok":
            print("NOTE", r["shape"], r["variant"], r["status"])
    print(f"# total {time.perf_counter() - t0:.0f} s")


def checked(rows_out: list, label: str, fns: dict, out: torch.Tensor, ref: torch.Tensor, tol: float,
            poison: bool = False) -> dict:
    """The variants whose result (what a call returns, else `out`) is within tol of ref and NaN
    exactly where ref is; a mismatch or a refused setting is a row instead. poison: `out` is
    filled with NaN before each call, so elements a variant leaves unwritten show."""
    good = {}
    for name, fn in fns.items():
        try:
            if poison:
                out.fill_(float("nan"))
            got = fn()
            got = out if got is None else got
            torch.cuda.synchronize()
            err = (got.double() - ref).abs().nan_to_num(nan=0.0).max().item()
            nan_ok = torch.equal(got.isnan(), ref.isnan())
            if not (err <= tol and nan_ok):
                rows_out.append(dict(shape=label, variant=name, status=f"mismatch {err:.3g} nan_ok={nan_ok}"))
                continue
            good[name] = fn
        except Exception as exc:   # a refused setting is a row; the probe goes on
            rows_out.append(dict(shape=label, variant=name, status=f"{type(exc).__name__}: {exc}"[:200]))
    return good


def checked_and_copy(rows_out: list, label: str, fns: dict, x: torch.Tensor, out: torch.Tensor,
                     ref: torch.Tensor, tol: float) -> dict:
    """checked(..., poison=True), then `copy` (out.copy_(x): the same bytes read and written, the
    yardstick of the long-row probes) beside the variants that passed, timed but not checked."""
    good = checked(rows_out, label, fns, out, ref, tol, poison=True)
    good["copy"] = lambda: out.copy_(x)
    return good


def print_copy_shares(rows_out: list) -> None:
    """Per shape, each variant's median us and copy time / its time, fastest first."""
    print("kernel time, us (CUPTI median), and copy time / variant time, fastest first")
    for label, ok in times_by_shape(rows_out).items():
        copy = ok.get("copy")
        cells = [f"{k} {v} ({copy / v:.2f})" if copy else f"{k} {v}"
                 for k, v in sorted(ok.items(), key=lambda kv: kv[1])]
        print(f"{label:>22}: " + "; ".join(cells))


def record(rows_out: list, label: str, good: dict, timer: CudaTimer, t0: float) -> None:
    """Time the checked variants of a shape (time_all) and add a row each: median us."""
    for name, us in time_all(good, timer).items():
        rows_out.append(dict(shape=label, variant=name, us=round(statistics.median(us), 3), status="ok"))
    print(f"# {label} done at {time.perf_counter() - t0:.0f} s", flush=True)


def within_budget(shapes, rows_out: list, t0: float, budget_s: float):
    """(rows, cols, dtype, label) of each shape while budget_s seconds from t0 last; a `skipped (budget)`
    row for each other."""
    for r, c, dt in shapes:
        label = shape_label(r, c, dt)
        if time.perf_counter() - t0 > budget_s:
            rows_out.append(dict(shape=label, variant="-", status="skipped (budget)"))
            continue
        yield r, c, dt, label


def long_row_probe(shapes, variants, csv_name: str, budget_s: float, tol: dict | None = None, extra=None) -> None:
    """The long-row probes' GPU run: per shape while budget_s lasts, a hostile input (`case`), the
    variants(x, out, sms) checked with `out` poisoned (tolerance tol[dtype], else `case`'s) beside a
    copy of the same bytes, plus extra(x, out, sms)'s unchecked variants, all timed (`record`);
    then $OUT/csv_name, the notes and each variant's share of the copy."""
    os.makedirs(OUT, exist_ok=True)
    t0 = time.perf_counter()
    timer = CudaTimer()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows_out = []
    for r, c, dt, label in within_budget(shapes, rows_out, t0, budget_s):
        x, out, ref, case_tol = case(r, c, dt, hostile=True)
        good = checked_and_copy(rows_out, label, variants(x, out, sms), x, out, ref,
                                tol[dt] if tol else case_tol)
        del ref
        if extra is not None:
            good.update(extra(x, out, sms))
        record(rows_out, label, good, timer, t0)
        del x, out, good
        torch.cuda.empty_cache()
    write_csv(csv_name, rows_out)
    print_notes(rows_out, t0)
    print_copy_shares(rows_out)


def times_by_shape(rows_out: list) -> dict:
    """{shape label: {variant: median us}} of the rows that are times, shapes in order."""
    table = {}
    for r in rows_out:
        ok = table.setdefault(r["shape"], {})
        if r.get("us") is not None:
            ok[r["variant"]] = r["us"]
    return table


def write_csv(name: str, rows_out: list) -> None:
    with open(os.path.join(OUT, name), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["shape", "variant", "us", "status"])
        w.writeheader()
        w.writerows(rows_out)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    t0 = time.perf_counter()
    timer = CudaTimer()
    rows_out = []
    for r, c, dt, label in within_budget(SHAPES, rows_out, t0, BUDGET_S):
        x, out, ref, tol = case(r, c, dt)
        good = checked(rows_out, label, variants(x, out), out, ref, tol)
        record(rows_out, label, good, timer, t0)
    write_csv("softmax_small.csv", rows_out)
    print("kernel time, us (CUPTI median): ours, the fastest setting of ours, liger, torch")
    for label, ok in times_by_shape(rows_out).items():
        mine = {k: v for k, v in ok.items() if k.startswith(("rows", "row"))}
        best = min(mine, key=mine.get) if mine else "-"
        top3 = sorted(mine, key=mine.get)[:3]
        print(f"{label:>22} ours {ok.get('ours', '-'):>7} best {best:>10} {mine.get(best, '-'):>7} "
              f"liger {ok.get('liger', '-'):>7} torch {ok.get('torch', '-'):>7}  next: "
              + ", ".join(f"{k} {mine[k]}" for k in top3[1:])
              + (f"; torch.compile {ok['torch_compile']}" if "torch_compile" in ok else ""))
    print_notes(rows_out, t0)


if __name__ == "__main__":
    main()
