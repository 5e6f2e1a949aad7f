"""The loader: valid folders aggregate, bad ones are named in `problems` and skipped, the fresh run wins."""
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rooflab.report import load

FIXTURES = Path(__file__).parent / "fixtures" / "results"
GOOD, PARTIAL, BROKEN = (FIXTURES / n for n in ("fixture-gpu", "fixture-gpu-partial", "fixture-gpu-broken"))


@pytest.fixture(scope="module")
def agg():
    return load.collect([GOOD, PARTIAL, BROKEN])


def test_valid_folder_appears_in_aggregate(agg):
    good = agg.results[agg.results["gpu"] == "fixture-gpu"]
    for study in ("softmax", "attention", "decode", "e2e"):
        expected = len(pd.read_csv(GOOD / f"{study}.csv"))
        assert (good["study"] == study).sum() == expected
    assert agg.envs["fixture-gpu"]["gpu"] == "Fixture GPU (test data)"
    assert agg.ceiling("fixture-gpu")["copy_tbps"] == pytest.approx(4.2)


def test_malformed_folder_is_named_and_skipped(agg):
    assert "fixture-gpu-broken" not in agg.envs
    assert not (agg.results["gpu"] == "fixture-gpu-broken").any()
    assert any(str(BROKEN) in p and "env.json" in p for p in agg.problems)


def test_bad_single_csv_is_named_and_the_rest_kept(agg):
    partial = agg.results[agg.results["gpu"] == "fixture-gpu-partial"]
    assert set(partial["study"]) == {"softmax"}
    line = next(p for p in agg.problems if "decode.csv" in p)
    assert line.startswith(f"skipped file {PARTIAL / 'decode.csv'}") and "status" in line
    assert len(agg.problems) == 2


def test_study_frames_have_typed_shapes(agg):
    attention = agg.study("attention")
    assert str(attention["seqlen_q"].dtype) == "Int64"
    assert set(attention["causal"]) == {True, False}
    assert list(attention.columns) == list(load.columns("attention"))


def test_round_trip_through_files(agg, tmp_path):
    paths = [tmp_path / n for n in ("r.csv", "p.csv", "c.csv", "e.json", "problems.txt")]
    load.write(agg, *paths)
    back = load.read(*paths)
    assert len(back.results) == len(agg.results)
    assert back.problems == agg.problems
    assert back.study("decode")["ragged"].tolist() == agg.study("decode")["ragged"].tolist()
    assert set(back.results["causal"].dropna()) == {True, False}  # booleans, not the strings of the CSV
    pd.testing.assert_frame_equal(back.study("softmax"), agg.study("softmax"), check_dtype=False)


def test_problems_file_is_empty_without_problems(tmp_path):
    agg = load.collect([GOOD])
    paths = [tmp_path / n for n in ("r.csv", "p.csv", "c.csv", "e.json", "problems.txt")]
    load.write(agg, *paths)
    assert paths[-1].read_text() == ""


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_fresh_folder_wins_over_committed_one(tmp_path):
    committed = _copy(GOOD, tmp_path / "data" / "results" / "fixture-gpu")
    fresh = _copy(GOOD, tmp_path / "results" / "fixture-gpu")
    (fresh / "decode.csv").unlink()
    for order in ([committed, fresh], [fresh, committed]):
        agg = load.collect(order, fresh_slug="fixture-gpu")
        assert "decode" not in set(agg.results["study"])
        assert any(f"skipped folder {committed}: superseded by {fresh}" == p for p in agg.problems)


@pytest.mark.parametrize("breakage, expected", [
    (lambda d: (d / "ceilings.csv").unlink(), "ceilings.csv: missing"),
    (lambda d: (d / "env.json").write_text("{not json"), "env.json: not readable JSON"),
    (lambda d: (d / "ceilings.csv").write_text("name,value,unit\ncopy_tbps,4.2,TB/s\n"), "lacks measured ceilings"),
    (lambda d: (d / "ceilings.csv").write_text("name,value,unit\n" + "".join(
        f"{n},{'-1' if n == 'read_tbps' else '1'},x\n" for n in load.MEASURED_CEILINGS)), "not positive numbers"),
])
def test_bad_env_or_ceilings_skip_the_folder(tmp_path, breakage, expected):
    folder = _copy(GOOD, tmp_path / "fixture-gpu")
    breakage(folder)
    agg = load.collect([folder])
    assert agg.results.empty and not agg.envs
    assert agg.problems == [p for p in agg.problems if p.startswith(f"skipped folder {folder}")]
    assert expected in agg.problems[0]


