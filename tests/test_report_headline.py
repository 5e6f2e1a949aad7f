"""The field's acceptance numbers (rooflab.report.headline) and the peer / seed / timing selections
behind them, checked against the fixture's own rows; and figures that show every point they plot."""
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from rooflab.report import context, derive, figures, fmt, headline, load
from rooflab.report.analysis import geomean, is_peer, is_seed, judged

FIXTURES = Path(__file__).parent / "fixtures"
GPU = "fixture-gpu"


@pytest.fixture(scope="module")
def agg():
    return load.collect([FIXTURES / "results" / GPU])


@pytest.fixture(scope="module")
def cmp(agg):
    return derive.derive(agg)["comparisons"]


def _row(frame, impl, timing="events", **shape):
    rows = frame[(frame["impl"] == impl) & (frame["timing"] == timing)]
    for col, value in shape.items():
        rows = rows[rows[col] == value]
    assert len(rows) == 1, (impl, timing, shape)
    return rows.iloc[0]


def _ms(frame, impl, timing="events", **shape):
    return float(_row(frame, impl, timing, **shape)["median_ms"])


def _outcome(frame, peer, timing="events", **shape):
    """win / tie / loss for ours against `peer`, from the two rows' confidence intervals (independent of analysis)."""
    mine, other = _row(frame, "ours", timing, **shape), _row(frame, peer, timing, **shape)
    overlap = other["ci_low_ms"] <= mine["ci_high_ms"] and mine["ci_low_ms"] <= other["ci_high_ms"]
    r = other["median_ms"] / mine["median_ms"]
    return "tie" if overlap or abs(r - 1) <= 0.02 else ("win" if r > 1 else "loss")


def test_peers_are_neither_ours_nor_the_seeds_designs():
    assert is_peer("torch") and is_peer("sdpa_cudnn") and is_peer("eager")
    assert not is_peer("ours") and not is_peer("ours_looped") and not is_peer("seed_rowwise")
    assert is_seed("seed_attention") and not is_seed("torch")


def test_best_peer_excludes_the_seeds_which_are_compared_apart(agg, cmp):
    softmax = agg.study("softmax")
    shape = dict(dtype="float16", rows=4096, cols=2048)      # seed_rowwise is the fastest after ours here
    peers = derive.select(cmp, "softmax", "peer").set_index(["dtype", "rows", "cols"]).loc[tuple(shape.values())]
    seeds = derive.select(cmp, "softmax", "seed").set_index(["dtype", "rows", "cols"]).loc[tuple(shape.values())]
    assert peers["best_impl"] == "torch"
    assert peers["vs_best"] == pytest.approx(_ms(softmax, "torch", **shape) / _ms(softmax, "ours", **shape))
    assert seeds["best_impl"] == "seed_rowwise"
    assert seeds["vs_best"] == pytest.approx(_ms(softmax, "seed_rowwise", **shape) / _ms(softmax, "ours", **shape))


def test_judged_keeps_kernel_time_only_where_the_case_has_it(agg, cmp):
    softmax = judged(agg.study("softmax"), "softmax")
    small = softmax[(softmax["rows"] == 256) & (softmax["cols"] == 128)]
    large = softmax[(softmax["rows"] == 4096) & (softmax["cols"] == 2048)]
    assert set(small["timing"]) == {"cupti"} and set(large["timing"]) == {"events"}
    table = derive.select(cmp, "softmax", "peer").query("dtype == 'float16'").set_index(["rows", "cols"])
    assert table.loc[(256, 128), "timing"] == "cupti"
    raw = agg.study("softmax")
    assert table.loc[(256, 128), "vs_best"] == pytest.approx(
        _ms(raw, "torch", "cupti", rows=256, cols=128) / _ms(raw, "ours", "cupti", rows=256, cols=128))


