"""Quality gates: each gate trips on a row built to trip it, and stays quiet on its near twin."""

import pandas as pd
import pytest

from rooflab import qa
from rooflab.schema import read_results

SOFTMAX = {"rows": 8192, "cols": 4096}
DECODE = {"batch": 4, "heads_q": 32, "heads_kv": 8, "cache_len": 32768, "head_dim": 128, "ragged": True}
ATTENTION = {"batch": 4, "heads_q": 32, "heads_kv": 32, "seqlen_q": 4096, "seqlen_k": 4096, "head_dim": 128,
             "causal": True}


def row(study="softmax", impl="ours", dtype="float16", timing="events", ms=1.0, half=0.01, **extra):
    shape = {"softmax": SOFTMAX, "decode": DECODE, "attention": ATTENTION,
             "e2e": {"phase": "prefill", "seqlen": 2048, "cache_len": 0, "width": 4096, "heads": 32,
                     "part": "total"}}[study]
    return {"gpu": "g", "study": study, "impl": impl, "dtype": dtype, **shape, "timing": timing,
            "median_ms": ms, "ci_low_ms": ms - half, "ci_high_ms": ms + half, "reps": 100, "trials": 3,
            "frac_ceiling": 0.5, "ceiling_name": "copy_tbps", "strategy": None, "status": "ok",
            "message": None, **extra}


def gates(frame, **kw):
    out = qa.flags(pd.DataFrame(frame), **kw)
    return sorted(zip(out["gate"], out["impl"], out["dtype"]))


# ------------------------------------------------------------------ ours_vs_strategy

def test_ours_vs_strategy_trips_on_a_forced_twin_far_apart():
    rows = [row(impl="ours", ms=1.00, strategy="looped"), row(impl="ours_looped", ms=1.20)]
    out = qa.flags(pd.DataFrame(rows))
    assert list(out["gate"]) == ["ours_vs_strategy"]
    line = out.iloc[0]
    assert (line["impl"], line["dtype"], line["shape"]) == ("ours", "float16", "8192x4096")
    assert line["value"] == pytest.approx(1.2) and line["limit"] == pytest.approx(1.10)
    assert (line["rows"], line["cols"]) == (8192, 4096) and pd.isna(line["cache_len"])
    assert "ours_looped" in line["detail"]


@pytest.mark.parametrize("forced_ms, half", [(1.09, 0.01),    # 9% apart: within 10%
                                             (1.20, 0.11)])   # 20% apart but the intervals overlap
def test_ours_vs_strategy_quiet_within_threshold_or_overlap(forced_ms, half):
    rows = [row(impl="ours", ms=1.00, half=half, strategy="looped"), row(impl="ours_looped", ms=forced_ms, half=half)]
    assert gates(rows) == []


def test_ours_vs_strategy_compares_the_chosen_strategy_only():
    rows = [row(impl="ours", ms=1.00, strategy="rows"), row(impl="ours_looped", ms=2.0), row(impl="ours_rows", ms=1.0)]
    assert gates(rows) == []


def test_ours_vs_strategy_decode_nosplit_only():
    apart = [row("decode", impl="ours", ms=0.10, half=0.001, strategy="nosplit"),
             row("decode", impl="ours_nosplit", ms=0.13, half=0.001)]
    assert gates(apart) == [("ours_vs_strategy", "ours", "float16")]
    split = [row("decode", impl="ours", ms=0.10, half=0.001, strategy="split4"),
             row("decode", impl="ours_nosplit", ms=0.30, half=0.001)]
    assert gates(split) == []


def test_ours_vs_strategy_attention_triton_configs_only():
    """ours_triton forces the Triton kernel: the twin of `ours` wherever ours ran a Triton config,
    not where it ran the Gluon Hopper kernel."""
    triton = [row("attention", impl="ours", ms=1.00, strategy="64x64 w4 s3 tma"),
              row("attention", impl="ours_triton", ms=1.20)]
    assert gates(triton) == [("ours_vs_strategy", "ours", "float16")]
    gluon = [row("attention", impl="ours", ms=1.00, strategy="gluon-hopper"),
             row("attention", impl="ours_triton", ms=1.20)]
    assert gates(gluon) == []


