"""Win / tie / loss in the derived comparisons table (rooflab.report.derive), on hand-computed cases: a
comparison is a tie when the two rows' 95% confidence intervals overlap or their medians are within 2% of
each other; otherwise a win (ours faster) or a loss."""
import pandas as pd
import pytest

from rooflab.report import derive
from rooflab.report.analysis import LOSS, TIE, TIE_WITHIN, WIN, counts, outcome, versus
from rooflab.schema import columns, validate_frame


def row(impl, ms, low, high, rows=8192):
    r = dict.fromkeys(columns("softmax"))
    r.update(gpu="test-gpu", study="softmax", impl=impl, dtype="float16", timing="events", status="ok", rows=rows,
             cols=4096, median_ms=ms, ci_low_ms=low, ci_high_ms=high, p20_ms=low, p80_ms=high, reps=60, trials=3,
             tbps=2 * rows * 4096 * 2 / (ms * 1e-3) / 1e12)
    return r


def frame(*rows):
    return validate_frame(pd.DataFrame(list(rows), columns=list(columns("softmax"))), "test rows")


def comparisons(rows, study):
    """The derived lines of ours against the fastest peer."""
    return derive.select(derive.comparisons(rows, study), study, "peer")


def test_overlapping_intervals_are_a_tie_even_10_percent_apart():
    table = comparisons(frame(row("ours", 1.00, 0.90, 1.10), row("torch", 1.10, 1.05, 1.20)), "softmax")
    (r,) = table.itertuples()
    assert r.vs_best == pytest.approx(1.10) and r.vs_best_outcome == TIE
    assert (r.vs_best_low, r.vs_best_high) == (pytest.approx(1.05 / 1.10), pytest.approx(1.20 / 0.90))


def test_disjoint_intervals_one_and_a_half_percent_apart_are_a_tie():
    ours, peer = row("ours", 1.000, 0.999, 1.001), row("torch", 1.015, 1.014, 1.016)
    ratio, low, high, result = versus(pd.Series(ours), pd.Series(peer))
    assert low > 1 and ratio == pytest.approx(1.015) and result == TIE
    assert comparisons(frame(ours, peer), "softmax")["vs_best_outcome"].tolist() == [TIE]


@pytest.mark.parametrize("peer_ms, expected", [(1.05, WIN), (1 / 1.05, LOSS)])
def test_disjoint_intervals_five_percent_apart_are_a_win_or_a_loss(peer_ms, expected):
    ours, peer = row("ours", 1.0, 0.995, 1.005), row("torch", peer_ms, peer_ms * 0.995, peer_ms * 1.005)
    table = comparisons(frame(ours, peer), "softmax")
    assert table["vs_best_outcome"].tolist() == [expected]
    low, high = table["vs_best_low"].iloc[0], table["vs_best_high"].iloc[0]
    assert low == pytest.approx(peer_ms * 0.995 / 1.005) and high == pytest.approx(peer_ms * 1.005 / 0.995)
    assert (low > 1) if expected == WIN else (high < 1)


def test_outcome_rule_and_counts():
    assert TIE_WITHIN == 0.02
    assert outcome(1.019, 1.01, 1.03) == TIE and outcome(1.021, 1.01, 1.03) == WIN
    assert outcome(0.97, 0.96, 0.975) == LOSS and outcome(0.97, 0.96, 1.0) == TIE
    assert counts([WIN, TIE, None, LOSS, WIN]) == {WIN: 2, TIE: 1, LOSS: 1}


def test_rows_without_an_interval_fall_back_to_their_medians():
    ours, peer = row("ours", 1.0, None, None), row("torch", 1.05, None, None)
    table = comparisons(frame(ours, peer), "softmax")
    assert table["vs_best_low"].iloc[0] == table["vs_best_high"].iloc[0] == pytest.approx(1.05)
    assert table["vs_best_outcome"].iloc[0] == WIN


def test_a_case_judged_on_kernel_time_carries_both_plain_call_shares():
    """Small cases are judged on CUPTI kernel time; the cross-GPU figure still sets ours and that case's fastest
    peer side by side in plain calls: each one's plain-call share of the ceiling travels with the line."""
    def timed(impl, ms, timing, frac):
        r = row(impl, ms, ms * 0.99, ms * 1.01, rows=64)
        r.update(timing=timing, frac_ceiling=frac)
        return r
    rows = frame(timed("ours", 0.004, "events", 0.20), timed("torch", 0.005, "events", 0.16),
                 timed("liger", 0.0045, "events", 0.18),
                 timed("ours", 0.002, "cupti", 0.40), timed("torch", 0.0021, "cupti", 0.38),
                 timed("liger", 0.0030, "cupti", 0.27))
    (r,) = comparisons(rows, "softmax").itertuples()
    assert r.timing == "cupti" and r.best_impl == "torch"              # fastest on kernel time, not in plain calls
    assert (r.ours_frac_plain, r.best_frac_plain) == (pytest.approx(0.20), pytest.approx(0.16))
