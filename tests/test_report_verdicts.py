"""Verdicts on published claims: reproduced, not reproduced, not comparable (with fractions of own peak)."""
import pandas as pd
import pytest

from rooflab.report.verdicts import (NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, TOLERANCE, judge, judge_all,
                                     ratio_claims)
from rooflab.schema import columns, validate_frame

SHAPE = {"rows": 8192, "cols": 4096}
NBYTES = 2 * 8192 * 4096 * 2


def row(gpu="nvidia-h100-sxm", impl="seed_rowwise", ms=0.048, spread=0.01, status="ok", **extra):
    """A measured fp16 softmax row at 8192 x 4096, valid under the result schema."""
    r = dict.fromkeys(columns("softmax"))
    r.update(gpu=gpu, study="softmax", impl=impl, dtype="float16", timing="events", status=status, **SHAPE)
    if status == "ok" and ms is not None:
        r.update(median_ms=ms, p20_ms=ms * (1 - spread), p80_ms=ms * (1 + spread),
                 ci_low_ms=ms * (1 - spread), ci_high_ms=ms * (1 + spread), reps=100,
                 tbps=NBYTES / (ms * 1e-3) / 1e12)
    r.update(extra)
    return r


def claim(**kw):
    base = dict(ms=None, source="001_x.txt", section="Results")
    base.update(kw)
    return pd.Series(row(**base))


def results(*rows):
    frame = pd.DataFrame(list(rows), columns=list(columns("softmax")))
    return validate_frame(frame, "test rows")


def test_reproduced_throughput_inside_spread():
    ours = row(ms=0.048)                          # 2.796 TB/s, spread +-1 %
    v = judge(claim(tbps=2.8), results(ours))
    assert v.verdict == REPRODUCED
    assert v.ours_low <= 2.8 <= v.ours_high
    assert v.ratio == pytest.approx(ours["tbps"] / 2.8)


def test_not_reproduced_gives_ratio_ours_over_claimed():
    ours = row(ms=0.096)                          # half the claimed bandwidth
    v = judge(claim(tbps=2.8), results(ours))
    assert v.verdict == NOT_REPRODUCED
    assert v.ratio == pytest.approx(ours["tbps"] / 2.8)
    assert v.ratio < 0.51


def test_tolerance_widens_the_spread():
    ours = row(ms=0.050, spread=0.0)              # 2.684 TB/s with no spread at all
    claimed = ours["tbps"] * (1 + TOLERANCE / 2)
    assert judge(claim(tbps=claimed), results(ours)).verdict == REPRODUCED
    assert judge(claim(tbps=claimed), results(ours), tol=0.0).verdict == NOT_REPRODUCED


def test_time_claim_compared_with_time_spread():
    ours = results(row(impl="torch", ms=0.1334, spread=0.02))
    v = judge(claim(impl="torch", median_ms=0.13344), ours)
    assert v.metric == "median_ms" and v.verdict == REPRODUCED
    v = judge(claim(impl="torch", median_ms=0.2), ours)
    assert v.verdict == NOT_REPRODUCED and v.ratio == pytest.approx(0.2 / 0.1334)   # ours faster: above 1


def test_other_gpu_is_not_comparable_but_gives_fractions_of_own_peak():
    ours = row(gpu="nvidia-h200", ms=0.0455)      # 2.95 TB/s on a 4.8 TB/s part
    v = judge(claim(tbps=2.8, frac_datasheet=0.83), results(ours))
    assert v.verdict == NOT_COMPARABLE and v.ours_gpu == "nvidia-h200"
    assert v.claimed_frac == pytest.approx(0.83)                  # as the article printed it
    assert v.ours_frac == pytest.approx(ours["tbps"] / 4.8)       # data/gpus.yaml's H200 bandwidth
    assert v.ratio is None


def test_claim_fraction_from_datasheet_when_not_printed():
    v = judge(claim(tbps=2.8), results(row(gpu="nvidia-h200", ms=0.0455)))
    assert v.claimed_frac == pytest.approx(2.8 / 3.35)


def test_no_match_is_not_comparable():
    v = judge(claim(tbps=2.8), results(row(impl="torch")))
    assert v.verdict == NOT_COMPARABLE and v.ours is None and v.ours_gpu is None
    assert "no measurement" in v.note


def test_same_gpu_preferred_over_others():
    rows = results(row(gpu="nvidia-h200", ms=0.04), row(ms=0.048))
    assert judge(claim(tbps=2.8), rows).verdict == REPRODUCED


def test_incorrect_row_of_ours_is_not_a_reproduction():
    bad = row(status="incorrect", ms=None, rel_err=0.3, message="rel_err 0.3 > tolerance 0.005")
    v = judge(claim(tbps=2.8), results(bad))
    assert v.verdict == NOT_COMPARABLE and v.ours is None


@pytest.mark.parametrize("ours_status, expected", [("oom", REPRODUCED), ("ok", NOT_REPRODUCED), ("error", NOT_COMPARABLE)])
def test_out_of_memory_claims(ours_status, expected):
    ours = row(impl="eager", status=ours_status, ms=0.5 if ours_status == "ok" else None)
    v = judge(claim(impl="eager", status="oom"), results(ours))
    assert v.metric == "status" and v.verdict == expected