def test_kernel_gates_prefer_cupti_rows():
    # events far apart, kernel time together: judged on cupti, no flag
    rows = [row(impl="ours", ms=0.010, half=0.0001, strategy="rows"),
            row(impl="ours_rows", ms=0.015, half=0.0001),
            row(impl="ours", timing="cupti", ms=0.0040, half=0.0001, strategy="rows"),
            row(impl="ours_rows", timing="cupti", ms=0.0041, half=0.0001)]
    assert gates(rows) == []
    # kernel time apart, events together: flagged, and the line says cupti
    rows = [row(impl="ours", ms=0.010, half=0.0001, strategy="rows"),
            row(impl="ours_rows", ms=0.0101, half=0.0001),
            row(impl="ours", timing="cupti", ms=0.0040, half=0.0001, strategy="rows"),
            row(impl="ours_rows", timing="cupti", ms=0.0060, half=0.0001)]
    out = qa.flags(pd.DataFrame(rows))
    assert list(out["gate"]) == ["ours_vs_strategy"] and out["detail"].iloc[0].startswith("cupti")
    assert out["value"].iloc[0] == pytest.approx(1.5)
    # cupti on one side only: both judged on events
    rows = [row(impl="ours", ms=0.010, half=0.0001, strategy="rows"),
            row(impl="ours_rows", ms=0.013, half=0.0001),
            row(impl="ours", timing="cupti", ms=0.0040, half=0.0001, strategy="rows")]
    out = qa.flags(pd.DataFrame(rows))
    assert list(out["gate"]) == ["ours_vs_strategy"] and out["detail"].iloc[0].startswith("events")


# ------------------------------------------------------------------ dtype_twin

def test_dtype_twin_trips_and_names_the_slower_twin():
    rows = [row(impl="torch", dtype="float16", ms=1.00), row(impl="torch", dtype="bfloat16", ms=1.20)]
    out = qa.flags(pd.DataFrame(rows))
    assert list(zip(out["gate"], out["impl"], out["dtype"])) == [("dtype_twin", "torch", "bfloat16")]
    assert out["value"].iloc[0] == pytest.approx(1.2) and out["limit"].iloc[0] == pytest.approx(1.15)


@pytest.mark.parametrize("bf16_ms, half", [(1.14, 0.01), (1.30, 0.16)])
def test_dtype_twin_quiet_within_threshold_or_overlap(bf16_ms, half):
    rows = [row(impl="torch", dtype="float16", ms=1.00, half=half),
            row(impl="torch", dtype="bfloat16", ms=bf16_ms, half=half)]
    assert gates(rows) == []


def test_dtype_twin_memory_bound_studies_only_and_same_timing():
    decode = [row("decode", impl="sdpa_flash", dtype="float16", ms=0.5, half=0.001),
              row("decode", impl="sdpa_flash", dtype="bfloat16", ms=0.3, half=0.001)]
    assert gates(decode) == [("dtype_twin", "sdpa_flash", "float16")]
    attention = [dict(r, study="attention") for r in decode]
    for r in attention:
        for col in ("cache_len", "ragged"):
            r.pop(col)
        r.update(seqlen_q=1024, seqlen_k=1024, causal=True)
    assert gates(attention) == []
    timings = [row(impl="torch", dtype="float16", ms=1.0), row(impl="torch", dtype="bfloat16", timing="cupti", ms=0.5)]
    assert gates(timings) == []


# ------------------------------------------------------------------ above_ceiling, few_samples