def test_softmax_headline_splits_bandwidth_and_launch_bound_regions(agg, cmp):
    raw = agg.study("softmax")
    h = headline.softmax(cmp, raw, 8e6, agg.ceiling(GPU))
    fp16 = next(t for t in h["dtypes"] if t["dtype"] == "fp16")
    # fp16 shapes of at least 8 MB: 4096x2048, 8192x4096, 1024x131072 (liger refuses the last)
    best = {(4096, 2048): "torch", (8192, 4096): "liger", (1024, 131072): "torch"}
    ratios = {k: _ms(raw, p, dtype="float16", rows=k[0], cols=k[1]) / _ms(raw, "ours", dtype="float16", rows=k[0], cols=k[1])
              for k, p in best.items()}
    outcomes = [_outcome(raw, p, dtype="float16", rows=k[0], cols=k[1]) for k, p in best.items()]
    assert outcomes == ["win", "tie", "win"]           # 8192 x 4096: liger within the interval of ours
    assert fp16["n"] == 3 and (fp16["wins"], fp16["ties"], fp16["losses"]) == (2, 1, 0)
    assert fp16["outcomes"] == "2 wins, 1 tie and 0 losses"
    assert fp16["gm"] == f"{geomean(ratios.values()):.2f}x"
    assert fp16["worst"]["shape"] == "rows=8192 cols=4096" and fp16["worst"]["peer"] == "liger"
    assert h["peers"] == "liger and torch" and h["seeds"] == "seed_rowwise"
    # at least 128 MB: 8192x4096 (134 MB) and 1024x131072 (268 MB), as fractions of the copy ceiling
    assert h["large_frac"]["n"] == 2 and h["large_frac"]["ceiling"] == "4.2"
    assert h["large_frac"]["sized"] is None                     # no sized copies measured: no sentence
    # below 8 MB only the kernel's device time (CUPTI) counts
    launch = h["launch"]
    assert launch["n"] == 2
    expected = [_ms(raw, "torch", "cupti", rows=r, cols=128) / _ms(raw, "ours", "cupti", rows=r, cols=128)
                for r in (256, 4096)]
    assert launch["gm"] == f"{geomean(expected):.2f}x"
    assert [_outcome(raw, "torch", "cupti", dtype="float16", rows=r, cols=128) for r in (256, 4096)] == ["win", "loss"]
    assert (launch["wins"], launch["ties"], launch["losses"]) == (1, 0, 1)
    assert launch["worst"]["outcome"] == "loss" and launch["worst"]["shape"] == "rows=4096 cols=128"
    assert h["vs_seeds"]["n"] == 4 and h["vs_seeds"]["worst"]["peer"] == "seed_rowwise"


def test_attention_headline_against_flash_and_cudnn_one_at_a_time(agg, cmp):
    raw = agg.study("attention")
    h = headline.attention(cmp, raw)
    (group,) = h["groups"]                                    # fp16 causal at D=128, N >= 4096
    assert (group["dtype"], group["mask"], group["n"]) == ("fp16", "causal", 2)
    flash = [_ms(raw, "sdpa_flash", seqlen_q=n, head_dim=128) / _ms(raw, "ours", seqlen_q=n, head_dim=128)
             for n in (4096, 16384)]
    cudnn = [_ms(raw, "sdpa_cudnn", seqlen_q=n, head_dim=128) / _ms(raw, "ours", seqlen_q=n, head_dim=128)
             for n in (4096, 16384)]
    def span(xs):
        low, high = f"{min(xs):.2f}x", f"{max(xs):.2f}x"
        return low if low == high else f"{low}–{high}"
    assert group["flash"] == span(flash) and group["cudnn"] == span(cudnn)
    assert h["d64"]["n"] == 1 and h["d64"]["flash"] == span(
        [_ms(raw, "sdpa_flash", head_dim=64) / _ms(raw, "ours", head_dim=64)])
    assert h["vs_seeds"]["n"] == 3


def test_attention_headline_names_the_hopper_path_and_the_triton_kernel_alone(agg):
    raw = agg.study("attention")
    assert headline.hopper_path(raw) is None                  # no row ran the Gluon kernel
    frame = raw.copy()
    frame["strategy"] = frame["strategy"].astype(object)      # empty (all NaN) in the fixture
    hopper = (frame["impl"] == "ours") & (frame["head_dim"] == 128)
    frame.loc[hopper, "strategy"] = headline.HOPPER_PATH
    triton = frame[hopper].copy()
    triton["impl"] = headline.TRITON_ALONE
    for col in ("median_ms", "ci_low_ms", "ci_high_ms"):
        triton[col] = triton[col] * 1.25                       # the Triton kernel 1.25x slower there
    h = headline.hopper_path(pd.concat([frame, triton], ignore_index=True))
    cases = judged(frame[hopper], "attention")
    assert h["n"] == len(cases) and h["gain"] == "1.25x" and h["head_dims"] == "128"
    ours = [_ms(raw, "sdpa_cudnn", seqlen_q=n, head_dim=128) / _ms(raw, "ours", seqlen_q=n, head_dim=128)
            for n in (4096, 16384)]
    assert h["cudnn"] == f"{min(ours):.2f}x–{max(ours):.2f}x"
    alone = [r / 1.25 for r in ours]
    assert h["triton_cudnn"] == f"{min(alone):.2f}x–{max(alone):.2f}x"


