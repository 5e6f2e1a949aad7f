"""A fresh run against a committed one: verdicts, the interval rule, the summary and the figure."""
import math

import matplotlib
import pandas as pd
import pytest

from rooflab import reproduce
from rooflab.schema import columns

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def row(study="softmax", impl="ours", dtype="float16", timing="events", ms=1.0, half=0.01, status="ok", **shape):
    base = {"gpu": "g", "study": study, "impl": impl, "dtype": dtype, "timing": timing, "median_ms": ms,
            "ci_low_ms": ms - half if ms is not None else None, "ci_high_ms": ms + half if ms is not None else None,
            "status": status, "reps": 100, "trials": 3, "message": None}
    defaults = {"softmax": {"rows": 8192, "cols": 4096},
                "decode": {"batch": 1, "heads_q": 32, "heads_kv": 8, "cache_len": 4096, "head_dim": 128,
                           "ragged": False},
                "e2e": {"phase": "prefill", "seqlen": 2048, "cache_len": 0, "width": 4096, "heads": 32,
                        "part": "total"}}[study]
    return {**base, **defaults, **shape}


def frame(*rows):
    return pd.DataFrame(list(rows))


@pytest.fixture
def pair():
    committed = frame(
        row(impl="ours", ms=1.00, half=0.01),                       # same within 5%: reproduced
        row(impl="torch", ms=1.00, half=0.01),                      # 20% faster, intervals apart: faster
        row(impl="liger", ms=1.00, half=0.01),                      # 20% slower, intervals apart: slower
        row(impl="ours_row", ms=1.00, half=0.15),                   # 12% slower but intervals overlap: reproduced
        row(impl="ours_split", ms=1.00, half=0.01),                 # only committed: missing
        row(impl="seed_rowwise", ms=1.00, status="error"),          # error committed, ok fresh: new
        row(study="decode", impl="ours", ms=0.010, half=0.0001),    # under min_ms, slower
        row(study="decode", impl="ours", ms=0.006, timing="cupti", half=0.0001),
        row(study="decode", impl="sdpa_flash", ms=0.050, timing="cupti", half=0.0001),  # cupti one side only
        row(study="decode", impl="sdpa_flash", ms=0.050, half=0.0001),
        row(study="e2e", impl="eager", ms=3.8, half=0.04),
        row(study="e2e", impl="eager", ms=0.5, half=0.01, part="softmax"),              # parts are not compared
    )
    fresh = frame(
        row(impl="ours", ms=1.04, half=0.001),
        row(impl="torch", ms=0.80, half=0.01),
        row(impl="liger", ms=1.20, half=0.01),
        row(impl="ours_row", ms=1.12, half=0.15),
        row(impl="seed_rowwise", ms=1.00),
        row(impl="ours_looped", ms=2.0),                            # only fresh: new
        row(impl="ours", dtype="bfloat16", ms=1.0, status="oom"),  # not ok on either side: absent
        row(study="decode", impl="ours", ms=0.012, half=0.0001),
        row(study="decode", impl="ours", ms=0.0061, timing="cupti", half=0.0001),
        row(study="decode", impl="sdpa_flash", ms=0.050, half=0.0001),
        row(study="e2e", impl="eager", ms=4.2, half=0.04),
        row(study="e2e", impl="eager", ms=0.9, half=0.01, part="softmax"),
    )
    return committed, fresh


def verdicts(out):
    return {(r.study, r.impl, r.timing): r.verdict for r in out.itertuples()}


def test_every_verdict(pair):
    out = reproduce.compare(*pair)
    assert verdicts(out) == {
        ("softmax", "ours", "events"): "reproduced",
        ("softmax", "torch", "events"): "faster",
        ("softmax", "liger", "events"): "slower",
        ("softmax", "ours_row", "events"): "reproduced",
        ("softmax", "ours_split", "events"): "missing",
        ("softmax", "seed_rowwise", "events"): "new",
        ("softmax", "ours_looped", "events"): "new",
        ("decode", "ours", "events"): "slower",
        ("decode", "ours", "cupti"): "reproduced",
        ("decode", "sdpa_flash", "events"): "reproduced",
        ("e2e", "eager", "events"): "slower",
    }
    assert list(out.columns) == list(reproduce.COLUMNS)


