"""Quality gates over one GPU's result rows: numbers that should not be published unchecked.

`flags(frame)` returns one line per flag; `cases(flags)` the distinct cases to re-measure once.
Only `ok` rows are judged, and never a transcribed article's row (data/published/, which
carries a `source` column). The two kernel gates compare kernel time (`cupti`) where both
rows have it, else the plain-call time (`events`). Gates:

ours_vs_strategy  the dispatcher's pick (`ours`, strategy s) against the same strategy forced
                  (`ours_<s>` for softmax, `ours_nosplit` for decode's nosplit, `ours_triton` for
                  attention on the Triton kernel, any s but `gluon-hopper`): the same code, so
                  medians more than 10% apart with disjoint intervals mean a noisy run.
dtype_twin        one impl at one shape in float16 and bfloat16 (memory-bound studies: the same
                  bytes move): more than 15% apart with disjoint intervals. The slower twin is
                  the line's dtype (a one-off slowdown is the usual cause), and is re-measured.
above_ceiling     a row faster than its measured ceiling by more than 3% (frac_ceiling > 1.03).
                  Given the run's ceilings, a row of a read or copy ceiling is judged against the
                  faster of the whole-buffer ceiling and a transfer of its own size (rooflab.
                  sized_ceilings: read_tbps_<n>mib, copy_tbps_<n>mib, as a factor over the whole
                  buffer's rate): a kernel's time ends before the L2 has written its last stores
                  back, so a transfer of a few hundred MB can read as faster than the 2 GiB one
                  (H200: torch's copy_ moving 128 MiB at 4.40 TB/s, 2 GiB at 4.30). Where the
                  case also timed a copy of its bytes in its own trials (softmax's `copy` bound,
                  same dtype, shape and timing), the row is judged against the fastest of the three.
few_samples       fewer than 20 repetitions or 3 trials behind a median (e2e: block totals).
amdahl            e2e: a block with our kernel swapped in sped up more than Amdahl's law allows
                  for the part it replaced (3% slack), even at the intervals' least speedup
                  (baseline ci_low / swapped ci_high), as the other gates ask for disjoint
                  intervals; CUDA-graph totals take the part shares of the same case's
                  call-by-call (events) rows.

Pure pandas: no torch.
"""
from __future__ import annotations


import pandas as pd

from rooflab.reproduce import ALL_SHAPE_COLUMNS, number, overlap, shape_dict, shape_label
from rooflab.schema import BOUND_IMPLS, SHAPE_COLUMNS
from rooflab.sized_ceilings import rate_at

THRESHOLDS = {"ours_vs_strategy": 0.10, "dtype_twin": 0.15, "above_ceiling": 1.03, "min_reps": 20,
              "min_trials": 3, "amdahl_slack": 0.03}
GATES = ("ours_vs_strategy", "dtype_twin", "above_ceiling", "few_samples", "amdahl")
COLUMNS = ("gpu", "study", "gate", "dtype", "impl", "shape", "value", "limit", "detail") + ALL_SHAPE_COLUMNS
MEMORY_BOUND = ("softmax", "decode")
# The text a re-measured row's `message` carries (written by the job that re-measures).
REMEASURED = "re-measured once after a quality flag"
# e2e swaps: (impl with our kernel, its baseline, the baseline's part the kernel replaces)
SWAPS = (("ours_softmax", "eager", "softmax"), ("ours_attention", "sdpa", "attention"))


def _thresholds(overrides: dict | None) -> dict:
    merged = dict(THRESHOLDS)
    for key, value in (overrides or {}).items():
        if key not in THRESHOLDS:
            raise ValueError(f"unknown quality threshold {key!r}; known: {sorted(THRESHOLDS)}")
        merged[key] = value
    return merged


def _overlap(a: dict, b: dict) -> bool:
    return overlap(a["ci_low_ms"], a["ci_high_ms"], b["ci_low_ms"], b["ci_high_ms"])


def _judged(frame: pd.DataFrame) -> pd.DataFrame:
    """ok rows with a median, never a published (sourced) row."""
    keep = (frame["status"] == "ok") & pd.to_numeric(frame["median_ms"], errors="coerce").notna()
    if "source" in frame:
        keep &= frame["source"].isna() | (frame["source"].astype(str).str.strip() == "")
    return frame[keep]


