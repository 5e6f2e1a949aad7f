"""Probe: copies against softmax at the sizes where softmax rows read above the copy ceiling.

The committed run at d789a27 has 20 above_ceiling flags: softmax rows of 67-134 MB (4096x2048 and
4096x4096 fp32, 16384x1024 fp32, 8192x4096 fp16 and bf16) at 1.03-1.09x the 4.30 TB/s copy ceiling,
ours, Liger, torch.compile and the seed kernels alike, while the calibrate job's copies of 32 MiB to
1 GiB moved (rooflab.ceilings.sized_copies) ran at 4.06-4.33 TB/s. This probe times, at each such
shape, every copy the calibrate job ranks and two copies shaped otherwise, beside the softmax
kernels, all on the studies' timing: CUPTI kernel time with the L2 flushed by a read
(rooflab.timing.CudaTimer), in shuffled rounds.

Candidates, each moving a (rows, cols) tensor of the shape's dtype into another of the same shape:
  calib:<how>    rooflab.ceilings.copy_candidates (torch's copy_ and the one-block-a-program copies),
                 over the tensor flat
  rowcopy_w<w>   one program a row: the row loaded whole (cols padded to a power of two), then
                 stored, w warps: a row softmax without its arithmetic; rowcopy_cs_w<w> with the
                 store streaming (.cs), as the row softmax kernels store
  flatcopy_cs_b<b>_w<w>  the calibrate job's one-block-a-program copy with streaming stores
  gridcopy_p<m>  m programs an SM, each copying 4096-element blocks p, p + P, ... (the read
                 ceiling's grid-stride loop), 3 stages
  ours, liger, torch  the softmax kernels of the study (rooflab.studies.softmax)
Every copy is checked equal to its source and every softmax against torch.softmax in fp32 before it
is timed. TB/s counts bytes read + written (2 x rows x cols x element size).

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/copy_ceiling.py
Writes $OUT/copy_ceiling.csv (OUT defaults to ./probe_out) and prints TB/s per shape and candidate
last. PROBE_DRYRUN=1: Triton's CPU interpreter on tiny shapes, correctness only, no timing.
"""
from __future__ import annotations

import os
import random
import statistics
import sys

DRY = os.environ.get("PROBE_DRYRUN") == "1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if DRY:
    from rooflab import interpreter
    interpreter.enable()   # TRITON_INTERPRET=1 before the kernels are imported

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from rooflab.ceilings import copy_candidates  # noqa: E402
from rooflab.studies import softmax as study  # noqa: E402
from probe_csv import write_csv  # noqa: E402  (probes/, the script's directory)

OUT = os.environ.get("OUT", "./probe_out")
DEVICE = "cpu" if DRY else "cuda"
ROUNDS, CALLS = (1, 1) if DRY else (3, 10)
SHAPES = [  # rows, cols, dtype: the flagged shapes, then one of twice the bytes
    (4096, 2048, torch.float32), (4096, 4096, torch.float32), (16384, 1024, torch.float32),
    (8192, 4096, torch.float16), (8192, 4096, torch.bfloat16), (16384, 4096, torch.float16),
]
if DRY:
    SHAPES = [(6, 100, torch.float32), (5, 64, torch.float16)]


@triton.jit
def _row_copy(dst_ptr, src_ptr, cols, BLOCK: tl.constexpr, CS: tl.constexpr = False):
    # CS: the store streaming (.cs), as the row softmax kernels store
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(src_ptr + row * cols + offs, mask=mask)
    if CS:
        tl.store(dst_ptr + row * cols + offs, x, mask=mask, cache_modifier=".cs")
    else:
        tl.store(dst_ptr + row * cols + offs, x, mask=mask)


@triton.jit
def _flat_copy_cs(dst_ptr, src_ptr, n, BLOCK: tl.constexpr):
    # the calibrate job's one-block-a-program copy with the store streaming (.cs)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask, cache_modifier=".cs")


def streaming_copies(dst: torch.Tensor, src: torch.Tensor) -> dict:
    """{name: call}: flat copies of src into dst (same shape) with streaming stores, and for a 2-D
    src one program a row with and without them."""
    n = src.numel()
    calls = {}
    for block, warps in ((1024, 8), (2048, 8), (4096, 8), (8192, 8)):
        calls[f"flatcopy_cs_b{block}_w{warps}"] = (lambda b=block, w=warps: _flat_copy_cs[(triton.cdiv(n, b),)](
            dst, src, n, BLOCK=b, num_warps=w))
    if src.dim() == 2:
        rows, cols = src.shape
        block = triton.next_power_of_2(cols)
        for warps in (4, 8):
            for cs in (False, True):
                calls[f"rowcopy{'_cs' if cs else ''}_w{warps}"] = (
                    lambda w=warps, c=cs: _row_copy[(rows,)](dst, src, cols, BLOCK=block, CS=c, num_warps=w))
    return calls