def test_ratio_intervals_and_shape_columns(pair):
    out = reproduce.compare(*pair).set_index(["study", "impl", "timing"])
    torch = out.loc[("softmax", "torch", "events")]
    assert torch["ratio"] == pytest.approx(0.80)
    assert (torch["committed_low"], torch["committed_high"]) == pytest.approx((0.99, 1.01))
    assert (torch["fresh_low"], torch["fresh_high"]) == pytest.approx((0.79, 0.81))
    assert torch["shape"] == "8192x4096" and torch["rows"] == 8192 and torch["cols"] == 4096
    assert pd.isna(torch["cache_len"])
    new = out.loc[("softmax", "ours_looped", "events")]
    assert math.isnan(new["committed_ms"]) and new["fresh_ms"] == 2.0 and math.isnan(new["ratio"])
    e2e = out.loc[("e2e", "eager", "events")]
    assert e2e["part"] == "total" and e2e["shape"] == "prefill S=2048 L=0 W=4096 H=32 total"
    decode = out.loc[("decode", "ours", "cupti")]
    assert decode["shape"] == "B=1 Hq=32 Hkv=8 L=4096 D=128" and decode["ragged"] is False
    assert decode["kernel_time"] and not out.loc[("decode", "ours", "events"), "kernel_time"]
    assert out.loc[("decode", "sdpa_flash", "events"), "kernel_time"]


def test_interval_overlap_rule():
    # 12% apart: reproduced only because the intervals touch
    assert reproduce.verdict(1.0, 1.12, 0.9, 1.06, 1.06, 1.2) == "reproduced"
    assert reproduce.verdict(1.0, 1.12, 0.9, 1.05, 1.06, 1.2) == "slower"
    # within tolerance although the intervals are apart
    assert reproduce.verdict(1.0, 0.96, 0.99, 1.01, 0.95, 0.97) == "reproduced"
    assert reproduce.verdict(1.0, 0.94, 0.99, 1.01, 0.93, 0.95) == "faster"
    # no interval: the tolerance alone decides
    assert reproduce.verdict(1.0, 1.06, None, None, None, None) == "slower"
    assert reproduce.verdict(1.0, 1.06, None, None, None, None, tolerance=0.10) == "reproduced"


def test_tolerance_argument(pair):
    out = reproduce.compare(*pair, tolerance=0.25)
    assert verdicts(out)[("softmax", "torch", "events")] == "reproduced"
    assert verdicts(out)[("softmax", "liger", "events")] == "reproduced"


def test_summary_share_and_min_cut(pair):
    table = reproduce.summary(reproduce.compare(*pair)).set_index("study")
    softmax = table.loc["softmax"]
    assert (softmax["compared"], softmax["compared_at_least_min"], softmax["reproduced_at_least_min"]) == (4, 4, 2)
    assert softmax["share_reproduced"] == pytest.approx(0.5)
    assert (softmax["faster"], softmax["slower"], softmax["new"], softmax["missing"]) == (1, 1, 2, 1)
    decode = table.loc["decode"]
    # 0.010 ms and 0.006 ms are under the default 0.020 ms cut; 0.050 ms is not
    # kernel time: ours' cupti line (0.006 ms) and sdpa_flash's events line (its cupti row is on one side
    # only); ours' events line is a plain call beside kernel time, counted apart
    assert (decode["compared"], decode["compared_at_least_min"], decode["reproduced_at_least_min"]) == (2, 1, 1)
    assert decode["share_reproduced"] == 1.0 and decode["slower"] == 0
    assert decode["calls_at_least_min"] == 0 and math.isnan(decode["calls_share_reproduced"])
    lower = reproduce.summary(reproduce.compare(*pair), min_ms=0.001).set_index("study").loc["decode"]
    assert (lower["compared_at_least_min"], lower["reproduced_at_least_min"]) == (2, 2)
    assert (lower["calls_at_least_min"], lower["calls_share_reproduced"]) == (1, 0.0)
    assert table.loc["e2e", "share_reproduced"] == 0.0
    assert list(reproduce.summary(reproduce.compare(*pair)).columns) == list(reproduce.SUMMARY_COLUMNS)


