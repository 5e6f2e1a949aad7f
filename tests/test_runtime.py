"""rooflab.runtime: a job's wall clock split into the phases its environment record times."""
import json

from rooflab.runtime import breakdown, cache_note, markdown


def _bench(path, seconds):
    path.write_text("s\th:m:s\tmax_rss\n" f"{seconds}\t0:00:00\t100\n")


def test_sweep_job_splits_into_phases(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "softmax").mkdir()
    _bench(tmp_path / "benchmarks" / "sweep_softmax_float16.tsv", 100.0)
    _bench(tmp_path / "benchmarks" / "calibrate.tsv", 12.5)
    env = {"process_age_s": 8.0, "warm_up": {"seconds": 1.5},
           "cases": [{"seconds": {"inputs_reference": 1.0, "first_calls": {"ours": 2.0, "torch": 0.5},
                                  "warm_up": 0.25, "timing": 10.0}},
                     {"seconds": {"inputs_reference": 2.0, "first_calls": {"ours": 20.0},
                                  "warm_up": 0.75, "timing": 30.0}}]}
    (tmp_path / "softmax" / "float16.env.json").write_text(json.dumps(env))
    rows = {r["job"]: r for r in breakdown(tmp_path)}
    sweep = rows["sweep_softmax_float16"]
    assert sweep["wall_s"] == 100.0
    assert (sweep["start_up"], sweep["gpu_warm_up"], sweep["inputs_reference"]) == (8.0, 1.5, 3.0)
    assert (sweep["first_calls"], sweep["warm_up"], sweep["timing"]) == (22.5, 1.0, 40.0)
    assert sweep["other"] == 100.0 - (8.0 + 1.5 + 3.0 + 22.5 + 1.0 + 40.0)
    assert rows["calibrate"] == {"job": "calibrate", "wall_s": 12.5}
    table = markdown(list(rows.values()))
    assert "| **all jobs** | **112 s** |" in table
    assert "| sweep_softmax_float16 | 100 s | 8 s | 2 s | 3 s | 22 s | 1 s | 40 s | 24 s |" in table


def test_no_benchmarks_no_rows(tmp_path):
    assert breakdown(tmp_path) == []


def test_compiling_ahead_counts_as_first_calls_not_start_up(tmp_path):
    """rooflab.precompile runs before the job's record: its seconds leave start-up for first calls."""
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "softmax").mkdir()
    _bench(tmp_path / "benchmarks" / "sweep_softmax_float32.tsv", 60.0)
    env = {"process_age_s": 20.0, "precompile_s": 14.0, "warm_up": {"seconds": 1.0},
           "cases": [{"seconds": {"inputs_reference": 1.0, "first_calls": {"torch_compile": 0.5}, "warm_up": 0.5,
                                  "timing": 10.0}}]}
    (tmp_path / "softmax" / "float32.env.json").write_text(json.dumps(env))
    (sweep,) = breakdown(tmp_path)
    assert (sweep["start_up"], sweep["first_calls"]) == (6.0, 14.5)
    assert sweep["other"] == 60.0 - (6.0 + 1.0 + 1.0 + 14.5 + 0.5 + 10.0)


def test_cache_note_only_for_warm_caches(tmp_path):
    """A run whose env_before record holds files in a compile cache says so; empty or unrecorded caches say nothing."""
    assert cache_note(tmp_path) is None
    record = {"compile_caches": {"triton": {"dir": "/c/t", "files": 0}, "inductor": {"dir": "/c/i", "files": 0}}}
    (tmp_path / "env_before.json").write_text(json.dumps(record))
    assert cache_note(tmp_path) is None
    record["compile_caches"]["triton"]["files"] = 812
    (tmp_path / "env_before.json").write_text(json.dumps(record))
    note = cache_note(tmp_path)
    assert "812 files in Triton's and 0 files in Inductor's compile cache" in note


def test_compile_caches_counts_files(tmp_path, monkeypatch):
    from rooflab.gpus import compile_caches
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    for rel in ("triton/abc/k.cubin", "triton/abc/k.json", "inductor/fxgraph/x/y"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("-")
    caches = compile_caches()
    assert caches["triton"] == {"dir": str(tmp_path / "triton"), "files": 2}
    assert caches["inductor"] == {"dir": str(tmp_path / "inductor"), "files": 1}


def test_cache_note_of_a_published_run(tmp_path):
    """A published run has no env_before.json; its env.json carries the caches the run started on."""
    record = {"gpu": "X", "compile_caches": {"triton": {"dir": "/c/t", "files": 2691}, "inductor": {"dir": "/c/i", "files": 147}}}
    (tmp_path / "env.json").write_text(json.dumps(record))
    assert "2691 files in Triton's and 147 files in Inductor's" in cache_note(tmp_path)
    record["compile_caches"]["triton"]["files"] = 0
    record["compile_caches"]["inductor"]["files"] = 0
    (tmp_path / "env.json").write_text(json.dumps(record))
    assert cache_note(tmp_path) is None
