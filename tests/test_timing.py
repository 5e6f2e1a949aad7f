"""rooflab.timing: the interval of the median, call budgets and the CUPTI timeline split."""
import math
import random

import pytest

from rooflab.timing import FLUSH_KERNEL, calls_per_trial, device_segments, median_ci_ranks, summarize


@pytest.mark.parametrize("n, ranks", [(20, (5, 14)), (21, (5, 15)), (100, (39, 60)), (6, (0, 5))])
def test_median_interval_ranks_match_the_binomial_tables(n, ranks):
    # 1-based (6, 15) for n = 20 and (40, 61) for n = 100 in the usual tables
    assert median_ci_ranks(n) == ranks


@pytest.mark.parametrize("n", [6, 20, 57, 300, 2500])
def test_median_interval_covers_at_least_95_percent(n):
    lo, hi = median_ci_ranks(n)
    if n <= 2000:
        coverage = sum(math.comb(n, k) for k in range(lo + 1, hi + 1)) / 2 ** n
        assert coverage >= 0.95
        narrower = sum(math.comb(n, k) for k in range(lo + 2, hi)) / 2 ** n
        assert narrower < 0.95            # and it is the narrowest symmetric pair that does
    assert 0 <= lo < n / 2 < hi < n


def test_interval_holds_the_true_median_about_95_percent_of_the_time():
    rng = random.Random(1)
    hits = 0
    for _ in range(2000):
        lo, _, hi = (lambda t: (t.ci_low_ms, t.median_ms, t.ci_high_ms))(summarize([rng.expovariate(1.0) for _ in range(21)]))
        hits += lo <= math.log(2) <= hi
    assert 0.93 <= hits / 2000 <= 0.985


def test_summary_of_pooled_samples():
    t = summarize([float(v) for v in range(1, 21)], trials=3)
    assert (t.median_ms, t.reps, t.trials) == (10.5, 20, 3)
    assert (t.ci_low_ms, t.ci_high_ms) == (6.0, 15.0)
    assert t.p20_ms == pytest.approx(4.8) and t.p80_ms == pytest.approx(16.2)


@pytest.mark.parametrize("estimate, calls", [(0.001, 50), (1.0, 10), (100.0, 7)])
def test_calls_per_trial_follow_the_budget_within_bounds(estimate, calls):
    assert calls_per_trial(estimate, budget_ms=10, min_calls=7, max_calls=50) == calls


def _timeline(calls):
    """A device timeline: a flush, then each call's kernels, then a flush, ... (start, dur, name)."""
    events, t = [], 0
    for kernels in calls + [[]]:
        events.append((t, 50_000, f"{FLUSH_KERNEL}_0d1d"))
        t += 60_000
        for duration in kernels:
            events.append((t, duration, "softmax_kernel"))
            t += duration + 3_000
    return events


def test_cupti_timeline_splits_at_flush_kernels_and_sums_each_calls_kernels():
    events = _timeline([[10_000], [4_000, 6_000], [12_000]])
    random.Random(0).shuffle(events)                     # order comes from the timestamps
    assert device_segments(events, 3) == pytest.approx([0.010, 0.010, 0.012])


def test_cupti_timeline_with_missing_flushes_or_empty_calls_is_an_error():
    with pytest.raises(RuntimeError, match="flush kernels"):
        device_segments(_timeline([[10_000], [10_000]])[1:], 2)
    with pytest.raises(RuntimeError, match="no device work"):
        device_segments(_timeline([[10_000], []]), 2)


def test_host_samples_time_each_call_after_its_flush(monkeypatch):
    """`host` mode: one wall-clock sample per call, each call after a queued flush, one sync at the end."""
    import time

    import torch

    from rooflab.timing import CudaTimer
    events, syncs = [], []
    timer = CudaTimer.__new__(CudaTimer)                  # no GPU here: the flush is recorded, not run
    timer.flush = lambda: events.append("flush")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: syncs.append(len(events)))

    def call():
        events.append("call")
        time.sleep(0.002)
    samples = timer.sample(call, 4, "host")
    assert events == ["flush", "call"] * 4 and syncs == [8]
    assert len(samples) == 4 and all(1.9 <= s < 50 for s in samples)    # ms, about the 2 ms sleep
    with pytest.raises(ValueError, match="unknown timing mode"):
        timer.sample(call, 1, "wall")