def test_compare_reads_csv_rows_from_files(tmp_path):
    """Rows as read_results gives them (every schema column, bool shapes) match each other."""
    from rooflab.schema import read_results
    base = pd.read_csv("tests/fixtures/results/fixture-gpu/decode.csv")
    slower = base.copy()
    slower[["median_ms", "ci_low_ms", "ci_high_ms", "p20_ms", "p80_ms"]] *= 1.5
    base.to_csv(tmp_path / "a.csv", index=False)
    slower.to_csv(tmp_path / "b.csv", index=False)
    a, b = read_results(tmp_path / "a.csv"), read_results(tmp_path / "b.csv")
    assert list(a.columns) == list(columns("decode"))
    same = reproduce.compare(a, a)
    assert len(same) == len(a[a["status"] == "ok"]) and set(same["verdict"]) == {"reproduced"}
    moved = reproduce.compare(a, b)
    assert set(moved["verdict"]) == {"slower"}
    assert moved["ratio"].to_numpy() == pytest.approx(1.5)


def test_draw_runs_on_an_agg_figure(pair):
    fig, ax = plt.subplots()
    reproduce.draw(reproduce.compare(*pair), ax)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "ms" in ax.get_xlabel() and "ms" in ax.get_ylabel()
    labels = ax.get_legend_handles_labels()[1]
    assert {"softmax", "decode", "e2e", "y = x"} <= set(labels)
    fig.savefig(__import__("io").BytesIO(), format="png")
    plt.close(fig)
    fig, ax = plt.subplots()
    reproduce.draw(reproduce.compare(pd.DataFrame(columns=["study", "status", "median_ms"]),
                                     pd.DataFrame(columns=["study", "status", "median_ms"])), ax)
    assert ax.texts and "no case" in ax.texts[0].get_text()
    plt.close(fig)


def test_provenance_names_both_runs_and_whether_gpu_and_commit_match():
    from rooflab.reproduce import provenance
    a = {"git_commit": "aaa", "gpu": "NVIDIA H200", "gpu_uuid": "GPU-1", "time": "t1", "config": {"profile": "full"}}
    b = {"git_commit": "bbb", "gpu": "NVIDIA H200", "gpu_uuid": "GPU-2", "time": "t2", "config": {"profile": "quick"}}
    p = provenance(a, b, 0.05, 0.02)
    assert p["committed"] == {"git_commit": "aaa", "gpu": "NVIDIA H200", "gpu_uuid": "GPU-1", "time": "t1",
                              "profile": "full", "measuring_code": None}
    assert p["fresh"]["profile"] == "quick" and (p["same_gpu"], p["same_commit"]) == (False, False)
    same = provenance(a, dict(a, time="t3"), 0.05, 0.02)
    assert (same["same_gpu"], same["same_commit"]) == (True, True)
    assert provenance({}, {}, 0.05, 0.02)["same_gpu"] is False      # unknown GPUs are not "the same"
    assert p["same_measuring_code"] is None                            # no id recorded, no code_id: unknown
    ids = {"aaa": "c1", "bbb": "c1"}
    assert provenance(a, b, 0.05, 0.02, code_id=ids.get)["same_measuring_code"] is True
    ids["bbb"] = "c2"
    assert provenance(a, b, 0.05, 0.02, code_id=ids.get)["same_measuring_code"] is False
    recorded = provenance(a, dict(b, measuring_code="c1"), 0.05, 0.02, code_id=ids.get)   # env.json's id wins
    assert recorded["fresh"]["measuring_code"] == "c1" and recorded["same_measuring_code"] is True


