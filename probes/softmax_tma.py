"""The Gluon split softmax (probes/softmax_smem_split.py: segments held in shared memory, loaded by TMA)
against the shipped dispatch (the Triton split kernel at these shapes), torch.softmax and a copy of
the same bytes, at the few-long-row shapes.

Variants per shape: `ours` (kernels.fused_softmax.softmax as committed), `tma` (the segment count
softmax_smem_split.segments chooses), `tma S=n` (forced segment counts around it), `torch`,
and `copy` (out.copy_(x): the same read and write). Every variant but copy is checked against a
float64 softmax first (rows holding -inf entries and a row that is all -inf included); a mismatch
is a row, not a time. Kernel time: CUPTI device time between L2 flushes (rooflab.timing), every
variant of a shape in one profiler session, in shuffled rounds. Writes $OUT/softmax_tma.csv and
prints us and the share of the copy's time per shape.

    PYTHONUNBUFFERED=1 python3 probes/softmax_tma.py
"""
from __future__ import annotations

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernels import fused_softmax as fs  # noqa: E402
import softmax_smem_split as sh  # noqa: E402  (probes/, beside this script)
from softmax_small import long_row_probe  # noqa: E402  the shared probe steps
from kernels._device import cdiv  # noqa: E402

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "120"))
SHAPES = [(r, c, dt) for dt in (torch.float16, torch.float32, torch.bfloat16)
          for r, c in ((16, 4194304), (64, 1048576), (256, 262144), (512, 151936), (1024, 131072))]


DIAG = os.environ.get("DIAG", "")
if DIAG in ("layout", "layout2"):
    SHAPES = [(16, 4194304, torch.float16), (256, 262144, torch.float16), (1024, 131072, torch.float16),
              (64, 1048576, torch.float32), (1024, 131072, torch.float32)]
if DIAG == "exchange":
    SHAPES = [(16, 4194304, torch.float16), (64, 1048576, torch.float16), (256, 262144, torch.float16),
              (64, 1048576, torch.float32), (1024, 131072, torch.float32)]


def tma_variant(x, out, sms, n_segs, **kw):
    rows = x.shape[0]
    parts = torch.empty((2, rows, n_segs), dtype=torch.float32, device=x.device)
    arrive, depart = fs._counters(x.device, rows)

    def run():   # writes `out`, returns None (the result is `out`)
        sh.launch(x, out, parts, arrive, depart, sms, n_segs, **kw)
    return run


def variants(x: torch.Tensor, out: torch.Tensor, sms: int) -> dict:
    rows, cols = x.shape
    fns = {"ours": lambda: fs.softmax(x, -1), "torch": lambda: torch.softmax(x, -1)}
    if DIAG == "layout2" and sh.supports(x, out, sms):   # the max in 16 bits, stats a round ahead
        n_boxes = sh.boxes_per_row(cols, x.dtype)
        for per_sm in (2, 3):
            ring = sh.RING_BOXES // per_sm
            n_segs = sh.segments(rows, cols, x.dtype, sms, per_sm, ring)[0]
            n_ahead = cdiv(n_boxes, ring // 2)
            for stats in (0, 2) if x.dtype != torch.float32 else (0,):
                fns[f"tma {per_sm}/SM S={n_segs} st{stats}"] = tma_variant(x, out, sms, n_segs, per_sm=per_sm,
                                                                           stats=stats)
                if n_ahead <= sms * per_sm and n_ahead != n_segs:
                    fns[f"tma {per_sm}/SM S={n_ahead} st{stats} ahead"] = tma_variant(
                        x, out, sms, n_ahead, per_sm=per_sm, stats=stats)
        return fns
    if DIAG == "layout":   # programs an SM (ring split among them), stats kind, stats a round ahead
        if sh.supports(x, out, sms):
            for per_sm in (1, 2, 3, 4):
                ring = sh.RING_BOXES // per_sm
                got = sh.segments(rows, cols, x.dtype, sms, per_sm, ring)
                if got is None:
                    continue
                n_segs = got[0]
                for stats in (0, 1):
                    for ahead in (True, False):
                        if not ahead and 2 * got[1] > ring:
                            continue
                        fns[f"tma {per_sm}/SM S={n_segs} st{stats}{' ahead' if ahead and 2 * got[1] <= ring else ''}"] = \
                            tma_variant(x, out, sms, n_segs, per_sm=per_sm, stats=stats, ahead=ahead)
        return fns
    if sh.supports(x, out, sms):
        n_segs = sh.segments(rows, cols, x.dtype, sms)[0]
        fns[f"tma S={n_segs}"] = tma_variant(x, out, sms, n_segs)
        if DIAG == "exchange":   # warps, and no exchange at all (timing only: unchecked)
            fns[f"tma S={n_segs} 16 warps"] = tma_variant(x, out, sms, n_segs, num_warps=16)
            fns[f"tma S={n_segs} 4 warps"] = tma_variant(x, out, sms, n_segs, num_warps=4)
        n_boxes = sh.boxes_per_row(cols, x.dtype)
        for s in sorted({max(1, n_segs // 2), n_segs * 2, min(sms, n_boxes)}):
            if s != n_segs and s <= sms and cdiv(n_boxes, s) <= sh.RING_BOXES and s <= n_boxes:
                fns[f"tma S={s}"] = tma_variant(x, out, sms, s)
    return fns


def exchange_off(x, out, sms) -> dict:
    """DIAG=exchange: the TMA kernel without its exchange (wrong results, timed unchecked)."""
    r, c = x.shape
    if DIAG != "exchange" or not sh.supports(x, out, sms):
        return {}
    return {f"tma S={s} no-exchange (unchecked)": tma_variant(x, out, sms, s, exchange=False)
            for s in sorted({sh.segments(r, c, x.dtype, sms)[0], min(sms, sh.boxes_per_row(c, x.dtype))})}


def main() -> None:
    long_row_probe(SHAPES, variants, "softmax_tma.csv", BUDGET_S, extra=exchange_off)


if __name__ == "__main__":
    main()