def test_above_ceiling():
    out = qa.flags(pd.DataFrame([row(impl="torch", frac_ceiling=1.05), row(impl="liger", frac_ceiling=1.02)]))
    assert list(zip(out["gate"], out["impl"])) == [("above_ceiling", "torch")]
    assert (out["value"].iloc[0], out["limit"].iloc[0]) == (1.05, 1.03)


def test_above_ceiling_judges_a_row_against_a_transfer_of_its_own_size():
    """8192x4096 fp16 moves 134 MB (128 MiB): a copy of that size ran at 4.6 TB/s, 1.1x the 2 GiB copy."""
    ceilings = {"copy_tbps": 4.2, "copy_tbps_64mib": 4.8, "copy_tbps_128mib": 4.62, "copy_tbps_1024mib": 4.1,
                "read_tbps": 4.6}
    rows = [row(impl="torch", frac_ceiling=1.16, bytes=2**27), row(impl="liger", frac_ceiling=1.12, bytes=2**27),
            row(impl="seed_rowwise", frac_ceiling=1.08, bytes=2**27, ceiling_name="read_tbps")]
    out = qa.flags(pd.DataFrame(rows), ceilings=ceilings)
    assert list(zip(out["gate"], out["impl"])) == [("above_ceiling", "torch"), ("above_ceiling", "seed_rowwise")]
    line = out.iloc[0]
    assert line["value"] == pytest.approx(1.16 / 1.1)               # liger: 1.12 / 1.1, within the limit
    assert line["detail"] == "events: 1.16 of copy_tbps, 1.05 of a transfer of its own size"
    assert "own size" not in out.iloc[1]["detail"]           # no sized reads measured: the whole-buffer ceiling
    assert qa.size_factor(ceilings, "copy_tbps", 2**40) == 1.0      # never below the whole-buffer ceiling
    assert qa.size_factor(ceilings, "matmul_fp16_tflops", 2**27) == 1.0 and qa.size_factor(None, "copy_tbps", 1) == 1.0
    assert list(qa.flags(pd.DataFrame(rows))["impl"]) == ["torch", "liger", "seed_rowwise"]   # without ceilings


def test_above_ceiling_judges_a_row_against_the_copy_in_its_own_trials():
    """A copy of the case's bytes timed in its trials (the `copy` bound) that moved them faster than the
    calibrate job's copies is the ceiling the row is held to, shape by shape, dtype and timing apart."""
    ceilings = {"copy_tbps": 4.3, "copy_tbps_128mib": 4.36}
    rows = [row(impl="ours", frac_ceiling=1.07, bytes=2**27), row(impl="copy", frac_ceiling=1.06, bytes=2**27),
            row(impl="liger", frac_ceiling=1.12, bytes=2**27),
            row(impl="ours", dtype="bfloat16", frac_ceiling=1.07, bytes=2**27)]      # no copy of its own: flagged
    out = qa.flags(pd.DataFrame(rows), ceilings=ceilings)
    assert list(zip(out["impl"], out["dtype"])) == [("liger", "float16"), ("ours", "bfloat16")]
    assert out.iloc[0]["value"] == pytest.approx(1.12 / 1.06)
    assert out.iloc[0]["detail"] == "events: 1.12 of copy_tbps, 1.06 of the copy in its own trials"
    assert "own size" in out.iloc[1]["detail"]
    slow_copy = [row(impl="ours", frac_ceiling=1.07, bytes=2**27), row(impl="copy", frac_ceiling=0.9, bytes=2**27)]
    out = qa.flags(pd.DataFrame(slow_copy), ceilings=ceilings)       # a slower copy never lowers the ceiling
    assert list(out["impl"]) == ["ours"] and "own size" in out.iloc[0]["detail"]