def test_measuring_code_is_the_same_from_a_tree_and_from_its_commit(tmp_path):
    import subprocess

    from rooflab import measuring_code
    for name in measuring_code.MEASURING_CODE:
        path = tmp_path / name
        if path.suffix:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# {name}\n")
        else:
            path.mkdir(parents=True, exist_ok=True)
            (path / "a.py").write_text(f"# {name}\n")
    (tmp_path / "kernels" / "__pycache__").mkdir()
    (tmp_path / "kernels" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")   # not code
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "one"], check=True)
    first = measuring_code.from_tree(tmp_path)
    assert first is not None and first == measuring_code.from_commit("HEAD", tmp_path)
    (tmp_path / "kernels" / "a.py").write_text("# changed\n")
    assert measuring_code.from_tree(tmp_path) != first
    (tmp_path / "README.md").write_text("not measuring code\n")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "two"], check=True)
    assert measuring_code.from_commit("HEAD", tmp_path) == measuring_code.from_tree(tmp_path) != first
    assert measuring_code.from_commit("HEAD~1", tmp_path) == first
    assert measuring_code.from_commit("no-such-commit", tmp_path) is None and measuring_code.from_commit(None) is None
    (tmp_path / "config" / "config.yaml").unlink()
    assert measuring_code.from_tree(tmp_path) is None                  # a missing path: unknown


def test_e2e_graph_replay_is_the_kernel_time_of_its_case():
    """A decode step timed both ways: its CUDA-graph replay speaks for the kernels, the host-paced
    events line is a plain call counted apart; a prefill block with events only keeps its events line."""
    decode = {"phase": "decode", "seqlen": 1, "cache_len": 8192}
    committed = frame(row(study="e2e", impl="sdpa", ms=0.83, half=0.04, **decode),
                      row(study="e2e", impl="sdpa", timing="cudagraph", ms=0.139, half=0.001, **decode),
                      row(study="e2e", impl="sdpa", ms=1.43, half=0.02))
    fresh = frame(row(study="e2e", impl="sdpa", ms=0.54, half=0.04, **decode),
                  row(study="e2e", impl="sdpa", timing="cudagraph", ms=0.140, half=0.001, **decode),
                  row(study="e2e", impl="sdpa", ms=1.44, half=0.02))
    out = reproduce.compare(committed, fresh)
    kernel = {(r.timing, r.phase): (bool(r.kernel_time), r.verdict) for r in out.itertuples()}
    assert kernel == {("events", "decode"): (False, "faster"), ("cudagraph", "decode"): (True, "reproduced"),
                      ("events", "prefill"): (True, "reproduced")}
    line = reproduce.summary(out).set_index("study").loc["e2e"]
    assert (line["compared_at_least_min"], line["reproduced_at_least_min"], line["share_reproduced"]) == (2, 2, 1.0)
    assert (line["calls_at_least_min"], line["calls_share_reproduced"]) == (1, 0.0)


def test_host_rows_are_not_compared():
    """A call's host time measures the host's CPU: no line of the reproduction, whatever it did."""
    committed = frame(row(impl="ours", ms=0.010, half=0.001, timing="cupti"), row(impl="ours", ms=0.02, timing="host"))
    fresh = frame(row(impl="ours", ms=0.010, half=0.001, timing="cupti"), row(impl="ours", ms=0.04, timing="host"))
    out = reproduce.compare(committed, fresh)
    assert list(out["timing"]) == ["cupti"] and list(out["verdict"]) == ["reproduced"]
