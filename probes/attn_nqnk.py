"""Probe: attention forward at Nq != Nk (chunked prefill) and GQA 8:1 on an H200, ours against
cuDNN and FlashAttention-2 (torch SDPA backends) and our Triton kernel alone.

    PYTHONUNBUFFERED=1 python3 probes/attn_nqnk.py [--dtypes float16,bfloat16] [--budget 140]

Shapes (B=4, Hq=32, D=128; the full grid's chunked-prefill entry is B=4 H=32 Nq=1024 Nk=8192):
chunked prefill Nq=1024 Nk=8192 causal and not, Nq=1024 Nk=4096 causal, GQA 8:1 (Hkv=4) N=8192
causal and not, and N=8192 causal (Nq == Nk, MHA) as the control. The implementations, inputs,
float64 reference (on the study's row/head subset) and tolerance are rooflab.studies.attention's,
so the peers get exactly what the sweep gives them: the bottom-right mask for causal Nq != Nk as
torch.nn.attention.bias.causal_lower_right, GQA through enable_gqa or K/V expanded outside the
timed call. Column `dense_mask` says whether SDPA built a dense (Nq, Nk) mask for the call
(CausalBias._materialize ran: the backend had no native bottom-right path, so it ran masked
attention, not its causal kernel).

Every implementation's output is checked against the reference before it is timed; a mismatch
or an error is a row of its own. Timing: triton.testing.do_bench (L2 flushed before each call),
median ms. TFLOP/s from kernels.flash_attention.attention_flops. Ratios are speed ratios
(peer ms / ours ms; > 1: ours faster). Past the wall-clock budget (default 140 s, compilation
included) the remaining timings become `skipped (budget)` rows, ours_triton first.
Writes $OUT/attn_nqnk.csv (OUT defaults to ./probe_out).
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
import torch.nn.attention.bias as sdpa_bias  # noqa: E402

from kernels.flash_attention import attention_flops  # noqa: E402
from rooflab.bench import Unsupported  # noqa: E402
from rooflab.studies import attention as study  # noqa: E402

NAME = "attn_nqnk"
IMPLS = ("ours", "sdpa_cudnn", "sdpa_flash", "ours_triton")      # ours_triton last: the first skipped
TRITON_BUDGET_SHARE = 0.8        # ours_triton stops being timed past this share of the budget


def _shape(nq, nk, causal, hkv=32):
    return {"batch": 4, "heads_q": 32, "heads_kv": hkv, "seqlen_q": nq, "seqlen_k": nk, "head_dim": 128,
            "causal": causal}


# most important first: the budget guard drops the tail
SHAPES = [
    ("chunk 1024/8192 causal", _shape(1024, 8192, True)),
    ("chunk 1024/8192", _shape(1024, 8192, False)),
    ("chunk 1024/4096 causal", _shape(1024, 4096, True)),
    ("gqa8 8192 causal", _shape(8192, 8192, True, hkv=4)),
    ("gqa8 8192", _shape(8192, 8192, False, hkv=4)),
    ("control 8192 causal", _shape(8192, 8192, True)),
]
COLUMNS = ("case", "dtype", "impl", "status", "median_ms", "tflops", "max_abs_err", "rel_err", "strategy",
           "dense_mask", "message", *study.SHAPE_KEYS)


class _MaskCounter:
    """Counts CausalBias._materialize calls (a dense (Nq, Nk) mask built for SDPA)."""

    def __init__(self):
        self.calls = 0
        original = sdpa_bias.CausalBias._materialize

        def counted(bias, *args, **kwargs):
            self.calls += 1
            return original(bias, *args, **kwargs)

        sdpa_bias.CausalBias._materialize = counted


def _bench(fn) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def _measure(case, shape, dtype, inputs, ref, impl, masks, timed: bool) -> dict:
    row = {"case": case, "dtype": dtype, "impl": impl, **shape}
    masks.calls = 0
    try:
        fn = study.impls()[impl](inputs)
        out = fn()
        torch.cuda.synchronize()
        row["max_abs_err"], row["rel_err"] = study.check(out, ref, inputs)
        del out
        row["dense_mask"] = masks.calls > 0
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--budget", type=float, default=140.0, help="seconds of wall clock, compiles included")
    args = parser.parse_args()
    start = time.perf_counter()
    out_dir = Path(os.environ.get("OUT", "probe_out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}", flush=True)
    masks = _MaskCounter()
    rows = []
    for case, shape in SHAPES:
        for dtype in args.dtypes.split(","):
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
                    case_rows.append(_measure(case, shape, dtype, inputs, ref, impl, masks, elapsed < limit))
                    r = case_rows[-1]
                    print(f"  [{time.perf_counter() - start:6.1f} s] {case} {dtype} {impl}: {r['status']}"
                          f" {r.get('median_ms', float('nan')):.3f} ms {r.get('message', '')}", flush=True)
            rows.extend(case_rows)
            inputs = ref = None
            torch.cuda.empty_cache()

    with open(out_dir / f"{NAME}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)

    print(f"\n{NAME}: TFLOP/s (do_bench median, L2 flushed); ratios = peer ms / ours ms; "
          f"{time.perf_counter() - start:.0f} s in all")
    print(f"{'case':24s} {'dtype':8s} {'ours':>6s} {'cudnn':>6s} {'fa2':>6s} {'triton':>6s} "
          f"{'/cudnn':>6s} {'/fa2':>6s} {'/trit':>6s}  ours path; notes")
    for case, _ in SHAPES:
        for dtype in args.dtypes.split(","):
            sel = [r for r in rows if r["case"] == case and r["dtype"] == dtype]
            by = {r["impl"]: r for r in sel}
            tf = [f"{by[i]['tflops']:6.0f}" if by.get(i, {}).get("status") == "ok" else f"{'x':>6s}"
                  for i in IMPLS]
            notes = [f"{r['impl']} {r['status']}" for r in sel if r.get("status") != "ok"]
            notes += [f"{r['impl']} dense mask" for r in sel if r.get("dense_mask")]
            path = by.get("ours", {}).get("strategy") or "-"
            print(f"{case:24s} {dtype:8s} {' '.join(tf)} {_ratio(sel, 'sdpa_cudnn'):>6s} "
                  f"{_ratio(sel, 'sdpa_flash'):>6s} {_ratio(sel, 'ours_triton'):>6s}  {path}; "
                  + ", ".join(notes))
    print("targets (issue 11): chunk 1024/8192 causal ours/fa2 >= 1.5 and ours/cudnn >= 0.9; "
          f"csv: {out_dir / (NAME + '.csv')}")


if __name__ == "__main__":
    main()
