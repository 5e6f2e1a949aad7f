"""Hardware counters of the softmax strategies at the few-long-row shapes (Nsight Compute).

Does split read its segments a second time from HBM (the L2 re-read missing), or does its time go
elsewhere? For each case one launch is profiled by ncu (`--clock-control none`, caches flushed
before it, the default): DRAM bytes read and written against the ideal one read and one write,
the L2 hit rate, and the kernel's duration. The cases: split and looped (forced, launch table),
and torch.softmax. The parent runs ncu on this file with --child and
prints the table; writes $OUT/softmax_ncu.csv and the raw ncu CSV.

    python3 probes/softmax_ncu.py

DIAG=issue: what bounds the register-resident row kernel and the looped kernel at long rows, per
dtype (fp32 4096x32768 row streams at 0.96 of the copy, fp16 at the same shape at 0.74, looped
fp16 at 0.87): row and looped at 4096x32768 fp16 and fp32, looped at 2048x65537 fp16, split at
16x4194304 fp16 and fp32. Two ncu passes over the same launches: fixed metrics (duration, DRAM
bytes, IPC, issue slots busy, achieved occupancy, DRAM throughput), then every per-pipe
instruction share and every warp stall reason by regex (`sm__inst_executed_pipe_*`,
`smsp__average_warps_issue_stalled_*_per_issue_active`), each reason in cycles a warp waits per
issued instruction; $OUT/softmax_ncu_issue.csv, and per case the busiest pipes and the largest
stall reasons.

    DIAG=issue python3 probes/softmax_ncu.py
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
DIAG = os.environ.get("DIAG", "")
ISSUE_CASES = [(4096, 32768, "float16", "row"), (4096, 32768, "float16", "looped"),
               (4096, 32768, "float32", "row"), (4096, 32768, "float32", "looped"),
               (2048, 65537, "float16", "looped"), (16, 4194304, "float16", "split"),
               (16, 4194304, "float32", "split")]
ISSUE_METRICS = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
                 "sm__inst_executed.avg.per_cycle_active", "sm__inst_issued.avg.pct_of_peak_sustained_active",
                 "sm__warps_active.avg.pct_of_peak_sustained_active",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed"]
ISSUE_REGEX = ["regex:^sm__inst_executed_pipe_[a-z0-9_]+\\.avg\\.pct_of_peak_sustained_active$",
               "regex:^smsp__average_warps_issue_stalled_[a-z0-9_]+_per_issue_active\\.ratio$"]


def cases():
    if DIAG == "issue":
        return ISSUE_CASES
    return [(r, c, dt, v) for r, c, dt in SHAPES for v in VARIANTS]


def child() -> None:
    import torch
    sys.path.insert(0, ROOT)
    from kernels import fused_softmax as fs
    for r, c, dt, v in cases():
        x = torch.randn(r, c, device="cuda", dtype=torch.float32).mul_(4).to(getattr(torch, dt))
        out = torch.empty_like(x)
        fn = (lambda: torch.softmax(x, -1)) if v == "torch" else (lambda: fs.STRATEGIES[v].run(x, out))
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


def profile(metrics: list[str], name: str, budget_s: float) -> tuple[list[dict], dict]:
    """One ncu run of the child over cases() with `metrics`: (a record per profiled kernel, units);
    the raw CSV is kept as $OUT/<name>.csv."""
    cmd = [_ncu(), "--clock-control", "none", "--nvtx", "--nvtx-include", "prof/", "--metrics",
           ",".join(metrics), "--csv", "--page", "raw", sys.executable, os.path.abspath(__file__), "--child"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_s)
    with open(os.path.join(OUT, f"{name}.csv"), "w") as f:
        f.write(proc.stdout)
    if proc.returncode:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        raise SystemExit(f"ncu rc={proc.returncode}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    units = next((r for r in rows if not r.get("ID", "").isdigit()), {})
    rows = [r for r in rows if r.get("ID", "").isdigit()]         # drop the units row
    if len(rows) != len(cases()):
        print(f"WARNING: {len(rows)} profiled kernels for {len(cases())} cases")
    return rows, units


def _num(text: str) -> float:
    try:
        return float(text.replace(",", ""))                   # ncu writes thousands with commas
    except ValueError:
        return float("nan")


def issue() -> None:
    """DIAG=issue (module docstring)."""
    budget = float(os.environ.get("PROBE_BUDGET_S", 150))
    base, units = profile(ISSUE_METRICS, "softmax_ncu_issue_raw", budget)
    out_rows = []
    for (r, c, dt, v), rec in zip(cases(), base):
        ideal = r * c * (4 if dt == "float32" else 2)
        out_rows.append(dict(shape=f"{r}x{c}", dtype=dt, variant=v, kernel=rec.get("Kernel Name", "")[:40],
                             duration=_num(rec["gpu__time_duration.sum"]),
                             read_x=_num(rec["dram__bytes_read.sum"]) / ideal,
                             write_x=_num(rec["dram__bytes_write.sum"]) / ideal,
                             ipc=_num(rec["sm__inst_executed.avg.per_cycle_active"]),
                             issue_pct=_num(rec["sm__inst_issued.avg.pct_of_peak_sustained_active"]),
                             occupancy_pct=_num(rec["sm__warps_active.avg.pct_of_peak_sustained_active"]),
                             dram_pct=_num(rec["dram__throughput.avg.pct_of_peak_sustained_elapsed"])))
    print("duration in", units.get("gpu__time_duration.sum", "?"), "; DRAM bytes over one read / one write")
    for o in out_rows:
        print(f"{o['shape']:>12} {o['dtype']:>8} {o['variant']:>7} {o['duration']:>10.1f} read {o['read_x']:.3f} "
              f"write {o['write_x']:.3f} IPC {o['ipc']:.2f} issue {o['issue_pct']:.1f}% "
              f"occupancy {o['occupancy_pct']:.1f}% DRAM {o['dram_pct']:.1f}%")
    with open(os.path.join(OUT, "softmax_ncu_issue.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out_rows[0]))
        w.writeheader()
        w.writerows(out_rows)
    detail, _ = profile(ISSUE_REGEX, "softmax_ncu_issue_detail_raw", budget)
    for (r, c, dt, v), rec in zip(cases(), detail):
        pipes = sorted(((_num(val), key.split("pipe_")[1].split(".")[0]) for key, val in rec.items()
                        if key.startswith("sm__inst_executed_pipe_")), reverse=True)
        stalls = sorted(((_num(val), key[len("smsp__average_warps_issue_stalled_"):].split("_per_issue")[0])
                         for key, val in rec.items() if key.startswith("smsp__average_warps_issue_stalled_")),
                        reverse=True)
        print(f"{r}x{c} {dt} {v}: pipes % " + ", ".join(f"{n} {p:.1f}" for p, n in pipes[:5] if p == p)
              + " | stalls (cycles per issue) " + ", ".join(f"{n} {s:.2f}" for s, n in stalls[:6] if s == s))


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    if DIAG == "issue":
        issue()
        return
    rows, units = profile(METRICS, "softmax_ncu_raw", float(os.environ.get("PROBE_BUDGET_S", 150)))
    out_rows = []
    for (r, c, dt, v), rec in zip(cases(), rows):
        elem = 4 if dt == "float32" else 2
        ideal = r * c * elem
        num = lambda key: _num(rec[key])
        dur = num("gpu__time_duration.sum")
        out_rows.append(dict(shape=f"{r}x{c}", dtype=dt, variant=v, kernel=rec.get("Kernel Name", "")[:40],
                             us=dur, read_x=num("dram__bytes_read.sum") / ideal,
                             write_x=num("dram__bytes_write.sum") / ideal,
                             l2_hit=rec["lts__t_sector_hit_rate.pct"],
                             l2_read_hit=rec["lts__t_sector_op_read_hit_rate.pct"]))
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
