"""Each published claim against our measurement of the same implementation, shape and dtype.

Verdicts:
  reproduced      same GPU, and the claimed number lies inside our interval: the 95% confidence
                  interval of our row's median time (ci_low_ms..ci_high_ms; as throughput where the
                  claim is one), widened by TOLERANCE
  not reproduced  same GPU and outside it (`ratio` = our throughput / the claimed one, so above 1
                  means ours is faster); or the claim ran where ours ran out of memory, or the reverse
  not comparable  no matching row of ours, our row failed, or only other GPUs have one: absolute
                  numbers from different GPUs are not compared; each side is still given as a
                  fraction of its own GPU's datasheet peak
Relative claims (A is k times faster than B at one shape) are judged the same way on the ratio.

One exception to "same GPU": compute twins. Two GPUs with the same dense fp16/bf16 tensor peak
and SM count (the H100 SXM and the H200 are one Hopper die with different memory) run
compute-bound work at the same ceiling, so a compute-bound claim (attention by a fused kernel,
not eager attention, which streams its score matrices through memory) made on one is judged
on a measurement from the other, and the verdict's note says so.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from rooflab.report import datasheet
from rooflab.report.analysis import PLAIN_TIMING, shape_label, study_work
from rooflab.schema import SHAPE_COLUMNS

TOLERANCE = 0.05   # interval widening: clocks, drivers and timing code differ between runs
REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"


@dataclass
class Verdict:
    source: str
    section: str
    claim: str | None
    study: str
    impl: str
    dtype: str
    shape: str
    claim_gpu: str
    metric: str                       # tbps | tflops | median_ms | status
    claimed: float | None             # the published number (or None for a status claim)
    claimed_status: str
    ours_gpu: str | None = None
    ours: float | None = None         # our number: in the claim's metric on its GPU, else in ours_metric
    ours_metric: str | None = None    # tbps | tflops | median_ms: the unit of `ours`
    ours_low: float | None = None     # our interval, widened by TOLERANCE
    ours_high: float | None = None
    ours_status: str | None = None
    ratio: float | None = None        # our throughput / claimed throughput
    claimed_frac: float | None = None  # claim / its GPU's datasheet peak
    ours_frac: float | None = None     # ours / our GPU's datasheet peak
    verdict: str = NOT_COMPARABLE
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


TWIN_FIELDS = ("fp16_tflops", "bf16_tflops", "sm_count")
MEMORY_BOUND_IMPLS = {"eager"}     # attention implementations whose speed follows bandwidth, not compute


def compute_twins(a: str, b: str) -> bool:
    """True when GPUs a and b have the same tensor peaks and SM count (within 2 %) in data/gpus.yaml."""
    ea, eb = datasheet.for_slug(a), datasheet.for_slug(b)
    if not ea or not eb:
        return False
    return all(abs(float(ea[k]) - float(eb[k])) <= 0.02 * max(float(ea[k]), float(eb[k])) for k in TWIN_FIELDS)


def _compute_bound(study: str, *impls: str) -> bool:
    return study == "attention" and not (set(impls) & MEMORY_BOUND_IMPLS)


def _num(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _shape(row, study: str) -> dict:
    return {c: (row[c].item() if hasattr(row[c], "item") else row[c]) for c in SHAPE_COLUMNS[study]}


def _matches(results: pd.DataFrame, claim, study: str) -> pd.DataFrame:
    mask = (results["study"] == study) & (results["impl"] == claim["impl"]) & (results["dtype"] == claim["dtype"])
    mask &= results["timing"] == PLAIN_TIMING
    for col in SHAPE_COLUMNS[study]:
        mask &= results[col] == claim[col]
    return results[mask]


def throughput(row, study: str) -> tuple[str, float | None, bool]:
    """(metric, value, derived): the row's tbps / tflops, else computed from its time and the study's count."""
    for metric in ("tbps", "tflops"):
        if _num(row.get(metric)) is not None:
            return metric, float(row[metric]), False
    ms = _num(row.get("median_ms"))
    nbytes, flops = study_work(study, _shape(row, study), row["dtype"])
    if ms and flops and study == "attention":
        return "tflops", flops / (ms * 1e-3) / 1e12, True
    if ms and nbytes:
        return "tbps", nbytes / (ms * 1e-3) / 1e12, True
    return "tbps" if study != "attention" else "tflops", None, False


def fraction(slug: str, study: str, dtype: str, metric: str, value: float | None) -> float | None:
    """value / this GPU's datasheet peak for the metric, or None when either is unknown."""
    peak = datasheet.peak(slug, study, dtype)
    if value is None or peak is None or peak[0] != metric:
        return None
    return value / peak[1]