@pytest.mark.parametrize("edit, expected", [
    (lambda f: f.assign(gpu="another-gpu"), "rows name GPU ['another-gpu']"),
    (lambda f: f.assign(rows="many"), "shape column 'rows'"),
    (lambda f: f.assign(cols=-3), "shape column 'cols'"),
    (lambda f: f.drop(columns=["p80_ms"]), "missing columns ['p80_ms']"),
    (lambda f: f.iloc[0:0], "no rows"),
])
def test_bad_study_file_is_skipped_by_name(tmp_path, edit, expected):
    folder = _copy(GOOD, tmp_path / "fixture-gpu")
    frame = pd.read_csv(folder / "softmax.csv")
    edit(frame).to_csv(folder / "softmax.csv", index=False)
    agg = load.collect([folder])
    assert "softmax" not in set(agg.results["study"]) and "decode" in set(agg.results["study"])
    assert len(agg.problems) == 1 and f"skipped file {folder / 'softmax.csv'}" in agg.problems[0]
    assert expected in agg.problems[0]


def test_unreadable_csv_is_skipped(tmp_path):
    folder = _copy(GOOD, tmp_path / "fixture-gpu")
    (folder / "attention.csv").write_bytes(b"\xff\xfe\x00garbage\x00\n\x00")
    agg = load.collect([folder])
    assert "attention" not in set(agg.results["study"])
    assert any("attention.csv" in p for p in agg.problems)


def test_verdicts_survive_the_round_trip(tmp_path):
    from rooflab.report.verdicts import judge_all
    agg = load.collect([GOOD], None, Path(__file__).resolve().parents[1] / "data" / "published")
    paths = [tmp_path / n for n in ("r.csv", "p.csv", "c.csv", "e.json", "problems.txt")]
    load.write(agg, *paths)
    back = load.read(*paths)
    before = [v.as_dict() for v in judge_all(agg.published, agg.results)]
    assert [v.as_dict() for v in judge_all(back.published, back.results)] == before
    assert any(v["ours_gpu"] == "fixture-gpu" for v in before)


def test_quality_records_and_job_records_are_not_result_files(tmp_path):
    folder = _copy(GOOD, tmp_path / "fixture-gpu")
    for name in ("reproduction.png", "reproduction.pdf"):
        (folder / name).write_bytes(b"\x89PNG not a csv")
    (folder / "softmax").mkdir()
    (folder / "softmax" / "job-0.env.json").write_text('{"host": "node-1"}\n')
    agg = load.collect([folder])
    assert agg.problems == []
    assert agg.records == {"fixture-gpu": ["qa.csv", "reproduction.csv"]}
    assert len(agg.qa) == len(pd.read_csv(GOOD / "qa.csv")) and set(agg.qa["gpu"]) == {"fixture-gpu"}
    assert len(agg.reproduction) == len(pd.read_csv(GOOD / "reproduction.csv"))
    assert set(agg.reproduction["gpu"]) == {"fixture-gpu"} and list(agg.reproduction.columns[:2]) == ["gpu", "study"]
    assert len(agg.results) == sum(len(pd.read_csv(GOOD / f"{s}.csv")) for s in ("softmax", "attention", "decode", "e2e"))


def test_header_only_qa_is_a_record_without_lines_and_a_bad_one_is_named(tmp_path):
    folder = _copy(GOOD, tmp_path / "fixture-gpu")
    (folder / "qa.csv").write_text(",".join(load.QA_COLUMNS) + "\n")
    (folder / "reproduction.csv").write_text("study,impl\nsoftmax,ours\n")
    agg = load.collect([folder])
    assert agg.has_record("fixture-gpu", "qa.csv") and agg.qa.empty
    assert not agg.has_record("fixture-gpu", "reproduction.csv") and agg.reproduction.empty
    (line,) = agg.problems
    assert line.startswith(f"skipped file {folder / 'reproduction.csv'}: missing columns")
    assert "softmax" in set(agg.results["study"])


def test_quality_records_round_trip(tmp_path):
    agg = load.collect([GOOD, PARTIAL])
    paths = [tmp_path / n for n in ("r.csv", "p.csv", "c.csv", "e.json", "problems.txt")]
    extra = dict(qa_csv=tmp_path / "qa.csv", reproduction_csv=tmp_path / "reproduction.csv",
                 records_json=tmp_path / "records.json")
    load.write(agg, *paths, **extra)
    back = load.read(*paths, **extra)
    assert back.records == {"fixture-gpu": ["qa.csv", "reproduction.csv"], "fixture-gpu-partial": []}
    pd.testing.assert_frame_equal(back.qa, agg.qa, check_dtype=False)
    assert back.reproduction["verdict"].tolist() == agg.reproduction["verdict"].tolist()
    assert back.reproduction["fresh_ms"].tolist() == pytest.approx(agg.reproduction["fresh_ms"].tolist(), nan_ok=True)
    empty = load.collect([PARTIAL])
    load.write(empty, *paths, **extra)
    assert (tmp_path / "qa.csv").read_text().startswith("gpu,study,gate")
    assert (tmp_path / "reproduction.csv").read_text().startswith("gpu,study,impl")
    assert load.read(*paths, **extra).qa.empty
