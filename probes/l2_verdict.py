"""The runs of probes/l2_state.sh side by side: does the fast state follow lines left as evict_last?

For each run folder under ROOT (argument, else $OUT) holding a trial_order.csv: the median ratio of
the implementation timed right after each predecessor of interest to that implementation's own
median (as trial_order's after-effects), and, where the run timed a copy, the looped kernel's and
`ours`'s medians over the copy's. Printed as one table, the lines that decide the hypothesis last:

- base (the sweep's flush) against reset_call: the spread between the blocks after seed_multipass
  (slow) and after the looped and split kernels (fast) should close with RESET=call;
- stand_ins: the block after `lastread` (x read evict_last) fast, after `plainread` and `firstread`
  not;
- big against big_reset: looped at 32768x4096 fp32 should fall under the in-trial copy with RESET=call.

    python3 probes/l2_verdict.py $OUT        # after bash probes/l2_state.sh COMMIT
"""
from __future__ import annotations

import csv
import os
import statistics
import sys

PREDECESSORS = ("ours_looped", "ours_split", "seed_multipass", "lastread", "plainread", "firstread", "ones3")
RUNS = ("reset_call", "stand_ins", "fillread", "big", "big_reset")


def read(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return [dict(r, us=float(r["us"])) for r in csv.DictReader(f) if r.get("us")]


def after(records: list[dict]) -> dict[str, float]:
    """{predecessor: median over its blocks of the next implementation's time over that one's median}."""
    base = {impl: statistics.median(r["us"] for r in records if r["impl"] == impl)
            for impl in {r["impl"] for r in records}}
    ratios: dict[str, list[float]] = {}
    for r in records:
        if r["before"] != "-":
            ratios.setdefault(r["before"], []).append(r["us"] / base[r["impl"]])
    return {k: statistics.median(v) for k, v in ratios.items()}


def against_copy(records: list[dict]) -> dict[str, float]:
    """{impl: its median over the in-trial copy's} for ours and ours_looped, where a copy was timed."""
    med = {impl: statistics.median(r["us"] for r in records if r["impl"] == impl)
           for impl in {r["impl"] for r in records}}
    if "copy" not in med:
        return {}
    return {impl: med[impl] / med["copy"] for impl in ("ours", "ours_looped") if impl in med}


def spread(ratios: dict[str, float]) -> float | None:
    """After seed_multipass over the faster of after looped and after split: 1.0 means one state."""
    fast = [ratios[k] for k in ("ours_looped", "ours_split") if k in ratios]
    return ratios["seed_multipass"] / min(fast) if "seed_multipass" in ratios and fast else None


def main(root: str) -> None:
    found = {name: read(os.path.join(root, name, "trial_order.csv")) for name in RUNS
             if os.path.exists(os.path.join(root, name, "trial_order.csv"))}
    if not found:
        raise SystemExit(f"no trial_order.csv under {root}/{{{','.join(RUNS)}}}")
    print(f"{'run':11} " + " ".join(f"{p[:11]:>11}" for p in PREDECESSORS) + "  seed/fast  ours/copy looped/copy")
    verdict = {}
    for name, records in found.items():
        ratios, copy = after(records), against_copy(records)
        verdict[name] = (ratios, spread(ratios), copy)
        cells = " ".join(f"{ratios[p]:11.3f}" if p in ratios else f"{'-':>11}" for p in PREDECESSORS)
        s = verdict[name][1]
        print(f"{name:11} {cells}  {s:9.3f}" if s else f"{name:11} {cells}  {'-':>9}", end="")
        print("  " + "  ".join(f"{copy.get(i, float('nan')):9.3f}" for i in ("ours", "ours_looped")))
    print()
    if "stand_ins" in verdict:
        r = verdict["stand_ins"][0]
        if {"lastread", "plainread"} <= set(r):
            told = "evict_last leaves the next block fast" if r["lastread"] < 0.99 * r["plainread"] \
                else "the read's priority does not set the state"
            first = f", after firstread {r['firstread']:.3f}x" if "firstread" in r else ""
            print(f"after lastread {r['lastread']:.3f}x, after plainread {r['plainread']:.3f}x{first}: {told}")
        if verdict["stand_ins"][1]:          # the sweep's flush: the two states, for reset_call below
            print(f"sweep's flush: after seed_multipass / after looped or split = {verdict['stand_ins'][1]:.3f}")
    if "reset_call" in verdict and verdict["reset_call"][1]:
        s = verdict["reset_call"][1]
        print(f"RESET=call: after seed_multipass / after looped or split = {s:.3f}"
              + (" (one state)" if s <= 1.01 else " (two states remain)"))
    if "big" in verdict and "big_reset" in verdict:
        a, b = verdict["big"][2].get("ours_looped"), verdict["big_reset"][2].get("ours_looped")
        if a and b:
            print(f"32768x4096 fp32 looped over the in-trial copy: {a:.3f} with the sweep's flush, {b:.3f} with RESET=call")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "probe_out"))
