"""Each published claim against our measurement of the same implementation, shape and dtype.

"Same GPU" means one model: a results folder is named after the device (nvidia-h100-80gb-hbm3), a
published table after its data/gpus.yaml entry (nvidia-h100-sxm), and the two are one GPU where the
entry lists the device's name (datasheet.same_model). A claim is judged on its own model where we
measured it, else on the lead GPU (gpu_order).

Verdicts:
  reproduced      same GPU, and the claimed number lies inside our interval: the 95% confidence
                  interval of our row's median time (ci_low_ms..ci_high_ms; as throughput where the
                  claim is one), widened by TOLERANCE
  not reproduced  same GPU and outside it (`ratio` = our throughput / the claimed one, so above 1
                  means ours is faster); or the claim ran where ours ran out of memory, or the reverse
  not comparable  no matching row of ours, our row failed, or only other GPUs have one: absolute
                  numbers from different GPUs are not compared; each side is still given as a
                  fraction of its own GPU's datasheet peak
Relative claims (A is k times faster than B at one shape) are judged the same way on the ratio; a
ratio is dimensionless, so it is judged on our GPU even where the claim's GPU differs, and the note
names both. Claims made in words (data/published/claims.yaml: an end-to-end speedup explained by
Amdahl's law, one implementation slower than another below a row length) are judged on the derived
Amdahl table and on our rows. Every verdict carries a note; a claim at a launch-bound shape says so,
and a causal attention number is compared in the FLOP convention its article uses (flop_convention).

One exception to "same GPU": compute twins. Two GPUs with the same dense fp16/bf16 tensor peak
and SM count (the H100 SXM and the H200 are one Hopper die with different memory) run
compute-bound work at the same ceiling, so a compute-bound claim (attention by a fused kernel,
not eager attention, which streams its score matrices through memory) made on one is judged
on a measurement from the other, and the verdict's note says so.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
import yaml

from rooflab import datasheet
from rooflab.report.analysis import (HOST_BOUND, KERNEL_TIMING, LAUNCH_BOUND_BYTES, PLAIN_TIMING, is_seed,
                                     shape_label, versus)
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
    convention: str = ""               # how the claim counts causal attention FLOPs (see flop_convention)

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


def gpu_order(gpus, claim_gpu: str, prefer: list[str] | None = None) -> list[str]:
    """`gpus` in the order a claim made on `claim_gpu` is judged on them: its own GPU model first
    (datasheet.same_model: a results folder named after the device counts as its entry), then
    `prefer`'s order (the paper's lead GPU), then by slug."""
    order = {g: i for i, g in enumerate(prefer or [])}
    return sorted(set(gpus), key=lambda g: (not datasheet.same_model(g, claim_gpu), order.get(g, len(order)), g))


def _model_note(gpu: str, claim_gpu: str) -> str:
    """'measured on X, the claim's GPU model (label)' where our slug differs from the claim's but names its model."""
    if gpu == claim_gpu or not datasheet.same_model(gpu, claim_gpu):
        return ""
    return f"measured on {gpu}, the claim's GPU model ({datasheet.for_slug(gpu)['label']})"


def _compute_bound(study: str, *impls: str) -> bool:
    return study == "attention" and not (set(impls) & MEMORY_BOUND_IMPLS)


def _num(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _matches(results: pd.DataFrame, claim, study: str, timing: str = PLAIN_TIMING) -> pd.DataFrame:
    """Our rows of the claim's implementation, shape and dtype (any GPU) in one timing: plain calls, as the
    articles time them."""
    mask = (results["study"] == study) & (results["impl"] == claim["impl"]) & (results["dtype"] == claim["dtype"])
    mask &= results["timing"] == timing
    for col in SHAPE_COLUMNS[study]:
        mask &= results[col] == claim[col]
    return results[mask]


def _work(row, study: str, results: pd.DataFrame | None) -> tuple[float | None, float | None]:
    """(bytes, FLOPs) of a row's case: its own columns, else those our rows of the same shape and dtype carry."""
    nbytes, flops = _num(row.get("bytes")), _num(row.get("flops"))
    if (nbytes is None or flops is None) and results is not None and not results.empty:
        mask = (results["study"] == study) & (results["dtype"] == row["dtype"])
        for col in SHAPE_COLUMNS[study]:
            mask &= results[col] == row[col]
        same = results[mask]
        nbytes = nbytes if nbytes is not None else next(iter(same["bytes"].dropna()), None)
        flops = flops if flops is not None else next(iter(same["flops"].dropna()), None)
    return nbytes, flops


