"""Probe: how fast a plain read of a 268 MB decode cache can be, by how its programs walk it.

The question. At the decode grid's 268 MB shapes (B=1 Hkv=32 L=16384, B=4 Hkv=8 L=16384, B=16 Hkv=8
L=4096, B=16 Hkv=32 L=1024, B=64 Hkv=8 L=1024) ours takes 63.5-65.2 us in the run at e0c1a10, 0.90-0.92
of the 2 GiB read ceiling, whatever its program count (128 or 512) and split; cuDNN 63.7-66.3; the
calibrated read of 256 MiB reaches 0.96 (read_tbps_256mib, rooflab.ceilings' best read candidate).
Is the ~4 us between them the decode's work, or the way its programs walk memory (each one
streaming its own contiguous chunk, as a split or unsplit decode program streams its (b, h) slice)?
Candidates over the same bytes (fp32, K and V of B=1 Hkv=32 L=16384 D=128 fp16: 268,435,456 bytes):
- grid<P>: rooflab.ceilings._read_kernel, P programs, program p reading blocks p, p + P, ... (grid
  stride: at any moment the programs read neighbouring blocks), BLOCK 4096, 8 warps;
- chunk<P>.<s>: P programs, program p streaming the p-th contiguous 1/P of the buffer in BLOCK-element
  loads, a loop software-pipelined over s stages (4 warps, BLOCK 2048: 8 KB a load);
- ours: decode_attention at B=1 Hkv=32 L=16384 (split 4, 128 programs) and B=16 Hkv=8 L=4096
  (unsplit, 128 programs), fp16, D=128 (decode_balance's inputs).

Measured at e19dadf (GPU-2da622ba; every read's partials checked), us (TB/s): grid128 160.6 (1.67),
grid264 90.8 (2.96), grid528 66.5 (4.04), grid1056 68.4 (3.92); chunk128.3 93.7 (2.87), chunk128.4
74.3 (3.62), chunk512.3 61.8 (4.35), chunk528.3 62.1 (4.32), chunk528.4 61.9 (4.34); ours B=1 Hkv=32
L=16384 65.1 (4.12), B=16 Hkv=8 L=4096 63.9 (4.20). The best plain read tried here reads the 268 MB
at 4.35 TB/s, 94.5% of the run's 2 GiB read ceiling (4.60), so none of these reads meets 95% at this
size either; ours is 3-5% behind it. Plain reads of 128 programs, one an SM as ours's are, stay
far behind (2.9-3.6 TB/s), so ours's programs already keep more in flight than a plain loop of the
same count.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_read_programs.py
Writes $OUT/decode_read_programs.csv and prints us and TB/s per candidate last (CUPTI kernel time,
L2 flushed, decode_balance.time_all's shuffled rounds).
"""
from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from probe_csv import write_csv  # noqa: E402
from rooflab.ceilings import _read_kernel  # noqa: E402
from rooflab.timing import CudaTimer  # noqa: E402

fd, study = db.fd, db.study
NBYTES = 1 << 28 if not db.DRY else 1 << 16
GRID_PROGRAMS = [128, 132, 264, 528, 1056] if not db.DRY else [4]
CHUNK = [(128, 3), (128, 4), (132, 4), (512, 3), (528, 3), (528, 4)] if not db.DRY else [(4, 2)]
DECODE = [(1, 32, 16384), (16, 8, 4096)] if not db.DRY else [(1, 2, 256)]


@triton.jit
def _chunk_read(x_ptr, partial_ptr, n, per, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    # program p sums elements p * per .. (p + 1) * per - 1 (below n), BLOCK at a time
    pid = tl.program_id(0)
    start = pid.to(tl.int64) * per
    acc = tl.zeros([BLOCK], tl.float32)
    for off in tl.range(0, per, BLOCK, num_stages=STAGES):
        offs = start + off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=(offs < n) & (off + tl.arange(0, BLOCK) < per), other=0.0)
    tl.store(partial_ptr + pid, tl.sum(acc, 0))


def candidates(src: torch.Tensor) -> dict:
    """{name: (launch, its partials)} of the read candidates over src."""
    n = src.numel()
    out = {}
    for p in GRID_PROGRAMS:
        partial = torch.empty(p, device=src.device)
        iters = fd.cdiv(n, p * 4096)
        out[f"grid{p}"] = ((lambda q=partial, g=p, i=iters: _read_kernel[(g,)](src, q, n, i, BLOCK=4096,
                                                                               num_warps=8)), partial)
    for p, stages in CHUNK:
        partial = torch.empty(p, device=src.device)
        per = fd.cdiv(fd.cdiv(n, p), 2048) * 2048
        out[f"chunk{p}.{stages}"] = ((lambda q=partial, g=p, r=per, s=stages:
                                      _chunk_read[(g,)](src, q, n, r, BLOCK=2048, STAGES=s, num_warps=4)), partial)
    return out


def main():
    os.makedirs(db.OUT, exist_ok=True)
    db.timer = None if db.DRY else CudaTimer()
    print(f"device {'CPU interpreter' if db.DRY else torch.cuda.get_device_name()}", flush=True)
    src = torch.rand(NBYTES // 4, device=db.DEVICE)
    want = float(src.double().sum())
    fns, sizes, checks = {}, {}, {}
    for name, (fn, partial) in candidates(src).items():   # each read's partials add up to the buffer's sum
        fn()
        checks[name] = abs(float(partial.double().sum()) - want) <= 1e-4 * abs(want)
        fns[name], sizes[name] = fn, NBYTES
    for batch, heads_kv, cache_len in DECODE:
        shape = db.shape_dict(batch, heads_kv, cache_len)
        inputs = study.make_inputs(shape, db.DTYPE, db.DEVICE)
        q, k, v = inputs["q"], inputs["k_cache"], inputs["v_cache"]
        name = f"ours B={batch} Hkv={heads_kv} L={cache_len}"
        fns[name] = (lambda q=q, k=k, v=v: fd.decode_attention(q, k, v))
        sizes[name] = db.kv_bytes(shape)
    times = db.time_all(fns)
    rows = []
    for name, ms in times.items():
        us = statistics.median(ms) * 1e3
        rows.append({"impl": name, "bytes": sizes[name], "median_us": round(us, 3),
                     "tbps": round(sizes[name] / us / 1e6, 4), "ok": checks.get(name, True)})
    path = os.path.join(db.OUT, "decode_read_programs.csv")
    write_csv(path, rows)
    print(f"{'impl':>28} {'us':>9} {'TB/s':>7}  ok   -> {path}")
    for r in rows:
        print(f"{r['impl']:>28} {r['median_us']:>9.2f} {r['tbps']:>7.3f}  {r['ok']}")


if __name__ == "__main__":
    main()
