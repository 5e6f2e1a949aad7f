"""Hardware counters of the softmax strategies at the few-long-row shapes (Nsight Compute).

Does split read its segments a second time from HBM (the L2 re-read missing), or does its time go
elsewhere? For each case one launch is profiled by ncu (`--clock-control none`, caches flushed
before it, the default): DRAM bytes read and written against the ideal one read and one write,
the L2 hit rate, and the kernel's duration. The cases: split and looped (forced, launch table),
and torch.softmax. The parent runs ncu on this file with --child and
prints the table; writes $OUT/softmax_ncu.csv and the raw ncu CSV.

    python3 probes/softmax_ncu.py
"""
from __future__ import annotations

import csv
import glob
import io
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
SHAPES = [(16, 4194304, "float16"), (256, 262144, "float16"), (1024, 131072, "float16"),
          (4096, 32768, "float16"), (64, 1048576, "float32")]
VARIANTS = ("split", "looped", "torch")   # a copy_ of contiguous tensors is a memcpy, not a kernel
METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "lts__t_sector_hit_rate.pct", "lts__t_sector_op_read_hit_rate.pct"]


def cases():
    return [(r, c, dt, v) for r, c, dt in SHAPES for v in VARIANTS]


def child() -> None:
    import torch
    sys.path.insert(0, ROOT)
    from kernels import fused_softmax as fs
    for r, c, dt, v in cases():
        x = torch.randn(r, c, device="cuda", dtype=torch.float32).mul_(4).to(getattr(torch, dt))
        out = torch.empty_like(x)
        fn = {"split": lambda: fs.STRATEGIES["split"].run(x, out),
              "looped": lambda: fs.STRATEGIES["looped"].run(x, out),
              "torch": lambda: torch.softmax(x, -1)}[v]
        fn()                                   # compile and warm up outside the profiled range
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("prof")
        fn()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        del x, out
        torch.cuda.empty_cache()


def _ncu() -> str:
    found = shutil.which("ncu") or sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")
                                          + glob.glob("/usr/local/cuda*/bin/ncu"))
    if not found:
        raise SystemExit("ncu not found")
    return found if isinstance(found, str) else found[-1]


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    cmd = [_ncu(), "--clock-control", "none", "--nvtx", "--nvtx-include", "prof/", "--metrics",
           ",".join(METRICS), "--csv", "--page", "raw", sys.executable, os.path.abspath(__file__), "--child"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=float(os.environ.get("PROBE_BUDGET_S", 150)))
    with open(os.path.join(OUT, "softmax_ncu_raw.csv"), "w") as f:
        f.write(proc.stdout)
    if proc.returncode:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        raise SystemExit(f"ncu rc={proc.returncode}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    units = next((r for r in rows if not r.get("ID", "").isdigit()), {})
    rows = [r for r in rows if r.get("ID", "").isdigit()]         # drop the units row
    out_rows = []
    for (r, c, dt, v), rec in zip(cases(), rows):
        elem = 4 if dt == "float32" else 2
        ideal = r * c * elem
        num = lambda key: float(rec[key].replace(",", ""))     # ncu writes thousands with commas
        dur = num("gpu__time_duration.sum")
        out_rows.append(dict(shape=f"{r}x{c}", dtype=dt, variant=v, kernel=rec.get("Kernel Name", "")[:40],
                             us=dur, read_x=num("dram__bytes_read.sum") / ideal,
                             write_x=num("dram__bytes_write.sum") / ideal,
                             l2_hit=rec["lts__t_sector_hit_rate.pct"],
                             l2_read_hit=rec["lts__t_sector_op_read_hit_rate.pct"]))
    if len(rows) != len(cases()):
        print(f"WARNING: {len(rows)} profiled kernels for {len(cases())} cases")
    with open(os.path.join(OUT, "softmax_ncu.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out_rows[0]))
        w.writeheader()
        w.writerows(out_rows)
    print("DRAM bytes over the ideal one read / one write; duration in",
          units.get("gpu__time_duration.sum", "?"))
    for o in out_rows:
        print(f"{o['shape']:>12} {o['dtype']:>8} {o['variant']:>7} {o['us']:>10.1f} read {o['read_x']:.3f} "
              f"write {o['write_x']:.3f} L2 hit {o['l2_hit']} read-hit {o['l2_read_hit']}  {o['kernel']}")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