def test_decode_headline(agg, cmp):
    raw = agg.study("decode")
    h = headline.decode(cmp, raw, agg.ceiling(GPU))
    ratios = {(b, n): _ms(raw, "sdpa_cudnn", batch=b, cache_len=n) / _ms(raw, "ours", batch=b, cache_len=n)
              for b in (1, 8) for n in (4096, 32768)}
    worst = min(ratios, key=ratios.get)
    assert h["vs_cudnn"]["n"] == 4 and h["vs_cudnn"]["worst"]["ratio"] == f"{ratios[worst]:.2f}x"
    assert h["vs_cudnn"]["worst"]["shape"] == f"B={worst[0]} Hq=32 Hkv=32 L={worst[1]} D=128"
    (anchor,) = h["anchor"]
    assert anchor["shape"] == "B=1 Hq=32 Hkv=32 L=4096 D=128" and anchor["vs_cudnn"] == f"{ratios[(1, 4096)]:.2f}x"
    # KV reads of at least 256 MB: B=1 L=32768 (537 MB), B=8 L=4096 (537 MB), B=8 L=32768 (4.3 GB)
    assert h["large"]["n"] == 3 and h["large"]["ceiling"] == "4.3"
    assert h["split"]["n"] == 4 and h["vs_seeds"] is None
    # paged over contiguous time: 1.04 (within 5%), 1.20, 1.005 (a tie), 1.10
    paged = {(b, n): _ms(raw, "ours_paged", batch=b, cache_len=n) / _ms(raw, "ours", batch=b, cache_len=n)
             for b in (1, 8) for n in (4096, 32768)}
    assert h["paged"]["n"] == 4 and h["paged"]["within"] == 2 and h["paged"]["tolerance"] == "5%"
    assert h["paged"]["low"] == f"{1 / paged[(1, 32768)]:.2f}x" and h["paged"]["low_shape"] == "B=1 Hq=32 Hkv=32 L=32768 D=128"
    assert h["paged"]["gm"] == f"{geomean([1 / r for r in paged.values()]):.2f}x"


def test_paged_page_size_is_the_studys():
    from rooflab.studies import decode
    assert headline.PAGED_PAGE_SIZE == decode.PAGE_SIZE


def test_e2e_graph_replay_totals(agg):
    g = headline.e2e_graph(agg.study("e2e"))
    (length,) = g["lengths"]
    assert length["length"] == "L=4096"
    assert (length["eager"], length["sdpa"], length["ours_attention"]) == ("0.09", "0.07", "0.068")
    assert length["eager_events"] == "0.195"


def test_verification_counts_pass_unsupported_and_failed_apart():
    view = context.verify_view(pd.read_csv(FIXTURES / "verify" / "interpreter.csv"))
    assert (view["rows"], view["ok"], view["unsupported"], view["failed"]) == (7, 5, 1, 1)
    assert view["failed_names"] == ["decode ours_nosplit fp16"]


def _drawn(agg, name):
    fig = plt.figure()
    data = figures.FigureData(agg, derive.derive(agg), GPU)
    assert figures.DRAW[name](fig, data) is None
    fig.canvas.draw()
    return fig


@pytest.mark.parametrize("name", ["softmax_bandwidth", "softmax_strategies", "attention_tflops", "decode_bandwidth",
                                  "cross_gpu", "e2e_breakdown"])
def test_linear_panels_show_every_point_and_keep_legends_off_the_data(agg, name):
    fig = _drawn(agg, name)
    try:
        for ax in fig.axes:
            if not ax.get_visible() or ax.get_yscale() != "linear":
                continue
            low, top = ax.get_ylim()
            for line in ax.get_lines():
                ys = [float(y) for y in line.get_ydata() if pd.notna(y)]
                if ys:
                    assert max(ys) <= top and min(ys) >= low, (name, line.get_label(), max(ys), top)
            assert ax.get_legend() is None, f"{name}: a legend inside a panel can cover its data"
        assert fig.legends, f"{name}: one legend for the figure, outside the panels"
    finally:
        plt.close(fig)


