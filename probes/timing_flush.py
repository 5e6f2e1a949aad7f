"""Probe: what the L2 flush before a timed call leaves behind, and what it costs the call.

Until 810be35 rooflab.timing.CudaTimer flushed the L2 by overwriting a 256 MiB buffer. Every line
that flush leaves in the L2 is dirty, and the timed kernel's own traffic evicts them: up to the L2's
size (60 MiB on an H200, as torch reports it) of writes to HBM that belong to the flush land inside
the kernel's time. The timer now reads its buffer instead.
This probe times the same calls after four flushes, in shuffled rounds, one profiler session a
round (CUPTI kernel time, rooflab.timing.device_segments):
- store:    the 256 MiB overwrite (the timer as it was);
- read:     a 256 MiB read of the same buffer (the L2 left holding clean lines only; the timer
            since 810be35);
- read512:  a 512 MiB read (is 256 MiB enough to evict the call's own data?);
- none:     an empty kernel (warm L2: what a flush that misses would show).
Calls: rooflab.ceilings' read kernel over 16-512 MiB, torch copy_, decode (ours, cuDNN) and
softmax (ours, torch) at shapes of the grid; decode and softmax checked against float64 first.

Measured on an H200 at 7b8efb1, us, store / read / read512 / none: read 16 MiB 7.1 / 5.3 / 5.3 / 3.3;
64 MiB 21.9 / 16.1 / 16.2 / 16.1; 128 MiB 38.6 / 30.5 / 30.5 / 30.5; 256 MiB 68.6 / 60.6 / 60.7 / 60.5;
512 MiB 126.2 / 117.8 / 117.8 / 118.1; copy 64 MiB 33.7 / 30.5 / 30.6 / 32.5; copy 256 MiB 127.2 / 123.7
/ 123.7 / 126.2; decode ours B=1 Hkv=32 L=16384 74.5 / 64.9 / 65.3 / 64.7, cuDNN 75.8 / 65.8 / 66.2 /
65.8; ours B=16 Hkv=8 L=4096 73.2 / 63.9, cuDNN 73.5 / 64.0; ours B=1 Hkv=8 L=131072 136.0 / 126.1,
cuDNN 135.1 / 125.5; softmax ours 16x4194304 fp16 104.8 / 100.6, torch 1062.6 / 1051.4; ours 4096x8192
34.9 / 32.0; ours 1024x131072 196.2 / 190.0, torch 288.9 / 280.3. The overwrite costs every call that
moves more than the L2 about 8-10 us of write-back; 256 MiB of reads evict as well as 512
(rooflab.timing now flushes by a read).

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/timing_flush.py
Writes $OUT/timing_flush.csv; prints us per call and flush last.
"""
from __future__ import annotations

import csv
import os
import random
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from rooflab.ceilings import _read_kernel  # noqa: E402
from rooflab.studies import decode as decode_study  # noqa: E402
from rooflab.studies import softmax as softmax_study  # noqa: E402
from rooflab.timing import CudaTimer  # noqa: E402

OUT = os.environ.get("OUT", "./probe_out")
ROUNDS, CALLS = 3, 10
MiB = 2**20


@triton.jit
def _flush_l2_store(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros([BLOCK], tl.int32), mask=offs < n)


@triton.jit
def _flush_l2_none(ptr):
    pass


class StoreFlush(CudaTimer):
    """The timer as it was before 810be35: the flush overwrites its buffer."""
    def flush(self) -> None:
        _flush_l2_store[self._grid](self._buffer, self._buffer.numel(), BLOCK=self._block, num_warps=8)


class NoFlush(CudaTimer):
    def flush(self) -> None:
        _flush_l2_none[(1,)](self._buffer)


def calls() -> dict:
    """{name: (fn, bytes moved)}."""
    out = {}
    src = torch.rand(512 * MiB // 4, device="cuda")
    for mib in (16, 64, 128, 256, 512):
        n = mib * MiB // 4
        partial = torch.empty(triton.cdiv(n, 4096), device="cuda")
        out[f"read {mib} MiB"] = ((lambda n=n, p=partial: _read_kernel[(p.numel(),)](src, p, n, 1, BLOCK=4096,
                                                                                     num_warps=8)), n * 4)
    for mib in (64, 256):
        a = torch.rand(mib * MiB // 4, device="cuda")
        b = torch.empty_like(a)
        out[f"copy {mib} MiB"] = ((lambda a=a, b=b: b.copy_(a)), 2 * a.numel() * 4)
    impls = decode_study.impls()
    for batch, hkv, length in ((1, 32, 16384), (16, 8, 4096), (1, 8, 131072)):
        shape = {"batch": batch, "heads_q": 32, "heads_kv": hkv, "cache_len": length, "head_dim": 128,
                 "ragged": False}
        inputs = decode_study.make_inputs(shape, torch.float16, "cuda")
        ref = decode_study.reference(inputs)
        nbytes = 2 * batch * hkv * length * 128 * 2
        for impl in ("ours", "sdpa_cudnn"):
            fn = impls[impl](inputs)
            _, rel = decode_study.check(fn(), ref, inputs)
            assert rel <= decode_study.tolerance("float16"), (impl, shape, rel)
            out[f"decode {impl} B={batch} Hkv={hkv} L={length}"] = (fn, nbytes)
        del ref
    impls = softmax_study.impls()
    for rows, cols in ((16, 4194304), (4096, 8192), (1024, 131072)):
        inputs = softmax_study.make_inputs({"rows": rows, "cols": cols}, torch.float16, "cuda")
        ref = softmax_study.reference(inputs)
        for impl in ("ours", "torch"):
            fn = impls[impl](inputs)
            _, rel = softmax_study.check(fn(), ref, inputs)
            assert rel <= softmax_study.tolerance("float16"), (impl, rows, cols, rel)
            out[f"softmax {impl} {rows}x{cols}"] = (fn, 2 * rows * cols * 2)
        del ref
    torch.cuda.empty_cache()
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    random.seed(0)
    print(f"device {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    timers = {"store": StoreFlush(), "read": CudaTimer(), "read512": CudaTimer(512), "none": NoFlush()}
    table = calls()
    for fn, _ in table.values():
        for _ in range(3):
            fn()
    samples = {(t, c): [] for t in timers for c in table}
    for _ in range(ROUNDS):
        order = [(t, c) for t in timers for c in table]
        random.shuffle(order)
        for t, c in order:
            samples[(t, c)].extend(timers[t].cupti(table[c][0], CALLS))
    rows = []
    for (t, c), ms in samples.items():
        us = statistics.median(ms) * 1e3
        rows.append({"call": c, "flush": t, "median_us": round(us, 3), "bytes": table[c][1],
                     "tbps": round(table[c][1] / us / 1e6, 4), "reps": len(ms)})
    with open(os.path.join(OUT, "timing_flush.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    by = {(r["call"], r["flush"]): r for r in rows}
    print(f"{'call':42s}" + "".join(f"{t:>18s}" for t in timers))
    for c in table:
        print(f"{c:42s}" + "".join(f"{by[(c, t)]['median_us']:10.1f}us {by[(c, t)]['tbps']:5.2f}" for t in timers))


if __name__ == "__main__":
    main()
