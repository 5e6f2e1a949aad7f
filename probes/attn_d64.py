"""Probe: attention forward at head dim 64 on an H200, ours (attention(): the Gluon Hopper kernel
where it applies) against cuDNN and FlashAttention-2 (torch SDPA backends) and our Triton kernel
alone (attention_triton()).

    PYTHONUNBUFFERED=1 python3 probes/attn_d64.py [--dtypes float16,bfloat16] [--budget 55]

Shapes: B=4 Hq=Hkv=32 D=64, N = 4096 and 8192 (Nq == Nk), causal and not, fp16 and bf16. The
implementations, inputs, float64 reference (on the study's rows: both edges and a spread, batches
0 and B-1, three heads) and tolerance are rooflab.studies.attention's, as probes/attn_nqnk.py uses
them: the peers are F.scaled_dot_product_attention(is_causal=...) under sdpa_kernel(CUDNN_ATTENTION)
or sdpa_kernel(FLASH_ATTENTION).

Every implementation's output is checked against the reference before it is timed; a mismatch
or an error is a row of its own. Timing: triton.testing.do_bench (L2 flushed before each call),
median ms. TFLOP/s from kernels.flash_attention.attention_flops. Ratios are speed ratios
(peer ms / ours ms; > 1: ours faster). Column `path` is the kernel attention() ran
(`gluon-hopper` expected at every shape here). Past the wall-clock budget (default 55 s,
compilation and ours_triton's autotuning included) the remaining timings become `skipped (budget)`
rows, ours_triton first (not even called: its first call autotunes); the other implementations are
still checked. Writes $OUT/attn_d64.csv (OUT defaults to ./probe_out).
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

NAME = "attn_d64"
IMPLS = ("ours", "sdpa_cudnn", "sdpa_flash", "ours_triton")      # ours_triton last: the first skipped
TRITON_BUDGET_SHARE = 0.8        # ours_triton stops being timed past this share of the budget


def _shape(n, causal):
    return {"batch": 4, "heads_q": 32, "heads_kv": 32, "seqlen_q": n, "seqlen_k": n, "head_dim": 64,
            "causal": causal}


SHAPES = [(f"N={n}{' causal' if causal else ''}", _shape(n, causal)) for n in (4096, 8192) for causal in (False, True)]
COLUMNS = ("case", "dtype", "impl", "status", "median_ms", "tflops", "max_abs_err", "rel_err", "path", "message",
           *study.SHAPE_KEYS)


def _bench(fn) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def _measure(case, shape, dtype, inputs, ref, impl, timed: bool) -> dict:
    row = {"case": case, "dtype": dtype, "impl": impl, **shape}
    if impl == "ours_triton" and not timed:      # its first call autotunes: seconds of compiles
        row.update(status="skipped (budget)")
        return row
    try:
        fn = study.impls()[impl](inputs)
        out = fn()
        torch.cuda.synchronize()
        row["max_abs_err"], row["rel_err"] = study.check(out, ref, inputs)
        del out
        if impl == "ours":
            row["path"] = study.strategy(shape, dtype, inputs)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--budget", type=float, default=55.0, help="seconds of wall clock, compiles included")
    args = parser.parse_args()
    start = time.perf_counter()
    out_dir = Path(os.environ.get("OUT", "probe_out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}", flush=True)
    dtypes = args.dtypes.split(",")
    rows = []
    for case, shape in SHAPES:
        for dtype in dtypes:
            case_rows = []
            try:
                inputs = study.make_inputs(shape, getattr(torch, dtype), "cuda")
                ref = study.reference(inputs)
            except Exception as exc:  # noqa: BLE001
                case_rows.append({"case": case, "dtype": dtype, "impl": "-", "status": "error",
                                  "message": f"inputs/reference: {type(exc).__name__}: {exc}"[:200], **shape})
                inputs = None
            if inputs is not None:
                for impl in IMPLS:
                    elapsed = time.perf_counter() - start
                    limit = args.budget * (TRITON_BUDGET_SHARE if impl == "ours_triton" else 1.0)
                    case_rows.append(_measure(case, shape, dtype, inputs, ref, impl, elapsed < limit))
                    r = case_rows[-1]
                    print(f"  [{time.perf_counter() - start:5.1f} s] {case} {dtype} {impl}: {r['status']}"
                          f" {r.get('median_ms', float('nan')):.3f} ms {r.get('message', '')}", flush=True)
            rows.extend(case_rows)
            inputs = ref = None
            torch.cuda.empty_cache()

    with open(out_dir / f"{NAME}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)

    print(f"\n{NAME}: B=4 H=32 D=64, TFLOP/s (do_bench median, L2 flushed); ratios = peer ms / ours ms; "
          f"{time.perf_counter() - start:.0f} s in all")
    print(f"{'case':14s} {'dtype':8s} {'ours':>6s} {'cudnn':>6s} {'fa2':>6s} {'triton':>6s} "
          f"{'/cudnn':>6s} {'/fa2':>6s} {'/trit':>6s} {'rel_err':>8s}  ours path; notes")
    for case, _ in SHAPES:
        for dtype in dtypes:
            sel = [r for r in rows if r["case"] == case and r["dtype"] == dtype]
            by = {r["impl"]: r for r in sel}
            tf = [f"{by[i]['tflops']:6.0f}" if by.get(i, {}).get("status") == "ok" else f"{'x':>6s}"
                  for i in IMPLS]
            notes = [f"{r['impl']} {r['status']}: {r.get('message', '')}"[:60] for r in sel if r.get("status") != "ok"]
            ours = by.get("ours", {})
            rel = f"{ours['rel_err']:8.1e}" if isinstance(ours.get("rel_err"), float) else f"{'-':>8s}"
            print(f"{case:14s} {dtype:8s} {' '.join(tf)} {_ratio(sel, 'sdpa_cudnn'):>6s} "
                  f"{_ratio(sel, 'sdpa_flash'):>6s} {_ratio(sel, 'ours_triton'):>6s} {rel}  "
                  f"{ours.get('path') or '-'}; " + ", ".join(notes))
    print(f"merge D=64 on the Gluon path if ours (gluon-hopper) beats ours_triton (/trit > 1) at every row; "
          f"csv: {out_dir / (NAME + '.csv')}")


if __name__ == "__main__":
    main()