def test_decode_bandwidth_has_a_row_of_panels_per_kv_head_count(agg):
    fig = _drawn(agg, "decode_bandwidth")
    try:
        titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
        assert titles == ["B=1, Hkv=32", "B=8, Hkv=32"]
    finally:
        plt.close(fig)


def test_e2e_graph_per_phase_decode_first_and_the_sentence_for_each():
    def total(impl, phase, timing, ms, seqlen=1, cache_len=0):
        return {"impl": impl, "phase": phase, "timing": timing, "median_ms": ms, "part": "total", "status": "ok",
                "seqlen": seqlen, "cache_len": cache_len}
    rows = []
    for impl, (pe, pg, de, dg) in {"eager": (2.5, 2.2, 0.9, 0.32), "sdpa": (1.6, 1.22, 0.8, 0.14),
                                   "ours_attention": (1.9, 1.31, 0.85, 0.141)}.items():
        rows += [total(impl, "prefill", "events", pe, seqlen=2048), total(impl, "prefill", "cudagraph", pg, seqlen=2048),
                 total(impl, "decode", "events", de, cache_len=8192),
                 total(impl, "decode", "cudagraph", dg, cache_len=8192)]
    g = headline.e2e_graph(pd.DataFrame(rows))
    assert [p["phase"] for p in g["by_phase"]] == ["decode", "prefill"]
    decode, prefill = g["by_phase"]
    assert [e["length"] for e in decode["lengths"]] == ["L=8192"] and [e["length"] for e in prefill["lengths"]] == ["S=2048"]
    assert prefill["lengths"][0]["ours_attention"] == "1.31" and prefill["lengths"][0]["ours_attention_events"] == "1.9"
    assert decode["events_range"] == "0.8–0.9" and prefill["graph_range"] == "1.22–2.2"
    from rooflab.report import render
    text = render.environment("markdown").from_string(
        '<% import "headline.j2" as h %><< h.e2e({"graph": g}) >>').render(g=g)
    assert "the decode step is host-bound (0.8–0.9 ms" in text and "L=8192" in text
    assert "In prefill, replayed as one CUDA graph at S=2048, the block takes 2.2 ms in eager PyTorch" in text


def test_host_cost_medians_of_ours_and_each_peer_and_the_sentence():
    def host(impl, ms, rows, status="ok"):
        return {"impl": impl, "timing": "host", "median_ms": ms, "status": status, "rows": rows, "cols": 256}
    frame = pd.DataFrame([host("ours", 0.020, 1), host("ours", 0.016, 2), host("ours", 0.030, 3),
                          host("torch", 0.008, 1), host("torch", 0.007, 2), host("liger", 0.040, 1),
                          host("seed_rowwise", 0.2, 1), host("torch_compile", 0.5, 1, status="error"),
                          dict(host("ours", 0.9, 1), timing="events")])
    h = headline.host_cost(frame)
    assert h == {"n": 3, "ours": "20", "peers": [{"impl": "liger", "us": "40"}, {"impl": "torch", "us": "7.5"}]}
    assert headline.host_cost(frame[frame["impl"] != "ours"]) is None
    from rooflab.report import render
    env = render.environment("markdown")
    text = env.from_string('<% import "headline.j2" as hl %><< raw(hl.host({"host": h})) >>').render(h=h)
    assert text.startswith("A repeat call's own host time (timing `host`: the wrapper's checks and launch, at the 3")
    assert "has a median of 20 us for ours, against 40 us for liger, 7.5 us for torch." in text
    decode = {"vs_cudnn": {"n": 1, "outcomes": "1 win", "gm": "1x", "gm_interval": "",
                            "worst": {"ratio": "1x", "interval": "", "shape": "B=1", "dtype": "fp16", "outcome": "win"}},
              "anchor": [], "large": None, "split": None, "paged": None, "host": h}
    body = env.from_string('<% import "headline.j2" as hl %><< raw(hl.decode(h)|trim) >>').render(h=decode)
    assert "\n\n" not in body and body.endswith("7.5 us for torch.")      # one paragraph, the sentence last


