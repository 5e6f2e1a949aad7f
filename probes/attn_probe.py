"""Shared body of the attention probes (probes/attn_nqnk.py, probes/attn_d64.py): each of their
shapes and dtypes runs ours (attention()), cuDNN and FlashAttention-2 (torch SDPA backends, as
rooflab.studies.attention calls them) and our Triton kernel alone (attention_triton()), checked
against the study's float64 reference before do_bench times it (median ms, L2 flushed before each
call). A mismatch, an error, a refusal or a timing past the wall-clock budget is a row of its own.
Column `dense_mask` says whether SDPA built a dense (Nq, Nk) mask for the call (its fallback when a
backend has no bottom-right causal path of its own; the study makes such a peer `unsupported`).
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import triton  # noqa: E402

from kernels.flash_attention import attention_flops  # noqa: E402
from rooflab.bench import Unsupported  # noqa: E402
from rooflab.studies import attention as study  # noqa: E402

IMPLS = ("ours", "sdpa_cudnn", "sdpa_flash", "ours_triton")      # ours_triton last: the first skipped
TRITON_BUDGET_SHARE = 0.8        # ours_triton stops being timed past this share of the budget
COLUMNS = ("case", "dtype", "impl", "status", "median_ms", "tflops", "max_abs_err", "rel_err", "strategy",
           "dense_mask", "message", *study.SHAPE_KEYS)


def _bench(fn) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def _measure(case, shape, dtype, inputs, ref, impl, timed: bool) -> dict:
    row = {"case": case, "dtype": dtype, "impl": impl, **shape}
    if impl == "ours_triton" and not timed:      # its first call autotunes: seconds of compiles
        row.update(status="skipped (budget)")
        return row
    try:
        with study._dense_masks() as built:
            fn = study.impls()[impl](inputs)
            out = fn()
        torch.cuda.synchronize()
        row["max_abs_err"], row["rel_err"] = study.check(out, ref, inputs)
        del out
        row["dense_mask"] = bool(built)
        if impl == "ours":
            row["strategy"] = study.strategy(shape, dtype, inputs)
        if not row["rel_err"] <= study.tolerance(dtype):
            row.update(status="mismatch", message=f"rel_err {row['rel_err']:.3g} > {study.tolerance(dtype)}")
            return row
        if not timed:
            row.update(status="skipped (budget)")
            return row
        row["median_ms"] = _bench(fn)
        flops = attention_flops(shape["batch"], shape["heads_q"], shape["seqlen_q"], shape["seqlen_k"],
                                shape["head_dim"], shape["causal"])
        row.update(status="ok", tflops=flops / (row["median_ms"] * 1e-3) / 1e12)
    except Unsupported as exc:
        row.update(status="unsupported", message=str(exc)[:200])
    except Exception as exc:  # noqa: BLE001  (one failing variant must not stop the probe)
        row.update(status="error", message=f"{type(exc).__name__}: {exc}"[:200])
        torch.cuda.empty_cache()
    return row


def _ratio(rows, peer):
    ms = {r["impl"]: r.get("median_ms") for r in rows if r.get("status") == "ok"}
    if ms.get("ours") and ms.get(peer):
        return f"{ms[peer] / ms['ours']:.2f}"
    return "-"


def run(name: str, shapes: list, budget: float, title: str, target: str) -> None:
    """Measure `shapes` ((case, shape dict), most important first: the budget drops the tail), write
    $OUT/<name>.csv and print the table; --dtypes and --budget (seconds, compiles included) override."""
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--budget", type=float, default=budget, help="seconds of wall clock, compiles included")
    args = parser.parse_args()
    start = time.perf_counter()
    out_dir = Path(os.environ.get("OUT", "probe_out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}", flush=True)
    dtypes = args.dtypes.split(",")
    rows = []
    for case, shape in shapes:
        for dtype in dtypes:
            try:
                inputs = study.make_inputs(shape, getattr(torch, dtype), "cuda")
                ref = study.reference(inputs)
            except Exception as exc:  # noqa: BLE001
                rows.append({"case": case, "dtype": dtype, "impl": "-", "status": "error",
                             "message": f"inputs/reference: {type(exc).__name__}: {exc}"[:200], **shape})
                continue
            for impl in IMPLS:
                limit = args.budget * (TRITON_BUDGET_SHARE if impl == "ours_triton" else 1.0)
                rows.append(_measure(case, shape, dtype, inputs, ref, impl, time.perf_counter() - start < limit))
                r = rows[-1]
                print(f"  [{time.perf_counter() - start:6.1f} s] {case} {dtype} {impl}: {r['status']}"
                      f" {r.get('median_ms', float('nan')):.3f} ms {r.get('message', '')}", flush=True)
            inputs = ref = None
            torch.cuda.empty_cache()

    with open(out_dir / f"{name}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)

    width = max(len(case) for case, _ in shapes) + 1
    print(f"\n{name}: {title}; TFLOP/s (do_bench median, L2 flushed); ratios = peer ms / ours ms; "
          f"{time.perf_counter() - start:.0f} s in all")
    print(f"{'case':{width}s} {'dtype':8s} {'ours':>6s} {'cudnn':>6s} {'fa2':>6s} {'triton':>6s} "
          f"{'/cudnn':>6s} {'/fa2':>6s} {'/trit':>6s} {'rel_err':>8s}  ours path; notes")
    for case, _ in shapes:
        for dtype in dtypes:
            sel = [r for r in rows if r["case"] == case and r["dtype"] == dtype]
            by = {r["impl"]: r for r in sel}
            tf = [f"{by[i]['tflops']:6.0f}" if by.get(i, {}).get("status") == "ok" else f"{'x':>6s}"
                  for i in IMPLS]
            notes = [f"{r['impl']} {r['status']}: {r.get('message', '')}"[:60] for r in sel if r.get("status") != "ok"]
            notes += [f"{r['impl']} dense mask" for r in sel if r.get("dense_mask")]
            ours = by.get("ours", {})
            rel = f"{ours['rel_err']:8.1e}" if isinstance(ours.get("rel_err"), float) else f"{'-':>8s}"
            print(f"{case:{width}s} {dtype:8s} {' '.join(tf)} {_ratio(sel, 'sdpa_cudnn'):>6s} "
                  f"{_ratio(sel, 'sdpa_flash'):>6s} {_ratio(sel, 'ours_triton'):>6s} {rel}  "
                  f"{ours.get('strategy') or '-'}; " + ", ".join(notes))
    print(f"{target}; csv: {out_dir / (name + '.csv')}")
