"""Probe: what the end of a split decode launch costs, at the KV reads of 256 MB and more that the
24a2def run read under 95% of the read ceiling.

The question. At 268 MB the calibrate job's own read ran 4.42 TB/s, 96% of the 2 GiB read, and
ours 0.90-0.92 of the ceiling; at 537 MB on 128-program launches ours read 0.92-0.94. A split
launch ends with each (batch, kv head)'s programs storing their partials, a barrier, an
acq_rel atomic on the head's counter, and the last one to arrive merging the partials into the
output (kernels.flash_decoding, `_decode_kernel`'s SPLIT branch): a chain of round trips to L2
after the last tile, with nothing of that program's in flight. How much of the gap to a plain
read of the same bytes is that chain, and how much is the tile loop itself?

Variants per shape, all on the rule's split count and tiles (planned_splits):
  ours      decode_attention as shipped (checked against the float64 reference)
  nomerge   a copy of the module whose last program never merges (the atomic stays): timing only
  noatomic  a copy with neither the atomic nor the merge (partials stored, nothing else): timing only
  cudnn     SDPA's cuDNN backend (checked)
  read2048, read4096  rooflab.ceilings' read kernel over the same bytes (decode_balance's)
nomerge and noatomic write no output: they only time what the end of the launch costs. The
unsplit shapes (B=16 Hkv=8 L=4096, 128 programs; B=16 Hkv=32 L=1024, 512) have no merge: a
control for the tile loop against the read.

Kernel time: CUPTI device time between L2 flushes, every variant of a shape in one profiler session
in shuffled rounds (decode_balance's helpers), fp16, Hq=32, D=128.

Measured at 1e852ce on GPU-45963185 (fp16, us of kernel time; ours / nomerge / noatomic / the
faster read of the same bytes):
  268 MB, S=4, 128 programs: B=1 Hkv=32 L=16384 65.1 / 64.5 / 63.7 / 60.6; B=4 Hkv=8 L=16384
    64.7 / 64.6 / 63.8 / 59.9
  537 MB, 128 programs: B=1 Hkv=8 L=131072 (S=16 on LONG_CHUNK_CONFIG) 126.4 / 123.4 / 123.1 / 117.9;
    B=4 Hkv=8 L=32768 124.5 / 123.8 / 123.0 / 117.8; B=1 Hkv=32 L=32768 124.0 / 123.3 / 122.8 / 117.7
  unsplit controls, no merge: B=16 Hkv=8 L=4096 (128 programs) 63.6 / - / - / 60.6; B=16 Hkv=32
    L=1024 (512 programs) 64.3 / - / - / 60.6
The counter and the merge cost 1-3% (noatomic 0.97-0.99x ours); the tile loop itself, with no
exchange at all, takes 1.04-1.06x the read's time, as the unsplit launches do (1.05-1.06x). The
read here ran 4.43 TB/s at 268 MB (96% of the run's 4.60) and 4.56 at 537 MB (99%): 95% of the
ceiling at 268 MB asks ours to come within 1% of a plain read of the same bytes. (The cuDNN rows
of that call failed on a bug of this probe, fixed since: its factory was wrapped in one lambda
too many.)
Again at 6b22037 on GPU-610f8862, cuDNN included: ours 62.6-64.3 us at 268 MB and 122.8-125.9 at
537 MB, nomerge 0.98-0.99x, noatomic 0.97-0.99x, cuDNN 0.99-1.03x, the read 0.92-0.96x (59.7-59.9 us
at 268 MB, 4.49 TB/s).

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_merge_tail.py
Writes $OUT/decode_merge_tail.csv and prints us and the ratio over `ours` per shape.
PROBE_DRYRUN=1 runs it in Triton's CPU interpreter on tiny shapes.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)
from module_copy import import_source  # noqa: E402

import torch  # noqa: E402

fd, study = db.fd, db.study
SHAPES = [(1, 32, 16384), (4, 8, 16384), (1, 8, 131072), (4, 8, 32768), (1, 32, 32768),
          (16, 8, 4096), (16, 32, 1024)]
if db.DRY:
    SHAPES = [(1, 2, 600), (2, 2, 70)]

_MERGE = "if arrived == n_valid - 1:"
_ATOMIC = 'arrived = tl.atomic_add(Count + bh, 1, sem="acq_rel", scope="gpu")'
EDITS = {
    "nomerge": [(_MERGE, "if arrived == -1:")],
    "noatomic": [(_ATOMIC, "arrived = 0"), (_MERGE, "if arrived == -1:")],
}


def _module(name: str, edits):
    src = open(fd.__file__).read()
    for old, new in edits:
        assert src.count(old) == 1, (name, old)
        src = src.replace(old, new)
    return import_source(f"flash_decoding_{name}", src)


MODULES = {name: _module(name, edits) for name, edits in EDITS.items()}


def main():
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}; (S): splits; x: over ours; read: the same bytes")
    num_sms = db.sm_count(torch.device(db.DEVICE))
    table = []
    os.makedirs(db.OUT, exist_ok=True)
    db.timer = None if db.DRY else db.CudaTimer()
    print(f"device {'CPU interpreter' if db.DRY else torch.cuda.get_device_name()}", flush=True)
    for batch, heads_kv, cache_len in SHAPES:
        if db.left() < 0:
            break
        shape = dict(db.shape_dict(batch, heads_kv, cache_len), ragged=False)
        inputs = study.make_inputs(shape, db.DTYPE, db.DEVICE)
        ref = study.reference(inputs)
        q, k, v = inputs["q"], inputs["k_cache"], inputs["v_cache"]
        s = fd.planned_splits(batch, heads_kv, cache_len, db.D, 2, num_sms, db.HQ // heads_kv)
        splits = {"ours": s, "nomerge": s, "noatomic": s, "cudnn": ""}
        checked = {"ours": lambda: (lambda: fd._decode(q, k, v, None, None, None)),
                   "cudnn": lambda x=inputs: study.impls()["sdpa_cudnn"](x)}    # the study's factory: a call
        first = len(db.ROWS)
        good = db.checked(shape, "tail", checked, ref, splits)
        fns = {name: fn for name, (fn, _) in good.items()}
        rels = {name: rel for name, (_, rel) in good.items()}
        timing_only = {} if s == 1 else {
            name: (lambda m=m: (lambda: m._decode(q, k, v, None, None, None))) for name, m in MODULES.items()}
        fns.update(db.checked(shape, "tail", timing_only, None, splits))
        reads, keep = db.read_candidates(db.kv_bytes(shape))
        fns.update(db.checked(shape, "tail", reads, None, {}))
        times = db.time_all(fns)
        del keep
        res = {}
        for name, ms in times.items():
            us = db.statistics.median(ms) * 1e3
            res[name] = us
            db.row(shape, "tail", name, splits.get(name, ""), us=us, rel=rels.get(name), reps=len(ms))
        db.finish(first, res)
        table.append(((batch, heads_kv, cache_len, False), res, {**splits, "read2048": "", "read4096": ""}))
        del inputs, ref
        if not db.DRY:
            torch.cuda.empty_cache()
        print(f"  done B={batch} Hkv={heads_kv} L={cache_len} at {db.time.perf_counter() - db.T0:.0f} s", flush=True)
    path = os.path.join(db.OUT, "decode_merge_tail.csv")
    db.write_csv(path, db.ROWS)
    db.print_ratios(table, ["ours", "nomerge", "noatomic", "cudnn", "read2048", "read4096"], "ours", 13)
    db.print_bad(path)


if __name__ == "__main__":
    if not (db.DRY or torch.cuda.is_available()):
        sys.exit("decode_merge_tail needs a CUDA GPU")
    main()
