"""Compute twins: a compute-bound attention claim on an H100 is judged on an H200 measurement."""
import pandas as pd
import pytest

from rooflab.report.verdicts import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, compute_twins, judge, ratio_claims
from rooflab.schema import columns, validate_frame

SHAPE = {"batch": 4, "heads_q": 32, "heads_kv": 32, "seqlen_q": 4096, "seqlen_k": 4096, "head_dim": 128,
         "causal": True}
FLOPS = 4 * 4 * 32 * 4096 * 4096 * 128 / 2


def row(gpu, impl, tflops, spread=0.02, **extra):
    r = dict.fromkeys(columns("attention"))
    ms = FLOPS / (tflops * 1e12) * 1e3
    r.update(gpu=gpu, study="attention", impl=impl, dtype="float16", timing="events", status="ok", **SHAPE,
             median_ms=ms, p20_ms=ms * (1 - spread), p80_ms=ms * (1 + spread),
             ci_low_ms=ms * (1 - spread), ci_high_ms=ms * (1 + spread), reps=10, tflops=tflops)
    r.update(extra)
    return r


def claim(impl, tflops):
    r = row("nvidia-h100-sxm", impl, tflops, source="003_x.txt", section="Benchmark")
    r.update(median_ms=None, p20_ms=None, p80_ms=None, ci_low_ms=None, ci_high_ms=None, reps=None)
    return pd.Series(r)


def measured(*rows):
    return validate_frame(pd.DataFrame(list(rows), columns=list(columns("attention"))), "rows")


def test_h100_and_h200_are_compute_twins_and_a_consumer_part_is_not():
    assert compute_twins("nvidia-h100-sxm", "nvidia-h200")
    assert not compute_twins("nvidia-rtx-3050", "nvidia-h200")


def test_fused_attention_claim_is_judged_on_the_twin():
    ours = measured(row("nvidia-h200", "seed_attention", 145.0))
    v = judge(claim("seed_attention", 642.0), ours)
    assert v.verdict == NOT_REPRODUCED and v.ratio == pytest.approx(145.0 / 642.0)
    assert "compute twin" in v.note
    assert judge(claim("seed_attention", 146.0), ours).verdict == REPRODUCED


def test_eager_attention_follows_bandwidth_and_stays_not_comparable():
    v = judge(claim("eager", 198.0), measured(row("nvidia-h200", "eager", 30.0)))
    assert v.verdict == NOT_COMPARABLE


def test_ratio_between_fused_kernels_is_judged_on_the_twin():
    published = pd.DataFrame([claim("seed_attention", 642.0), claim("sdpa_flash", 725.0)])
    ours = measured(row("nvidia-h200", "seed_attention", 145.0), row("nvidia-h200", "sdpa_flash", 320.0))
    (r,) = ratio_claims(published, ours)
    assert (r.faster, r.slower) == ("sdpa_flash", "seed_attention")
    assert r.verdict == NOT_REPRODUCED and r.ours == pytest.approx(320.0 / 145.0)
    assert "compute twin" in r.note


def test_an_article_counting_causal_flops_in_full_is_halved_before_it_is_judged():
    from rooflab.report.verdicts import FULL, HALVED, flop_convention, verdict_table
    published = pd.DataFrame([claim("sdpa_flash", 650.0), claim("seed_attention", 290.0)])   # FA2 published at 2x ours
    ours = measured(row("nvidia-h200", "sdpa_flash", 320.0), row("nvidia-h200", "seed_attention", 145.0))
    assert flop_convention(published, ours) == {"003_x.txt": FULL}
    table = verdict_table(published, ours, claims=[]).query("kind == 'value'").set_index("impl")
    # halved: 145 within [145 x 0.98 / 1.02 x 0.95, 145 x 1.02 / 0.98 x 1.05], 325 within the same for 320
    assert table.loc["seed_attention", "verdict"] == REPRODUCED and table.loc["sdpa_flash", "verdict"] == REPRODUCED
    assert "counts causal FLOPs in full: 145 halved" in table.loc["seed_attention", "note"]
    assert (table["note"].str.len() > 0).all()
    # the same number read in our convention is twice what we measure: not reproduced
    assert judge(claim("seed_attention", 290.0), ours, convention=HALVED).verdict == NOT_REPRODUCED
