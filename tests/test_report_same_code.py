"""The harness's own floor in the paper: `ours` against the strategy it dispatched to, forced (the same
kernel), from the comparisons table; pairs against other implementations or strategies do not count."""
import pandas as pd

from rooflab.report import derive
from rooflab.report.load import RESULT_COLUMNS, Aggregate
from rooflab.report.views.quality import same_code_view
from rooflab.schema import columns, validate_frame

GPU = "test-gpu"


def row(impl, ms, rows, strategy=None):
    r = dict.fromkeys(columns("softmax"))
    r.update(gpu=GPU, study="softmax", impl=impl, dtype="float16", timing="cupti", status="ok", rows=rows, cols=4096,
             median_ms=ms, ci_low_ms=ms * 0.995, ci_high_ms=ms * 1.005, p20_ms=ms * 0.995, p80_ms=ms * 1.005,
             reps=60, trials=3, strategy=strategy)
    return r


def aggregate(*rows) -> Aggregate:
    frame = validate_frame(pd.DataFrame(list(rows), columns=list(columns("softmax"))), "test rows")
    return Aggregate(results=frame.reindex(columns=list(RESULT_COLUMNS)), published=pd.DataFrame(),
                     ceilings=pd.DataFrame(columns=["gpu", "name", "value", "unit"]), envs={GPU: {}})


def test_same_code_pairs_are_ours_against_its_dispatched_strategy_forced():
    agg = aggregate(row("ours", 1.00, 8192, "row"), row("ours_row", 0.96, 8192), row("ours_looped", 0.50, 8192),
                    row("liger", 0.90, 8192),
                    row("ours", 2.00, 16384, "looped"), row("ours_looped", 2.01, 16384), row("ours_row", 1.0, 16384))
    view = same_code_view(agg, derive.derive(agg), GPU)
    assert view["pairs"] == 2                 # ours_row at 8192 and ours_looped at 16384; not liger nor the others
    assert view["apart"] == 1                 # 4% apart with disjoint intervals: outside a tie
    assert view["max"] == "4.2%" and "rows=8192 cols=4096" in view["worst"]
    assert view["median"] == "2.3%"           # the two gaps, 0.5% and 4.2%, in log terms
    # ours is slower than ours_row (1.00 against 0.96 ms) and faster than ours_looped (2.00 against 2.01)
    (softmax,) = view["by_study"]
    assert softmax["study"] == "softmax" and (softmax["pairs"], softmax["slower"], softmax["faster"]) == (2, 1, 1)
    assert (softmax["mean"], softmax["mean_side"]) == ("1.8%", "slower")   # 1 / sqrt(0.96 * 1.005)


def test_no_pairs_no_view():
    agg = aggregate(row("ours", 1.00, 8192), row("liger", 0.90, 8192))
    assert same_code_view(agg, derive.derive(agg), GPU) is None
    assert same_code_view(agg, {}, GPU) is None