def _line(row: dict, study: str, gate: str, value, limit, detail: str, impl=None, dtype=None) -> dict:
    shape = shape_dict(row, study) if study in SHAPE_COLUMNS else {}
    return {"gpu": row.get("gpu"), "study": study, "gate": gate, "dtype": dtype or row.get("dtype"),
            "impl": impl or row.get("impl"), "shape": shape_label(shape, study) if shape else "",
            "value": value, "limit": limit, "detail": detail, **{c: None for c in ALL_SHAPE_COLUMNS}, **shape}


def _index(rows: pd.DataFrame, study: str) -> dict:
    """(impl, dtype, shape tuple) -> {timing: row} over the events/cupti rows of one study."""
    out: dict = {}
    for row in rows[rows["timing"].isin(("events", "cupti"))].to_dict(orient="records"):
        key = (row["impl"], row["dtype"], tuple(shape_dict(row, study).items()))
        out.setdefault(key, {})[row["timing"]] = row
    return out


def _pair(a: dict, b: dict):
    """The timing both sides share, kernel time first; None when they share none."""
    for timing in ("cupti", "events"):
        if timing in a and timing in b:
            return a[timing], b[timing]
    return None


def _ms(row: dict) -> str:
    return f"{number(row['median_ms']):.4g} ms [{number(row['ci_low_ms']):.4g}, {number(row['ci_high_ms']):.4g}]"


def _apart(a: dict, b: dict, limit: float):
    """(ratio max/min, flagged) for two rows' medians."""
    x, y = number(a["median_ms"]), number(b["median_ms"])
    if not (x > 0 and y > 0):
        return None, False
    ratio = max(x, y) / min(x, y)
    return ratio, ratio > limit and not _overlap(a, b)


def forced_twin(study: str, strategy: str) -> str | None:
    """The impl that forces the code `ours` ran with this strategy, if the study has one."""
    if study == "softmax":
        return f"ours_{strategy}"
    if study == "decode":
        return "ours_nosplit" if strategy == "nosplit" else None
    if study == "attention":
        return "ours_triton" if strategy != "gluon-hopper" else None
    return None


def _ours_vs_strategy(rows: pd.DataFrame, study: str, limit: float) -> list[dict]:
    lines = []
    index = _index(rows, study)
    for (impl, dtype, shape), timings in index.items():
        if impl != "ours":
            continue
        strategy = next((str(r["strategy"]) for r in timings.values()
                         if isinstance(r.get("strategy"), str) and r["strategy"].strip()), None)
        if strategy is None:
            continue
        forced = forced_twin(study, strategy)
        if forced is None or (forced, dtype, shape) not in index:
            continue
        pair = _pair(timings, index[(forced, dtype, shape)])
        if pair is None:
            continue
        ours, other = pair
        ratio, flagged = _apart(ours, other, 1 + limit)
        if flagged:
            lines.append(_line(ours, study, "ours_vs_strategy", ratio, 1 + limit,
                               f"{ours['timing']}: ours (chose {strategy}) {_ms(ours)} vs {forced} {_ms(other)}"))
    return lines


def _dtype_twin(rows: pd.DataFrame, study: str, limit: float) -> list[dict]:
    lines = []
    index = _index(rows, study)
    for (impl, dtype, shape), timings in index.items():
        if dtype != "float16" or (impl, "bfloat16", shape) not in index:
            continue
        pair = _pair(timings, index[(impl, "bfloat16", shape)])
        if pair is None:
            continue
        half, brain = pair
        ratio, flagged = _apart(half, brain, 1 + limit)
        if flagged:
            slower = half if number(half["median_ms"]) > number(brain["median_ms"]) else brain
            lines.append(_line(slower, study, "dtype_twin", ratio, 1 + limit,
                               f"{half['timing']}: float16 {_ms(half)} vs bfloat16 {_ms(brain)}"))
    return lines


SIZED_KINDS = {"read_tbps": "read", "copy_tbps": "copy"}   # whole-buffer ceiling -> its sized transfers