def throughput(row, study: str, results: pd.DataFrame | None = None) -> tuple[str, float | None, bool]:
    """(metric, value, derived): the row's tbps / tflops, else computed from its time and the bytes / FLOPs
    that our rows of the same case carry."""
    for metric in ("tbps", "tflops"):
        if _num(row.get(metric)) is not None:
            return metric, float(row[metric]), False
    ms = _num(row.get("median_ms"))
    nbytes, flops = _work(row, study, results)
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


# Causal attention FLOPs: ours count the visible half (rooflab's convention, FlashAttention's benchmarks);
# an article may count the full square. HALVED / FULL name the two; the factor turns a FULL number into ours.
HALVED, FULL = "halved", "full"


def flop_convention(published: pd.DataFrame, results: pd.DataFrame) -> dict[str, str]:
    """{source: HALVED or FULL} for each article with causal attention numbers, read off the implementations
    the article and we both measured that are the field's (not its own design): their published TFLOP/s
    against ours on the same or a twin GPU, halved-count ratio nearer 1 or nearer 2. Articles without
    such a pair are taken as HALVED."""
    out = {}
    if published.empty or "causal" not in published:
        return out
    causal = published[(published["study"] == "attention") & (published["status"] == "ok")]
    causal = causal[causal["causal"].map(lambda v: v is True or v == True)]  # noqa: E712
    for source, rows in causal.groupby("source", sort=True):
        ratios = []
        for _, claim in rows.iterrows():
            if is_seed(claim["impl"]) or _num(claim.get("tflops")) is None:
                continue
            mine = _matches(results, claim, "attention")
            mine = mine[(mine["status"] == "ok") & mine["gpu"].map(
                lambda g: g == claim["gpu"] or compute_twins(g, claim["gpu"])).astype(bool)]
            if not mine.empty and _num(mine.iloc[0]["tflops"]):
                ratios.append(float(claim["tflops"]) / float(mine.iloc[0]["tflops"]))
        if ratios:
            middle = sorted(ratios)[len(ratios) // 2]
            out[source] = FULL if abs(math.log(middle / 2)) < abs(math.log(middle)) else HALVED
    return out


def _launch_caveat(claim, study: str, results: pd.DataFrame, gpu: str) -> str:
    """A note for a claim at a shape small enough that a plain call times the launch, not the kernel (the
    kernel's time on `gpu`, the GPU the verdict is measured on)."""
    nbytes, _ = _work(claim, study, results)
    if nbytes is None or nbytes >= LAUNCH_BOUND_BYTES:
        return ""
    kernel = _matches(results, claim, study, timing=KERNEL_TIMING)
    kernel = kernel[(kernel["status"] == "ok") & (kernel["gpu"] == gpu)]
    tail = f"; the kernel alone takes {float(kernel.iloc[0]['median_ms']) * 1e3:.3g} us here" if not kernel.empty else ""
    return f"; launch-bound ({nbytes / 1e6:.3g} MB): a plain call times the launch as much as the kernel{tail}"


def _host_caveat(fast, slow, study: str, results: pd.DataFrame) -> str:
    """A note for a ratio whose plain calls time the host. `fast` and `slow` are our plain-call rows of
    the two implementations on one GPU: where either takes HOST_BOUND times its kernel time (CUPTI) or
    more, the plain-call times beside the kernel times and the ratio on kernel time."""
    kernels = []
    for plain in (fast, slow):
        m = _matches(results, plain, study, timing=KERNEL_TIMING)
        m = m[(m["status"] == "ok") & (m["gpu"] == plain["gpu"])]
        if m.empty:
            return ""
        kernels.append(m.iloc[0])
    bound = [(plain["impl"], float(plain["median_ms"]), float(kernel["median_ms"]))
             for plain, kernel in zip((fast, slow), kernels)
             if float(plain["median_ms"]) >= HOST_BOUND * float(kernel["median_ms"])]
    if not bound:
        return ""
    calls = ", ".join(f"{name} {p * 1e3:.3g} us against {k * 1e3:.3g} us of kernel" for name, p, k in bound)
    ratio, low, high, _ = versus(*kernels)
    return (f"; host-bound: a plain call of {calls}; on kernel time {slow['impl']} over {fast['impl']} is "
            f"{ratio:.2f}x [{low:.2f}, {high:.2f}]")


def judge(claim, results: pd.DataFrame, prefer: list[str] | None = None, tol: float = TOLERANCE,
          convention: str = HALVED) -> Verdict:
    """The verdict on one published row (a pandas Series of data/published/); `convention` says how its
    article counts causal attention FLOPs (a FULL count is halved before it is set beside ours)."""
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
    causal_full = study == "attention" and bool(claim.get("causal")) and convention == FULL and metric == "tflops"
    if study == "attention" and bool(claim.get("causal")):
        verdict.convention = ("causal FLOPs counted in full; halved here to compare" if convention == FULL
                              else "causal FLOPs halved, as ours")
    compared = verdict.claimed / 2 if causal_full and verdict.claimed is not None else verdict.claimed
    tput_metric, claimed_tput, derived = throughput(claim, study, results) if status == "ok" else (None, None, False)
    if causal_full and claimed_tput is not None:
        claimed_tput /= 2
    if tput_metric:   # the fraction the article printed, else ours of its number
        printed = None if derived else _num(claim.get("frac_datasheet"))
        verdict.claimed_frac = printed if printed is not None else \
            fraction(claim["gpu"], study, claim["dtype"], tput_metric, claimed_tput)

    rows = _matches(results, claim, study)
    if rows.empty:
        verdict.note = "no measurement of ours at this implementation, shape and dtype"
        return verdict
    ranked = gpu_order(rows["gpu"], claim["gpu"], prefer)
    rows = rows.assign(_rank=rows["gpu"].map(ranked.index)).sort_values("_rank", kind="stable")
    same = rows[rows["gpu"].map(lambda g: datasheet.same_model(g, claim["gpu"]))]
    twin_note = _model_note(same.iloc[0]["gpu"], claim["gpu"]) if not same.empty else ""
    if same.empty and metric != "status" and _compute_bound(study, claim["impl"]):
        twins = rows[rows["gpu"].map(lambda g: compute_twins(g, claim["gpu"]))]
        if not twins.empty:
            same = twins
            twin_note = f"measured on {twins.iloc[0]['gpu']}, a compute twin of {claim['gpu']}"
    if same.empty:
        row = rows.iloc[0]
        caveat = _launch_caveat(claim, study, results, row["gpu"])
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
            verdict.note += "; the claim's throughput is derived from its time and the case's byte/FLOP count"
        verdict.note += caveat
        return verdict

    row = same.iloc[0]
    caveat = _launch_caveat(claim, study, results, row["gpu"])
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
    verdict.ratio = compared / value if metric == "median_ms" else value / compared
    verdict.verdict = REPRODUCED if low <= compared <= high else NOT_REPRODUCED
    if tput_metric and _num(row.get(tput_metric)) is not None:
        verdict.ours_frac = fraction(row["gpu"], study, row["dtype"], tput_metric, float(row[tput_metric]))
    notes = [twin_note, f"published {verdict.claimed:.4g} counts causal FLOPs in full: {compared:.4g} halved"
             if causal_full else "", caveat.removeprefix("; ")]
    verdict.note = "; ".join(n for n in notes if n)
    return verdict


def judge_all(published: pd.DataFrame, results: pd.DataFrame, prefer: list[str] | None = None,
              tol: float = TOLERANCE) -> list[Verdict]:
    conventions = flop_convention(published, results)
    return [judge(row, results, prefer, tol, conventions.get(row["source"], HALVED)) for _, row in published.iterrows()]


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
    for (source, study), table in published.groupby(["source", "study"], sort=True):
        keys = ["gpu", "dtype", *SHAPE_COLUMNS[study]]
        for _, group in table[table["status"] == "ok"].groupby(keys, sort=True):
            rows = list(group.iterrows())
            for i, (_, a) in enumerate(rows):
                for _, b in rows[i + 1:]:
                    if not (is_seed(a["impl"]) or is_seed(b["impl"])):
                        continue
                    sa, sb = _speed(a, study), _speed(b, study)
                    if not sa or not sb or sa[0] != sb[0]:
                        continue
                    fast, slow, claimed = (a, b, sa[1] / sb[1]) if sa[1] >= sb[1] else (b, a, sb[1] / sa[1])
                    out.append(_judge_ratio(source, study, fast, slow, claimed, results, prefer, tol))
    return out


def _judge_ratio(source, study, fast, slow, claimed, results, prefer, tol) -> RatioVerdict:
    """A ratio is dimensionless, so it is judged on our GPU even when the claim's GPU differs (the note says
    which GPUs); for a seed design, the note also gives our own kernel against the same slower one."""
    rv = RatioVerdict(source=source, study=study, dtype=fast["dtype"], shape=shape_label(fast, study),
                      faster=fast["impl"], slower=slow["impl"], claim_gpu=fast["gpu"], claimed=claimed)
    mine_f, mine_s = _matches(results, fast, study), _matches(results, slow, study)
    mine_f, mine_s = mine_f[mine_f["status"] == "ok"], mine_s[mine_s["status"] == "ok"]
    gpus = gpu_order(set(mine_f["gpu"]) & set(mine_s["gpu"]), fast["gpu"], prefer)
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
    rv.verdict = REPRODUCED if rv.ours_low <= rv.claimed <= rv.ours_high else NOT_REPRODUCED
    own = datasheet.same_model(gpu, fast["gpu"])
    rv.note = (_model_note(gpu, fast["gpu"]) or f"measured on {gpu}") if own else \
        f"claim on {fast['gpu']}, ratio measured on {gpu}"
    if not own and compute_twins(gpu, fast["gpu"]) and _compute_bound(study, fast["impl"], slow["impl"]):
        rv.note += f", a compute twin of {fast['gpu']}"
    ours = _matches(results, dict(fast, impl="ours"), study)
    ours = ours[(ours["status"] == "ok") & (ours["gpu"] == gpu)]
    if is_seed(fast["impl"]) and not ours.empty:
        ratio, low, high, result = versus(ours.iloc[0], s)
        rv.note += f"; ours over {slow['impl']}: {ratio:.2f}x [{low:.2f}, {high:.2f}], a {result}"
    rv.note += _launch_caveat(fast, study, results, gpu) or _host_caveat(f, s, study, results)
    return rv


# ---------------------------------------------------------------- claims made in words

CLAIMS_PATH = Path(__file__).resolve().parents[2] / "data" / "published" / "claims.yaml"


def worded_claims(path: str | Path = CLAIMS_PATH) -> list[dict]:
    """The claims the seeds make in words (data/published/claims.yaml), each a dict with `kind`."""
    path = Path(path)
    return list(yaml.safe_load(path.read_text()) or []) if path.is_file() else []


def _amdahl_claim(c: dict, amdahl: pd.DataFrame, tol: float, prefer: list[str] | None = None) -> dict:
    """An article's end-to-end speedup explained by Amdahl's law, against our blocks with our softmax swapped
    in: reproduced when our block's measured speedup (its interval widened by tol) holds Amdahl's prediction
    from our own share and part speedup, at the article's phase and length where we measured it, on one GPU
    (gpu_order: the claim's own model, else the lead GPU)."""
    out = dict(kind="amdahl", study="e2e", impl="ours_softmax", claim_gpu=c["gpu"], metric="speedup",
               claimed=float(c["measured"]), verdict=NOT_COMPARABLE)
    if amdahl.empty:
        return dict(out, note="no end-to-end block with our softmax measured")
    amdahl = amdahl[amdahl["gpu"] == gpu_order(amdahl["gpu"], c["gpu"], prefer)[0]]
    same = amdahl[(amdahl["phase"] == c.get("phase")) & (amdahl["seqlen"] == c.get("seqlen"))]
    row = (same if not same.empty else amdahl.sort_values("share", ascending=False)).iloc[0]
    low, high = row["measured_low"] * (1 - tol), row["measured_high"] * (1 + tol)
    holds = low <= row["predicted"] <= high and low <= row["bound"]
    length = f"S={row['seqlen']}" if row["phase"] == "prefill" else f"L={row['cache_len']}"
    return dict(out, ours_gpu=row["gpu"], ours=row["measured"], ours_low=low, ours_high=high, ours_metric="speedup",
                shape=f"{row['phase']} {length}", dtype=row["dtype"], verdict=REPRODUCED if holds else NOT_REPRODUCED,
                note=(f"published: softmax {float(c['share']):.0%} of the block, {float(c['part_speedup']):.2f}x faster, "
                      f"{float(c['measured']):.3f}x end to end under a {float(c['bound']):.3f}x bound; ours: softmax "
                      f"{row['share']:.0%} of the eager block, {row['part_speedup']:.2f}x faster, Amdahl predicts "
                      f"{row['predicted']:.3f}x (bound {row['bound']:.3f}x), measured {row['measured']:.3f}x "
                      f"[{row['measured_low']:.3f}, {row['measured_high']:.3f}]; the law is judged, not the GPU's number"))


def _slower_below_claim(c: dict, results: pd.DataFrame, prefer: list[str] | None = None) -> dict:
    """'A is slower than B at rows of at most N columns': judged per shape on plain calls, as published, with
    the kernel-time outcome beside it (at these sizes a plain call times the launch), on one GPU (gpu_order:
    the claim's own model, else the lead GPU)."""
    study, dtype = c["study"], c["dtype"]
    out = dict(kind="slower_below", study=study, impl=c["slower"], dtype=dtype, claim_gpu=c["gpu"],
               metric="shapes", shape=f"cols <= {c['max_cols']}", verdict=NOT_COMPARABLE)
    rows = results[(results["study"] == study) & (results["dtype"] == dtype) & (results["status"] == "ok")]
    rows = rows[(rows["cols"] <= int(c["max_cols"])) & rows["impl"].isin([c["slower"], c["faster"]])]
    both_gpus = set(rows.loc[rows["impl"] == c["slower"], "gpu"]) & set(rows.loc[rows["impl"] == c["faster"], "gpu"])
    if both_gpus:
        rows = rows[rows["gpu"] == gpu_order(both_gpus, c["gpu"], prefer)[0]]
    tallies = {}
    for timing in (PLAIN_TIMING, KERNEL_TIMING):
        part = rows[rows["timing"] == timing]
        a = part[part["impl"] == c["slower"]].set_index(["gpu", "rows", "cols"])
        b = part[part["impl"] == c["faster"]].set_index(["gpu", "rows", "cols"])
        both = a.index.intersection(b.index)
        outcomes = [versus(b.loc[k], a.loc[k])[3] for k in both]      # the outcome for `faster`
        tallies[timing] = (sum(o == "win" for o in outcomes), len(outcomes), both)
    wins, n, both = tallies[PLAIN_TIMING]
    if not n:
        return dict(out, note=f"no shape with correct rows of {c['slower']} and {c['faster']} at these lengths")
    k_wins, k_n, _ = tallies[KERNEL_TIMING]
    gpu = both[0][0]
    return dict(out, ours_gpu=gpu, ours=wins, claimed=n, ours_metric="shapes",
                verdict=REPRODUCED if wins * 2 > n else NOT_REPRODUCED,
                note=(f"{_model_note(gpu, c['gpu']) or f'measured on {gpu}'}: "
                      f"{c['faster']} faster (a win outside both intervals) at {wins} of {n} shapes in plain calls"
                      + (f", at {k_wins} of {k_n} on kernel time" if k_n else "")
                      + "; launch-bound sizes: a plain call times the host as much as the kernel"))


WORDED = {"amdahl": _amdahl_claim, "slower_below": _slower_below_claim}


# ---------------------------------------------------------------- the one table of verdicts

VERDICT_COLUMNS = ("kind", "source", "section", "claim", "study", "impl", "versus", "dtype", "shape", "claim_gpu",
                   "metric", "claimed", "claimed_status", "ours_gpu", "ours", "ours_metric", "ours_low", "ours_high",
                   "ours_status", "ratio", "claimed_frac", "ours_frac", "convention", "verdict", "note")


def verdict_table(published: pd.DataFrame, results: pd.DataFrame, prefer: list[str] | None = None,
                  amdahl: pd.DataFrame | None = None, claims: list[dict] | None = None,
                  tol: float = TOLERANCE) -> pd.DataFrame:
    """Every claim's verdict in one table: `value` (a published number), `ratio` (one implementation k times
    faster than another), and the worded kinds of data/published/claims.yaml."""
    records = [dict(v.as_dict(), kind="value") for v in judge_all(published, results, prefer, tol)]
    for r in ratio_claims(published, results, prefer, tol):
        records.append(dict(kind="ratio", source=r.source, study=r.study, impl=r.faster, versus=r.slower,
                            dtype=r.dtype, shape=r.shape, claim_gpu=r.claim_gpu, metric="speedup", claimed=r.claimed,
                            ours_gpu=r.ours_gpu, ours=r.ours, ours_metric="speedup" if r.ours_gpu else None,
                            ours_low=r.ours_low, ours_high=r.ours_high, verdict=r.verdict, note=r.note))
    amdahl = amdahl if amdahl is not None else pd.DataFrame()
    for c in worded_claims() if claims is None else claims:
        judged = (WORDED[c["kind"]](c, amdahl, tol, prefer) if c["kind"] == "amdahl"
                  else WORDED[c["kind"]](c, results, prefer))
        records.append(dict(judged, source=c["source"], section=c["section"], claim=c["claim"]))
    return pd.DataFrame.from_records(records, columns=list(VERDICT_COLUMNS))