def test_few_samples():
    rows = [row(impl="torch", reps=19), row(impl="liger", trials=2), row(impl="seed_rowwise", reps=20, trials=3),
            row(impl="ours", reps=5, trials=1)]
    out = qa.flags(pd.DataFrame(rows)).set_index("impl")
    assert sorted(out.index) == ["liger", "ours", "torch"] and set(out["gate"]) == {"few_samples"}
    assert (out.loc["torch", "value"], out.loc["torch", "limit"]) == (19, 20)
    assert (out.loc["liger", "value"], out.loc["liger", "limit"]) == (2, 3)
    assert "reps 5 < 20" in out.loc["ours", "detail"] and "trials 1 < 3" in out.loc["ours", "detail"]


def test_only_ok_rows_and_never_published_rows_are_judged():
    rows = [row(impl="torch", frac_ceiling=1.5, status="incorrect"),
            row(impl="liger", reps=3, source="seed001 table 2"),
            row(impl="seed_rowwise", reps=3, source=None)]
    assert gates(rows) == [("few_samples", "seed_rowwise", "float16")]


def test_thresholds_override_and_unknown_key():
    rows = [row(impl="torch", frac_ceiling=1.05, reps=15)]
    assert gates(rows, thresholds={"above_ceiling": 1.10, "min_reps": 10}) == []
    assert gates(rows, thresholds={"above_ceiling": 1.04}) == [("above_ceiling", "torch", "float16"),
                                                                ("few_samples", "torch", "float16")]
    with pytest.raises(ValueError, match="colour"):
        qa.flags(pd.DataFrame(rows), thresholds={"colour": 1})


# ------------------------------------------------------------------ amdahl

def e2e_case(ours_total, timing="events", graph=None):
    """eager 4.0 ms total of which softmax 0.5 ms (bound 4/3.5 = 1.1429x); sdpa 3.0 of which attention 1.0 (1.5x)."""
    rows = [row("e2e", impl="eager", ms=4.0, dtype="bfloat16"),
            row("e2e", impl="eager", ms=0.5, dtype="bfloat16", part="softmax"),
            row("e2e", impl="ours_softmax", ms=ours_total, dtype="bfloat16"),
            row("e2e", impl="sdpa", ms=3.0, dtype="bfloat16"),
            row("e2e", impl="sdpa", ms=1.0, dtype="bfloat16", part="attention"),
            row("e2e", impl="ours_attention", ms=2.5, dtype="bfloat16")]
    if graph:
        rows += [row("e2e", impl=i, ms=ms, dtype="bfloat16", timing="cudagraph") for i, ms in graph.items()]
    return rows


def test_amdahl_trips_above_the_bound_with_slack():
    # 4.0 / 3.3 = 1.212x > 1.03 * 1.1429 = 1.177x
    out = qa.flags(pd.DataFrame(e2e_case(3.3)))
    assert list(zip(out["gate"], out["impl"])) == [("amdahl", "ours_softmax")]
    assert out["value"].iloc[0] == pytest.approx(4.0 / 3.3)
    assert out["limit"].iloc[0] == pytest.approx(1.03 * 4.0 / 3.5)
    assert out["part"].iloc[0] == "total" and out["seqlen"].iloc[0] == 2048


def test_amdahl_quiet_within_slack():
    # 4.0 / 3.45 = 1.159x: above the bound 1.1429x, within its 3% slack
    assert gates(e2e_case(3.45)) == []


def test_amdahl_quiet_when_the_intervals_allow_the_bound():
    # medians 4.0 / 3.3 = 1.212x, but the intervals allow 3.5 / 3.8 = 0.92x: a noisy host-bound block
    rows = e2e_case(3.3)
    rows[0].update(ci_low_ms=3.5, ci_high_ms=4.3)
    rows[2].update(ci_low_ms=2.9, ci_high_ms=3.8)
    assert gates(rows) == []
    rows[2].update(ci_high_ms=3.35)                       # 3.5 / 3.35 = 1.045x: still allowed
    assert gates(rows) == []
    rows[0].update(ci_low_ms=3.95)                        # 3.95 / 3.35 = 1.179x > 1.177x
    assert gates(rows) == [("amdahl", "ours_softmax", "bfloat16")]