def _interval(row) -> tuple[float, float]:
    """Our row's 95% confidence interval of the median time; the median where the row has none."""
    med = float(row["median_ms"])
    return _num(row.get("ci_low_ms")) or med, _num(row.get("ci_high_ms")) or med


def _spread(row, metric: str, tol: float) -> tuple[float, float, float]:
    """(value, low, high) of our row in the claim's metric; throughput range from the time interval."""
    med = float(row["median_ms"])
    low, high = _interval(row)
    if metric == "median_ms":
        return med, low * (1 - tol), high * (1 + tol)
    value = float(row[metric])
    return value, value * med / high * (1 - tol), value * med / low * (1 + tol)


def judge(claim, results: pd.DataFrame, prefer: list[str] | None = None, tol: float = TOLERANCE) -> Verdict:
    """The verdict on one published row (a pandas Series of data/published/)."""
    study = claim["study"]
    status = claim["status"]
    if status == "ok":
        metric = next((m for m in ("tbps", "tflops", "median_ms") if _num(claim.get(m)) is not None), "median_ms")
    else:
        metric = "status"
    verdict = Verdict(
        source=claim["source"], section=claim["section"], claim=claim.get("claim") if pd.notna(claim.get("claim")) else None,
        study=study, impl=claim["impl"], dtype=claim["dtype"], shape=shape_label(claim, study),
        claim_gpu=claim["gpu"], metric=metric, claimed=_num(claim.get(metric)) if metric != "status" else None,
        claimed_status=status,
    )
    tput_metric, claimed_tput, derived = throughput(claim, study) if status == "ok" else (None, None, False)
    if tput_metric:   # the fraction the article printed, else ours of its number
        printed = None if derived else _num(claim.get("frac_datasheet"))
        verdict.claimed_frac = printed if printed is not None else \
            fraction(claim["gpu"], study, claim["dtype"], tput_metric, claimed_tput)

    rows = _matches(results, claim, study)
    if rows.empty:
        verdict.note = "no measurement of ours at this implementation, shape and dtype"
        return verdict
    same = rows[rows["gpu"] == claim["gpu"]]
    twin_note = ""
    if same.empty and metric != "status" and _compute_bound(study, claim["impl"]):
        twins = rows[rows["gpu"].map(lambda g: compute_twins(g, claim["gpu"]))]
        if not twins.empty:
            same = twins
            twin_note = (f"; measured on {twins.iloc[0]['gpu']}, a compute twin of {claim['gpu']} "
                         "(same tensor peak and SM count), compared directly")
    if same.empty:
        order = {g: i for i, g in enumerate(prefer or [])}
        rows = rows.assign(_rank=rows["gpu"].map(lambda g: order.get(g, len(order)))).sort_values(["_rank", "gpu"])
        row = rows.iloc[0]
        verdict.ours_gpu, verdict.ours_status = row["gpu"], row["status"]
        if metric == "status":
            verdict.note = f"published {status} on {claim['gpu']}, ours {row['status']} on {row['gpu']}: memory sizes differ"
            return verdict
        if row["status"] == "ok" and tput_metric and _num(row.get(tput_metric)) is not None:
            verdict.ours, verdict.ours_metric = float(row[tput_metric]), tput_metric
            verdict.ours_frac = fraction(row["gpu"], study, row["dtype"], tput_metric, verdict.ours)
            if verdict.ours_frac is None:
                verdict.ours_frac = _num(row.get("frac_datasheet"))
        verdict.note = f"measured on {row['gpu']}, claim on {claim['gpu']}: compared as fractions of each datasheet peak"
        if derived:
            verdict.note += "; the claim's throughput is derived from its time and the study's byte/FLOP count"
        return verdict

    row = same.iloc[0]
    verdict.ours_gpu, verdict.ours_status = row["gpu"], row["status"]
    if metric == "status":
        if row["status"] == status:
            verdict.verdict, verdict.note = REPRODUCED, f"ours is {status} too"
        elif row["status"] == "ok":
            verdict.verdict, verdict.note = NOT_REPRODUCED, f"published {status}, ours ran"
        else:
            verdict.note = f"published {status}, ours {row['status']}"
        return verdict
    if row["status"] != "ok" or _num(row.get("median_ms")) is None:
        if row["status"] == "oom":
            verdict.verdict = NOT_REPRODUCED
        verdict.note = f"published ok, ours {row['status']}"
        return verdict
    value, low, high = _spread(row, metric, tol)
    verdict.ours, verdict.ours_low, verdict.ours_high, verdict.ours_metric = value, low, high, metric
    verdict.ratio = verdict.claimed / value if metric == "median_ms" else value / verdict.claimed
    verdict.verdict = REPRODUCED if low <= verdict.claimed <= high else NOT_REPRODUCED
    if tput_metric and _num(row.get(tput_metric)) is not None:
        verdict.ours_frac = fraction(row["gpu"], study, row["dtype"], tput_metric, float(row[tput_metric]))
    verdict.note = f"our interval widened by {tol:.0%}{twin_note}"
    return verdict