def test_launch_bound_figure_marks_each_calls_host_time(agg):
    """`host` rows (beside the CUPTI rows) are drawn as crosses; the rest of the report ignores them."""
    import dataclasses
    kernel = agg.results[agg.results["timing"] == "cupti"]
    assert not kernel.empty
    host = kernel.assign(timing="host", median_ms=kernel["median_ms"] * 3, ci_low_ms=kernel["ci_low_ms"] * 3,
                         ci_high_ms=kernel["ci_high_ms"] * 3, tbps=None, tflops=None, frac_ceiling=None)
    more = dataclasses.replace(agg, results=pd.concat([agg.results, host], ignore_index=True))
    fig = _drawn(more, "launch_bound")
    try:
        labels = {t.get_text() for legend in fig.legends for t in legend.get_texts()}
        assert "ours, host time of the call" in labels
    finally:
        plt.close(fig)
    assert derive.derive(more)["comparisons"].equals(derive.derive(agg)["comparisons"])


def test_strategies_are_drawn_when_every_case_is_judged_on_kernel_time(tmp_path):
    """A run that times every softmax case kernel-only (CUPTI) still draws the forced strategies, at fixed sizes."""
    import shutil
    run = tmp_path / GPU
    shutil.copytree(FIXTURES / "results" / GPU, run)
    frame = pd.read_csv(run / "softmax.csv")
    kernel = frame[frame["timing"] == "events"].assign(timing="cupti")
    frame = pd.concat([frame[frame["timing"] != "cupti"], kernel], ignore_index=True)
    frame.to_csv(run / "softmax.csv", index=False)
    fig = _drawn(load.collect([run]), "softmax_strategies")
    try:
        drawn = {line.get_label() for ax in fig.axes for line in ax.get_lines()}
        assert {fmt.label("ours_looped"), fmt.label("ours_rows"), fmt.label("ours")} <= drawn
        assert all("MB read + written" in ax.get_title() for ax in fig.axes if ax.get_visible())
    finally:
        plt.close(fig)


def test_forced_strategies_keep_one_colour_across_panels():
    from rooflab.report.figures.style import color
    names = ["ours", "ours_rows", "ours_row", "ours_looped", "ours_split"]
    assert len({color(n, i) for i, n in enumerate(names)}) == len(names)
    assert all(color(n, 0) == color(n, 5) for n in names)      # not taken from the panel's own order


def test_sized_read_rate_interpolates_in_log_size_and_holds_the_ends():
    from rooflab.sized_ceilings import rate_at
    ceilings = {"read_tbps": 4.5, "read_tbps_256mib": 4.0, "read_tbps_1024mib": 4.4, "copy_tbps": 4.2}
    assert rate_at(ceilings, 128 * 2**20, "read") == 4.0                   # below the smallest: its rate
    assert rate_at(ceilings, 4096 * 2**20, "read") == 4.4                  # above the largest: its rate
    assert rate_at(ceilings, 512 * 2**20, "read") == pytest.approx(4.2)    # halfway in log2 size
    assert rate_at({"read_tbps": 4.5}, 2**30, "read") is None


def test_sized_copy_rate_reads_only_the_sized_copies():
    from rooflab.sized_ceilings import rate_at
    ceilings = {"read_tbps_256mib": 4.0, "copy_tbps_64mib": 4.6, "copy_tbps_256mib": 4.4, "copy_tbps": 4.2}
    assert rate_at(ceilings, 128 * 2**20, "copy") == pytest.approx(4.5)    # halfway in log2 size between the copies
    assert rate_at(ceilings, 32 * 2**20, "copy") == 4.6 and rate_at({"read_tbps_256mib": 4.0}, 2**30, "copy") is None
    assert rate_at(ceilings, 64 * 2**20, "read") == 4.0                    # the copies are no reads