def size_factor(ceilings: dict | None, ceiling_name, nbytes) -> float:
    """How many times the whole-buffer ceiling `ceiling_name` a transfer of nbytes reaches on this
    GPU (its sized ceilings, interpolated), at least 1; 1 where the run measured no sized ones."""
    kind = SIZED_KINDS.get(ceiling_name)
    whole = (ceilings or {}).get(ceiling_name)
    nbytes = number(nbytes)
    if kind is None or not whole or not nbytes or nbytes != nbytes:
        return 1.0
    own = rate_at(ceilings, nbytes, kind)
    return max(1.0, own / whole) if own else 1.0


def _in_trial_copy(index: dict, row: dict, study: str) -> float:
    """The share of the ceiling that the case's own copy of its bytes (a bound: rooflab.schema.BOUND_IMPLS,
    rooflab.studies.softmax) reached in the row's timing, from _index; NaN where the case timed none."""
    shape = tuple(shape_dict(row, study).items())
    bounds = [index.get((impl, row["dtype"], shape), {}).get(row["timing"]) for impl in BOUND_IMPLS]
    shares = [number(b["frac_ceiling"]) for b in bounds if b is not None]
    return max((s for s in shares if s == s), default=float("nan"))


def _above_ceiling(rows: pd.DataFrame, study: str, limit: float, ceilings: dict | None = None) -> list[dict]:
    if "frac_ceiling" not in rows:
        return []
    lines = []
    index = _index(rows, study)
    for row in rows.to_dict(orient="records"):
        frac = number(row["frac_ceiling"])
        if frac != frac:                 # no share of a ceiling (host rows, failures)
            continue
        factor = size_factor(ceilings, row.get("ceiling_name"), row.get("bytes"))
        copy = _in_trial_copy(index, row, study)
        against = "a transfer of its own size"
        if copy > factor:                # NaN (no copy in the trials) never is
            factor, against = copy, "the copy in its own trials"   # which moved these bytes faster still
        if frac / factor > limit:
            own = f", {frac / factor:.3g} of {against}" if factor > 1 else ""
            lines.append(_line(row, study, "above_ceiling", frac / factor, limit,
                               f"{row['timing']}: {frac:.3g} of {row.get('ceiling_name')}{own}"))
    return lines


def _few_samples(rows: pd.DataFrame, study: str, min_reps: float, min_trials: float) -> list[dict]:
    if study == "e2e":
        rows = rows[rows["part"] == "total"]
    lines = []
    for row in rows.to_dict(orient="records"):
        reps, trials = number(row.get("reps")), number(row.get("trials"))
        short = []
        if reps < min_reps:
            short.append(("reps", reps, min_reps))
        if trials < min_trials:
            short.append(("trials", trials, min_trials))
        if short:
            name, value, limit = short[0]
            lines.append(_line(row, study, "few_samples", value, limit,
                               f"{row['timing']}: " + "; ".join(f"{n} {v:g} < {m:g}" for n, v, m in short)))
    return lines


def amdahl_bounds(rows: pd.DataFrame) -> pd.DataFrame:
    """e2e: per case and timing, each swap's measured speedup (baseline total / swapped total) and its
    Amdahl bound baseline total / (baseline total - replaced part); CUDA-graph totals take the bound
    of the same case's events rows. Columns: phase, seqlen, cache_len, width, heads, timing, impl,
    baseline, dtype, speedup, speedup_low (baseline ci_low / swapped ci_high), bound, plus the swapped
    row's gpu."""
    keys = ["phase", "seqlen", "cache_len", "width", "heads"]
    ok = rows[rows["status"] == "ok"] if "status" in rows else rows
    out = []
    for case, part in ok.groupby(keys, sort=True, dropna=False):
        events = part[part["timing"] == "events"]
        for timing, totals in part[part["part"] == "total"].groupby("timing", sort=True):
            for impl, base, replaced in SWAPS:
                swapped, baseline = totals[totals["impl"] == impl], totals[totals["impl"] == base]
                share = events[(events["impl"] == base) & (events["part"] == replaced)]
                base_events = events[(events["impl"] == base) & (events["part"] == "total")]
                if swapped.empty or baseline.empty or share.empty or base_events.empty:
                    continue
                whole, piece = number(base_events["median_ms"].iloc[0]), number(share["median_ms"].iloc[0])
                if not whole > piece >= 0:
                    continue
                b, o = baseline.iloc[0], swapped.iloc[0]
                out.append({**dict(zip(keys, case)), "timing": timing, "impl": impl, "baseline": base,
                            "dtype": o["dtype"], "gpu": o["gpu"],
                            "speedup": number(b["median_ms"]) / number(o["median_ms"]),
                            "speedup_low": number(b["ci_low_ms"]) / number(o["ci_high_ms"]),
                            "bound": whole / (whole - piece), "part_ms": piece,
                            "row": o.to_dict()})
    return pd.DataFrame(out)