def judge_all(published: pd.DataFrame, results: pd.DataFrame, prefer: list[str] | None = None,
              tol: float = TOLERANCE) -> list[Verdict]:
    return [judge(row, results, prefer, tol) for _, row in published.iterrows()]


# ---------------------------------------------------------------- relative claims

@dataclass
class RatioVerdict:
    source: str
    study: str
    dtype: str
    shape: str
    faster: str                       # the implementation claimed faster
    slower: str
    claim_gpu: str
    claimed: float                    # published time ratio slower / faster (throughput ratio faster / slower)
    ours_gpu: str | None = None
    ours: float | None = None
    ours_low: float | None = None
    ours_high: float | None = None
    verdict: str = NOT_COMPARABLE
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _speed(row, study: str) -> tuple[str, float] | None:
    """A number proportional to speed: 1/time, or the throughput when only that is published."""
    ms = _num(row.get("median_ms"))
    if ms:
        return "time", 1.0 / ms
    metric, value, _ = throughput(row, study)
    return (metric, value) if value else None


def ratio_claims(published: pd.DataFrame, results: pd.DataFrame, prefer: list[str] | None = None,
                 tol: float = TOLERANCE) -> list[RatioVerdict]:
    """Every pair of published implementations at one shape, at least one a seed design (seed_*),
    oriented so that `faster` is the one published as faster; ours measured the same way."""
    out = []
    if published.empty:
        return out
    order = {g: i for i, g in enumerate(prefer or [])}
    for (source, study), table in published.groupby(["source", "study"], sort=True):
        keys = ["gpu", "dtype", *SHAPE_COLUMNS[study]]
        for _, group in table[table["status"] == "ok"].groupby(keys, sort=True):
            rows = list(group.iterrows())
            for i, (_, a) in enumerate(rows):
                for _, b in rows[i + 1:]:
                    if not (a["impl"].startswith("seed_") or b["impl"].startswith("seed_")):
                        continue
                    sa, sb = _speed(a, study), _speed(b, study)
                    if not sa or not sb or sa[0] != sb[0]:
                        continue
                    fast, slow, claimed = (a, b, sa[1] / sb[1]) if sa[1] >= sb[1] else (b, a, sb[1] / sa[1])
                    out.append(_judge_ratio(source, study, fast, slow, claimed, results, order, tol))
    return out


def _judge_ratio(source, study, fast, slow, claimed, results, order, tol) -> RatioVerdict:
    rv = RatioVerdict(source=source, study=study, dtype=fast["dtype"], shape=shape_label(fast, study),
                      faster=fast["impl"], slower=slow["impl"], claim_gpu=fast["gpu"], claimed=claimed)
    mine_f, mine_s = _matches(results, fast, study), _matches(results, slow, study)
    mine_f, mine_s = mine_f[mine_f["status"] == "ok"], mine_s[mine_s["status"] == "ok"]
    gpus = sorted(set(mine_f["gpu"]) & set(mine_s["gpu"]),
                  key=lambda g: (g != fast["gpu"], order.get(g, len(order)), g))
    if not gpus:
        rv.note = "no correct measurement of ours of both implementations at this shape"
        return rv
    gpu = gpus[0]
    f = mine_f[mine_f["gpu"] == gpu].iloc[0]
    s = mine_s[mine_s["gpu"] == gpu].iloc[0]
    rv.ours_gpu = gpu
    rv.ours = float(s["median_ms"]) / float(f["median_ms"])
    (s_low, s_high), (f_low, f_high) = _interval(s), _interval(f)
    rv.ours_low = s_low / f_high * (1 - tol)
    rv.ours_high = s_high / f_low * (1 + tol)
    twin = compute_twins(gpu, fast["gpu"]) and _compute_bound(study, fast["impl"], slow["impl"])
    if gpu == fast["gpu"] or twin:
        rv.verdict = REPRODUCED if rv.ours_low <= rv.claimed <= rv.ours_high else NOT_REPRODUCED
        rv.note = f"our interval widened by {tol:.0%}"
        if gpu != fast["gpu"]:
            rv.note += f"; measured on {gpu}, a compute twin of {fast['gpu']}"
    else:
        rv.note = f"ratio measured on {gpu}, claim on {fast['gpu']}"
    return rv