def test_decode_large_shapes_beside_a_read_of_their_own_size(agg, cmp):
    raw = agg.study("decode")
    plain = headline.decode(cmp, raw, agg.ceiling(GPU))
    assert plain["large"]["sized"] is None                         # no sized reads measured: no sentence
    ceilings = dict(agg.ceiling(GPU), read_tbps_512mib=3.6, read_tbps_4096mib=4.2)
    sized = headline.decode(cmp, raw, ceilings)["large"]["sized"]
    # the large rows: B=1 L=32768 and B=8 L=4096 (537 MB, about 512 MiB), B=8 L=32768 (4.3 GB)
    peers = derive.select(cmp, "decode", "peer")
    large = peers[peers["bytes"] >= headline.LARGE_DECODE_BYTES].dropna(subset=["ours_frac"])
    from rooflab.sized_ceilings import rate_at
    shares = [row["ours_metric"] / rate_at(ceilings, row["bytes"], "read") for _, row in large.iterrows()]
    assert sized["median"] == fmt.pct(pd.Series(shares).median()) and sized["low"]["frac"] == fmt.pct(min(shares))
    smallest = large["bytes"].min()
    assert sized["smallest"] == fmt.megabytes(smallest)
    assert sized["smallest_read"] == fmt.num(rate_at(ceilings, smallest, "read"))
    assert sized["under"] == sum(s < headline.LARGE_DECODE_SHARE for s in shares) and sized["target"] == "95%"


def test_softmax_large_shapes_beside_a_copy_of_their_own_size(agg, cmp):
    raw = agg.study("softmax")
    ceilings = dict(agg.ceiling(GPU), copy_tbps_128mib=4.5, copy_tbps_512mib=4.3)
    sized = headline.softmax(cmp, raw, 8e6, ceilings)["large_frac"]["sized"]
    peers = derive.select(cmp, "softmax", "peer")
    large = peers[peers["bytes"] >= headline.LARGE_SOFTMAX_BYTES].dropna(subset=["ours_frac"])
    from rooflab.sized_ceilings import rate_at
    shares = [row["ours_metric"] / rate_at(ceilings, row["bytes"], "copy") for _, row in large.iterrows()]
    assert rate_at(ceilings, 134217728, "copy") == 4.5 and 4.3 < rate_at(ceilings, 268435456, "copy") < 4.5
    assert sized["median"] == fmt.pct(pd.Series(shares).median()) and sized["low"]["frac"] == fmt.pct(min(shares))
    assert sized["under"] == sum(s < headline.IN_TRIALS_SHARE for s in shares) and sized["target"] == "90%"
    assert sized["smallest_read"] == fmt.num(4.5) and sized["smallest_frac"] == fmt.pct(4.5 / 4.2)


def test_paper_says_the_size_matched_read_share():
    """The committed H200 run measured sized reads: the decode section names the share of them."""
    text = open("paper/paper.md").read()
    assert "against a read of its own size each shape reaches a median" in text


def test_ceiling_table_names_sized_reads_and_orders_them_by_size():
    from rooflab.report.views import environment
    names = ["read_tbps_1024mib", "copy_tbps_64mib", "datasheet_fp16_tflops", "copy_tbps_32mib", "read_tbps_128mib",
             "read_tbps_256mib"]
    assert sorted(names, key=environment._order) == ["read_tbps_128mib", "read_tbps_256mib", "read_tbps_1024mib",
                                                      "copy_tbps_32mib", "copy_tbps_64mib", "datasheet_fp16_tflops"]
    assert environment._label("read_tbps_256mib") == "read only, 256 MiB"
    assert environment._label("copy_tbps_64mib") == "copy, 64 MiB moved"
    assert environment._label("read_tbps") == "read only"


def test_host_against_a_reference_shape_by_shape_below_the_threshold():
    """ours' host time over torch's per shape, only where both have an ok host row under the threshold."""
    def host(impl, ms, rows, dtype="float16", nbytes=1e6, status="ok", timing="host"):
        return {"impl": impl, "timing": timing, "median_ms": ms, "status": status, "rows": rows, "cols": 256,
                "dtype": dtype, "bytes": nbytes}
    frame = pd.DataFrame([host("ours", 0.012, 1), host("torch", 0.010, 1),             # 1.2x
                          host("ours", 0.011, 2), host("torch", 0.010, 2),             # 1.1x
                          host("ours", 0.010, 3, dtype="float32"), host("torch", 0.010, 3, dtype="float32"),
                          host("ours", 0.050, 4), host("torch", 0.010, 4, nbytes=9e6),  # torch's row too large
                          host("ours", 0.090, 5, nbytes=9e6), host("torch", 0.010, 5, nbytes=9e6),   # above it
                          host("ours", 0.030, 6), host("torch", 0.010, 6, status="error"),
                          host("ours", 0.030, 7, timing="events"), host("torch", 0.010, 7, timing="events"),
                          host("liger", 0.001, 1)])
    h = headline.host_against(frame, "softmax", "torch", 8e6)
    assert h == {"n": 3, "reference": "torch", "median": "1.10x", "highest": "1.20x", "shape": "rows=1 cols=256",
                 "dtype": "fp16", "limit": "1.20x", "over": 0, "over_beyond": 0}
    assert headline.host_against(frame[frame["impl"] != "torch"], "softmax", "torch", 8e6) is None


