"""`publish` replaces the GPU's committed run with the fresh one, leaving nothing of the earlier run."""
from pathlib import Path

from rooflab.publish import plan, publish


def _write(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _fresh(root: Path, reproduction: bool) -> tuple[Path, list[str]]:
    fresh = root / "results" / "gpu"
    inputs = [_write(fresh / name, name) for name in ("env.json", "ceilings.csv", "softmax.csv", "qa.csv")]
    _write(fresh / "softmax" / "float16.env.json", "new")
    _write(fresh / "benchmarks" / "sweep_softmax_float16.tsv", "new")
    _write(fresh / "softmax" / "float16.csv")          # a per-job CSV: merged into softmax.csv, not published
    if reproduction:
        _write(fresh / "reproduction.csv", "new")
        _write(fresh / "reproduction.json", "new")
    return fresh, [str(p) for p in inputs]


def test_publish_copies_the_run_and_its_records(tmp_path):
    fresh, inputs = _fresh(tmp_path, reproduction=True)
    target = tmp_path / "data" / "results" / "gpu"
    publish(fresh, target, inputs, log=lambda line: None)
    published = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert published == ["benchmarks/sweep_softmax_float16.tsv", "ceilings.csv", "env.json", "qa.csv",
                         "reproduction.csv", "reproduction.json", "softmax.csv", "softmax/float16.env.json"]


def test_publish_removes_what_an_earlier_run_left(tmp_path):
    fresh, inputs = _fresh(tmp_path, reproduction=False)
    target = tmp_path / "data" / "results" / "gpu"
    old = {name: _write(target / name, "old") for name in (
        "softmax.csv", "reproduction.csv", "reproduction.json", "decode.csv", "decode/float16.env.json",
        "benchmarks/sweep_decode_float16.tsv")}
    lines = []
    publish(fresh, target, inputs, log=lines.append)
    assert (target / "softmax.csv").read_text() == "softmax.csv"
    for name in ("reproduction.csv", "reproduction.json", "decode.csv", "decode/float16.env.json",
                 "benchmarks/sweep_decode_float16.tsv"):
        assert not old[name].exists(), name
        assert any(line.startswith(f"removed {old[name]}") for line in lines)


def test_plan_on_a_first_publish_removes_nothing(tmp_path):
    fresh, inputs = _fresh(tmp_path, reproduction=False)
    copies, stale = plan(fresh, tmp_path / "none", inputs)
    assert stale == [] and len(copies) == 6
