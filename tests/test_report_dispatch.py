"""The softmax appendix's dispatch paragraph: every shape outside the 5% band is named."""
import pandas as pd

from rooflab.report.views.studies import DISPATCH_CLOSE, DISPATCH_MISS, _softmax_extra


def _cases(shapes):
    """A sweep's judged rows: per (rows, cols), ours and two forced strategies at the given TB/s."""
    rows = []
    for (r, c), speeds in shapes.items():
        for impl, tbps in speeds.items():
            rows.append(dict(impl=impl, dtype="bfloat16", rows=r, cols=c, status="ok", tbps=tbps,
                             timing="cupti", median_ms=0.1, bytes=1e8))
    return pd.DataFrame(rows)


def test_shapes_outside_the_band_are_listed_worst_first_with_their_share():
    cases = _cases({(4096, 4096): {"ours": 4.0, "ours_row": 4.05, "ours_looped": 3.0},       # 98.8%: inside
                    (512, 151936): {"ours": 2.59, "ours_split": 2.59, "ours_looped": 2.73},  # 94.9%: outside
                    (16, 4194304): {"ours": 2.0, "ours_split": 2.0, "ours_looped": 2.6}})    # 76.9%: below the floor
    view = _softmax_extra(cases, cases, {}, 8e6)
    assert (view["dispatch_close"], view["dispatch_compared"]) == (1, 3)
    assert len(view["dispatch_outside"]) == 2
    assert view["dispatch_outside"][0].startswith("rows=16 cols=4194304, bf16, kernel time")
    assert view["dispatch_outside"][0].endswith("(76.9%)")
    assert view["dispatch_outside"][1].endswith("ours_looped 2.73 TB/s (94.9%)")
    assert not view["dispatch_floor_ok"]
    assert 0.769 < DISPATCH_MISS < 0.949 < DISPATCH_CLOSE


def test_a_dispatcher_within_the_band_everywhere_lists_nothing():
    cases = _cases({(4096, 4096): {"ours": 4.0, "ours_row": 4.05, "ours_looped": 3.0}})
    view = _softmax_extra(cases, cases, {}, 8e6)
    assert view["dispatch_outside"] == [] and view["dispatch_floor_ok"]
    assert (view["dispatch_close"], view["dispatch_compared"]) == (1, 1)