def test_amdahl_cudagraph_totals_take_the_events_parts():
    graph = {"eager": 2.0, "ours_softmax": 1.6, "sdpa": 1.5, "ours_attention": 1.4}   # 1.25x > 1.177x
    out = qa.flags(pd.DataFrame(e2e_case(3.6, graph=graph)))
    assert list(zip(out["gate"], out["impl"])) == [("amdahl", "ours_softmax")]
    assert out["detail"].iloc[0].startswith("cudagraph")
    assert out["limit"].iloc[0] == pytest.approx(1.03 * 4.0 / 3.5)
    graph["ours_softmax"] = 1.8
    assert gates(e2e_case(3.6, graph=graph)) == []


def test_amdahl_attention_swap():
    rows = e2e_case(3.6)
    rows[-1]["median_ms"] = rows[-1]["ci_low_ms"] = rows[-1]["ci_high_ms"] = 1.9   # 3.0 / 1.9 = 1.58x > 1.545x
    assert gates(rows) == [("amdahl", "ours_attention", "bfloat16")]


# ------------------------------------------------------------------ cases, report, fixtures

def test_cases_are_distinct_with_python_values():
    rows = [row(impl="torch", reps=3), row(impl="liger", reps=3), row(impl="ours", frac_ceiling=1.2),
            row("decode", impl="ours", reps=3, dtype="bfloat16"), row(impl="torch", dtype="bfloat16", reps=3)]
    found = qa.cases(qa.flags(pd.DataFrame(rows)))
    assert found == [("decode", "bfloat16", DECODE), ("softmax", "float16", SOFTMAX), ("softmax", "bfloat16", SOFTMAX)]
    shape = found[0][2]
    assert type(shape["batch"]) is int and type(shape["ragged"]) is bool


def test_fixture_results_flags_and_cases_from_csv():
    frame = pd.concat([read_results(f"tests/fixtures/results/fixture-gpu/{study}.csv")
                       for study in ("softmax", "attention", "decode", "e2e")], ignore_index=True)
    out = qa.flags(frame)
    assert list(out.columns) == list(qa.COLUMNS)
    counts = out.groupby("gate").size().to_dict()
    assert counts == {"above_ceiling": 1, "few_samples": 8}      # one decode row at 1.0326; e2e reps 10
    ceiling = out[out["gate"] == "above_ceiling"].iloc[0]
    assert (ceiling["study"], ceiling["impl"], ceiling["shape"]) == ("decode", "sdpa_cudnn", "B=8 Hq=32 Hkv=32 L=32768 D=128")
    found = qa.cases(out)
    assert found[0] == ("decode", "float16", {"batch": 8, "heads_q": 32, "heads_kv": 32, "cache_len": 32768,
                                              "head_dim": 128, "ragged": False})
    assert len(found) == 3 and type(found[0][2]["ragged"]) is bool


def test_report_marks_remeasured_cases_and_writes_header_when_clean():
    rows = [row(impl="torch", reps=3, message=qa.REMEASURED), row(impl="liger", reps=3),
            row(impl="torch", dtype="bfloat16", reps=3)]
    out = qa.report(pd.DataFrame(rows))
    assert list(out.columns) == list(qa.QA_COLUMNS)
    assert dict(zip(zip(out["impl"], out["dtype"]), out["remeasured"])) == {
        ("torch", "float16"): True, ("liger", "float16"): True, ("torch", "bfloat16"): False}
    assert out["open"].all()
    clean = qa.report(pd.DataFrame([row(impl="torch")]))
    assert clean.empty and list(clean.columns) == list(qa.QA_COLUMNS)


def test_qa_and_reproduce_stay_off_the_measuring_layer():
    import subprocess
    import sys
    code = ("import sys, rooflab.qa, rooflab.reproduce; "
            "print(sorted(m for m in ('torch', 'triton', 'kernels', 'rooflab.bench', 'rooflab.report') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