def _amdahl(rows: pd.DataFrame, slack: float) -> list[dict]:
    bounds = amdahl_bounds(rows)
    lines = []
    for b in bounds.to_dict(orient="records") if not bounds.empty else []:
        if b["speedup_low"] > (1 + slack) * b["bound"]:
            lines.append(_line(b["row"], "e2e", "amdahl", b["speedup"], (1 + slack) * b["bound"],
                               f"{b['timing']}: {b['impl']} {b['speedup']:.3f}x over {b['baseline']} "
                               f"(at least {b['speedup_low']:.3f}x over the intervals), "
                               f"Amdahl bound {b['bound']:.3f}x ({b['baseline']} {b['part_ms']:.4g} ms "
                               f"of replaceable time)"))
    return lines


def flags(frame: pd.DataFrame, thresholds: dict | None = None, ceilings: dict | None = None) -> pd.DataFrame:
    """One line per flag over one GPU's rows of any studies; columns COLUMNS. `ceilings` ({name: value},
    the run's ceilings.csv) lets above_ceiling judge a row against a transfer of its own size."""
    limits = _thresholds(thresholds)
    lines: list[dict] = []
    rows = _judged(frame) if not frame.empty else frame
    for study, part in rows.groupby("study", sort=True) if not rows.empty else []:
        if study not in SHAPE_COLUMNS:
            continue
        if study in ("softmax", "decode", "attention"):
            lines += _ours_vs_strategy(part, study, limits["ours_vs_strategy"])
        if study in MEMORY_BOUND:
            lines += _dtype_twin(part, study, limits["dtype_twin"])
        lines += _above_ceiling(part, study, limits["above_ceiling"], ceilings)
        lines += _few_samples(part, study, limits["min_reps"], limits["min_trials"])
        if study == "e2e":
            lines += _amdahl(part, limits["amdahl_slack"])
    return pd.DataFrame(lines, columns=list(COLUMNS))


def cases(flags_frame: pd.DataFrame) -> list[tuple[str, str, dict]]:
    """The distinct (study, dtype, shape) the flags point at, in flag order; shape values are Python
    ints, bools and strings over the study's shape columns."""
    seen, out = set(), []
    for row in flags_frame.to_dict(orient="records"):
        study = row["study"]
        shape = shape_dict(row, study)
        key = (study, row["dtype"], tuple(shape.items()))
        if key not in seen:
            seen.add(key)
            out.append((study, str(row["dtype"]), shape))
    return out


def remeasured(flags_frame: pd.DataFrame, frame: pd.DataFrame) -> pd.Series:
    """Per flag line: whether the rows of its case (study, dtype, shape) say they were re-measured."""
    marked = set()
    if not frame.empty and "message" in frame:
        hit = frame[frame["message"].astype(str).str.contains(REMEASURED, regex=False, na=False)
                    & frame["message"].notna()]
        for row in hit.to_dict(orient="records"):
            if row["study"] in SHAPE_COLUMNS:
                marked.add((row["study"], row["dtype"], tuple(shape_dict(row, row["study"]).items())))
    return pd.Series([(s, d, tuple(shape.items())) in marked for s, d, shape in
                      ((r["study"], r["dtype"], shape_dict(r, r["study"])) for r in flags_frame.to_dict("records"))],
                     index=flags_frame.index, dtype=bool)


QA_COLUMNS = ("gpu", "study", "gate", "dtype", "impl", "shape", "value", "limit", "detail", "remeasured", "open")


def report(frame: pd.DataFrame, thresholds: dict | None = None, ceilings: dict | None = None) -> pd.DataFrame:
    """The qa.csv table for final rows: every flag, whether its case was re-measured, open (all are)."""
    found = flags(frame, thresholds, ceilings)
    found["remeasured"] = remeasured(found, frame)
    found["open"] = True
    return found[list(QA_COLUMNS)]