@triton.jit
def _grid_copy(dst_ptr, src_ptr, n, step, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    # step = programs x BLOCK elements; ITERS = cdiv(n, step), a constant of the launch
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    for _ in range(ITERS):
        mask = offs < n
        tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)
        offs += step


def candidates(x: torch.Tensor) -> tuple[dict, dict, torch.Tensor]:
    """({name: call}, {name: check}, dst) for the (rows, cols) tensor x: copies into dst, softmaxes."""
    rows, cols = x.shape
    dst = torch.empty_like(x)
    flat_src, flat_dst = x.view(-1), dst.view(-1)
    calls = {f"calib:{how}": fn for how, fn in copy_candidates(flat_dst, flat_src).items()}
    calls.update(streaming_copies(dst, x))
    sms = 4 if DRY else torch.cuda.get_device_properties(x.device).multi_processor_count
    n, grid_block = x.numel(), 4096
    for per_sm in (2, 4, 8):
        programs = sms * per_sm
        calls[f"gridcopy_p{per_sm}"] = (lambda g=programs: _grid_copy[(g,)](
            dst, x, n, g * grid_block, ITERS=triton.cdiv(n, g * grid_block), BLOCK=grid_block, num_warps=8,
            num_stages=3))
    checks = {name: (lambda: torch.equal(dst, x)) for name in calls}
    want = torch.softmax(x.float(), dim=-1)
    impls = study.impls()
    for name in ("ours", "liger", "torch"):
        try:
            fn = impls[name]({"x": x})
        except Exception as exc:   # liger not installed or refusing the row: a missing column, not a stop
            print(f"  {name}: {type(exc).__name__}: {exc}", flush=True)
            continue
        calls[name] = fn
        checks[name] = (lambda fn=fn: torch.allclose(fn().float(), want, rtol=2e-2, atol=1e-3))
    return calls, checks, dst


def main():
    from rooflab.timing import CudaTimer
    timer = None if DRY else CudaTimer()
    print(f"device {'CPU interpreter (dry run)' if DRY else torch.cuda.get_device_name()}", flush=True)
    os.makedirs(OUT, exist_ok=True)
    rows_out, table = [], {}
    rng = random.Random(0)
    for rows, cols, dtype in SHAPES:
        x = torch.randn(rows, cols, device=DEVICE).to(dtype)
        moved = 2 * x.numel() * x.element_size()
        calls, checks, dst = candidates(x)
        ok = {}
        for name, fn in calls.items():
            dst.fill_(float("nan"))                        # an unwritten element fails the check
            fn()
            ok[name] = bool(checks[name]())
        samples = {name: [] for name in calls if ok[name]}
        for _ in range(ROUNDS):
            order = list(samples)
            rng.shuffle(order)
            for name in order:
                calls[name]()                                  # warm
                if timer is not None:
                    samples[name].extend(timer.cupti(calls[name], CALLS))
        shape = f"{rows}x{cols} {str(dtype).removeprefix('torch.')}"
        for name, fn in calls.items():
            ms = statistics.median(samples[name]) if samples.get(name) else float("nan")
            tbps = moved / (ms * 1e-3) / 1e12 if samples.get(name) else float("nan")
            rows_out.append({"shape": shape, "mb": round(moved / 1e6, 1), "impl": name, "ok": ok[name],
                             "median_us": round(ms * 1e3, 2), "tbps": round(tbps, 3)})
            table.setdefault(shape, {})[name] = tbps if ok[name] else None
        print(f"  done {shape}", flush=True)
    path = os.path.join(OUT, "copy_ceiling.csv")
    write_csv(path, rows_out)
    bad = [r for r in rows_out if not r["ok"]]
    print(f"\nTB/s (read + written over CUPTI kernel time, L2 flushed by a read); {len(bad)} failed checks -> {path}")
    for shape, by_impl in table.items():
        best_copy = max(((v, k) for k, v in by_impl.items() if v is not None and k not in ("ours", "liger", "torch")),
                        default=(float("nan"), "-"))
        soft = "  ".join(f"{k} {by_impl[k]:.2f}" for k in ("ours", "liger", "torch") if by_impl.get(k) is not None)
        calib = max((v for k, v in by_impl.items() if v is not None and k.startswith("calib:")), default=float("nan"))
        print(f"{shape:>22}: best copy {best_copy[0]:.2f} ({best_copy[1]}), best calib {calib:.2f} | {soft}")
    for r in bad:
        print(f"  FAILED CHECK {r['shape']} {r['impl']}")


if __name__ == "__main__":
    if not (DRY or torch.cuda.is_available()):
        sys.exit("copy_ceiling needs a CUDA GPU")
    main()