def test_host_against_counts_ratios_above_the_limit_by_median_and_by_interval():
    """A median above the limit counts as over; it is over beyond its interval only when ours's lower
    bound over the reference's upper one is above the limit too."""
    def host(impl, ms, low, high, rows):
        return {"impl": impl, "timing": "host", "median_ms": ms, "ci_low_ms": low, "ci_high_ms": high,
                "status": "ok", "rows": rows, "cols": 256, "dtype": "float16", "bytes": 1e6}
    frame = pd.DataFrame([host("ours", 0.013, 0.0128, 0.0132, 1), host("torch", 0.010, 0.0099, 0.0101, 1),  # 1.30x, low 1.27
                          host("ours", 0.0125, 0.0110, 0.0140, 2), host("torch", 0.010, 0.0095, 0.0105, 2),  # 1.25x, low 1.05
                          host("ours", 0.011, 0.0109, 0.0111, 3), host("torch", 0.010, 0.0099, 0.0101, 3)])  # 1.10x
    h = headline.host_against(frame, "softmax", "torch", 8e6)
    assert (h["n"], h["over"], h["over_beyond"], h["highest"], h["limit"]) == (3, 2, 1, "1.30x", "1.20x")
    assert headline.host_against(frame, "softmax", "torch", 8e6, limit=1.28)["over_beyond"] == 0


def test_large_softmax_shapes_against_the_copy_in_their_trials():
    """ours' share of the copy bound's rate at the shapes of 128 MB and more: median, lowest, how many reach 90%."""
    from rooflab.report.headline import in_trial_copy
    table = pd.DataFrame({"bytes": [268e6, 268e6, 134e6, 8e6], "vs_best": [0.69, 0.95, 0.99, 0.5],
                          "shape": ["rows=16 cols=4194304", "rows=4096 cols=8192", "rows=4096 cols=4096", "small"],
                          "dtype": ["bfloat16", "float16", "float32", "float32"], "ours_metric": [3.0, 4.2, 4.4, 1.0]})
    out = in_trial_copy(table)
    assert (out["n"], out["reach"], out["median"], out["share"]) == (3, 2, "95%", "90%")
    assert (out["low"]["frac"], out["low"]["shape"], out["low"]["dtype"]) == ("69%", "rows=16 cols=4194304", "bf16")
    assert in_trial_copy(table[table["bytes"] < 128e6]) is None
    assert out["reach_interval"] is None                                   # no intervals given: not counted
    wide = table.assign(vs_best_high=[0.91, 0.97, 1.0, 0.6])               # 0.69's interval reaches 0.91
    assert in_trial_copy(wide)["reach_interval"] == 3


def test_under_share_counts_medians_and_whole_intervals_under_the_target():
    """A row under the share at its median counts as under; it stays under beyond its interval only when
    the share at its fastest bound (ours_low_ms) is under too."""
    rows = pd.DataFrame({"ours_frac": [0.90, 0.94, 0.97], "ours_ms": [1.0, 1.0, 1.0],
                         "ours_low_ms": [0.99, 0.98, 0.99]})     # fastest-bound shares 0.909, 0.959, 0.980
    assert headline.under_share(rows, 0.95) == {"target": "95%", "under": 2, "under_beyond": 1}
    assert headline.under_share(rows, 0.90)["under"] == 0


def test_decode_large_shapes_count_those_under_the_target_share(agg, cmp):
    large = headline.decode(cmp, agg.study("decode"), agg.ceiling(GPU))["large"]
    peers = derive.select(cmp, "decode", "peer")
    rows = peers[peers["bytes"] >= headline.LARGE_DECODE_BYTES].dropna(subset=["ours_frac"])
    assert large["target"] == "95%" and large["under"] == int((rows["ours_frac"] < 0.95).sum())
    assert 0 <= large["under_beyond"] <= large["under"] <= large["n"]