def test_judge_all_covers_every_claim():
    published = pd.DataFrame([claim(tbps=2.8), claim(impl="torch", median_ms=0.133)])
    assert [v.verdict for v in judge_all(published, results(row(ms=0.048)))] == [REPRODUCED, NOT_COMPARABLE]


def test_ratio_claims_same_gpu():
    published = pd.DataFrame([claim(median_ms=0.048), claim(impl="torch", median_ms=0.048 * 2.78)])
    measured = results(row(ms=0.048), row(impl="torch", ms=0.048 * 2.78))
    (r,) = ratio_claims(published, measured)
    assert (r.faster, r.slower) == ("seed_rowwise", "torch")
    assert r.claimed == pytest.approx(2.78) and r.ours == pytest.approx(2.78)
    assert r.verdict == REPRODUCED
    slower = results(row(ms=0.048), row(impl="torch", ms=0.048 * 1.2))
    (r,) = ratio_claims(published, slower)
    assert r.verdict == NOT_REPRODUCED and r.ours == pytest.approx(1.2)


def test_a_ratio_from_another_gpu_is_judged_as_a_ratio():
    published = pd.DataFrame([claim(median_ms=0.048), claim(impl="torch", median_ms=0.1334)])   # 2.78x
    measured = results(row(gpu="nvidia-h200", ms=0.045), row(gpu="nvidia-h200", impl="torch", ms=0.109))
    (r,) = ratio_claims(published, measured)                     # 2.42x [2.28, 2.57] once widened by 5 %
    assert r.verdict == NOT_REPRODUCED and r.ours_gpu == "nvidia-h200" and r.ours == pytest.approx(0.109 / 0.045)
    assert "nvidia-h100-sxm" in r.note and "nvidia-h200" in r.note
    near = results(row(gpu="nvidia-h200", ms=0.045), row(gpu="nvidia-h200", impl="torch", ms=0.045 * 2.7))
    assert ratio_claims(published, near)[0].verdict == REPRODUCED


def test_a_host_bound_ratio_gives_the_kernel_time_ratio():
    """A plain call that times the wrapper (seed_rowwise here: 23.3 us against 3.1 us of kernel) says so, and the
    note gives the ratio on kernel time; plain calls near their kernel time add nothing."""
    published = pd.DataFrame([claim(median_ms=0.048), claim(impl="torch", median_ms=0.048 * 1.01)])
    kernel = [row(gpu="nvidia-h200", ms=0.0031, timing="cupti"), row(gpu="nvidia-h200", impl="torch", ms=0.0051,
                                                                      timing="cupti")]
    measured = results(row(gpu="nvidia-h200", ms=0.0233), row(gpu="nvidia-h200", impl="torch", ms=0.0074), *kernel)
    (r,) = ratio_claims(published, measured)
    assert r.ours == pytest.approx(0.0074 / 0.0233)                  # judged on plain calls, as published
    assert "host-bound: a plain call of seed_rowwise 23.3 us against 3.1 us of kernel;" in r.note
    assert "on kernel time torch over seed_rowwise is 1.65x" in r.note
    quiet = results(row(gpu="nvidia-h200", ms=0.0040), row(gpu="nvidia-h200", impl="torch", ms=0.0060), *kernel)
    assert "host-bound" not in ratio_claims(published, quiet)[0].note


def test_other_gpu_time_claim_reports_our_throughput_with_its_unit():
    v = judge(claim(impl="torch", median_ms=0.1334), results(row(gpu="nvidia-h200", impl="torch", ms=0.109)))
    assert v.verdict == NOT_COMPARABLE and v.metric == "median_ms"
    assert v.ours_metric == "tbps" and v.ours == pytest.approx(NBYTES / 0.109e-3 / 1e12)


def _blocks(measured, low, high):
    """One derived Amdahl line (rooflab.report.derive.amdahl): softmax 20% of the eager block, 2x faster."""
    return pd.DataFrame([dict(gpu="nvidia-h200", dtype="bfloat16", phase="prefill", seqlen=2048, cache_len=0,
                              width=4096, heads=32, swapped="softmax", share=0.2, part_speedup=2.0, bound=1.25,
                              predicted=1 / (0.8 + 0.1), measured=measured, measured_low=low, measured_high=high,
                              outcome="win", graph_measured=None)])


AMDAHL = dict(kind="amdahl", source="000_x.txt", section="Amdahl", claim="21% share, 1.074x", gpu="nvidia-rtx-3050",
              phase="prefill", seqlen=2048, share=0.21, part_speedup=1.49, measured=1.074, bound=1.266)


def test_a_worded_amdahl_claim_holds_when_our_block_meets_our_own_prediction():
    from rooflab.report.verdicts import verdict_table
    empty = pd.DataFrame(columns=list(columns("softmax")) + ["source", "section", "claim"])
    held = verdict_table(empty, results(row()), amdahl=_blocks(1.10, 1.08, 1.12), claims=[AMDAHL]).iloc[0]
    assert held["kind"] == "amdahl" and held["verdict"] == REPRODUCED      # predicted 1.111 inside [1.026, 1.176]
    assert "Amdahl predicts 1.111x" in held["note"]
    missed = verdict_table(empty, results(row()), amdahl=_blocks(1.30, 1.29, 1.31), claims=[AMDAHL]).iloc[0]
    assert missed["verdict"] == NOT_REPRODUCED                              # above its own prediction and bound
