"""rooflab.precompile: torch.compile's graphs compiled in worker processes land in Inductor's on-disk
cache, where the sweep's own first call finds them (on the CPU here, as Inductor's CPU backend)."""
import io

from torch._dynamo.utils import counters

from rooflab import precompile
from rooflab.studies import softmax

SHAPES = [{"rows": 64, "cols": 300}, {"rows": 8, "cols": 1000}]


def test_graphs_compiled_ahead_are_cache_hits(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    log = io.StringIO()
    assert precompile.warm("softmax", SHAPES, ["float32"], ["ours", "torch_compile"], device="cpu", log=log) > 0
    assert "for 2 cases in 2 processes" in log.getvalue() and "failed" not in log.getvalue()
    counters.clear()
    for shape in SHAPES:
        softmax.compile_case(shape, "float32", "cpu")
    assert counters["inductor"]["fxgraph_cache_hit"] == 2
    assert counters["inductor"]["fxgraph_cache_miss"] == 0


def test_a_failing_case_is_reported_not_raised(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    log = io.StringIO()
    precompile.warm("softmax", SHAPES, ["float99"], ["torch_compile"], device="cpu", log=log)
    assert log.getvalue().count("failed: AttributeError") == 2


def test_nothing_to_compile():
    assert precompile.warm("softmax", SHAPES, ["float32"], ["ours", "torch"], device="cpu") == 0.0   # no torch_compile
    assert precompile.warm("softmax", SHAPES[:1], ["float32"], ["torch_compile"], device="cpu") == 0.0  # one case
    assert precompile.warm("decode", [{}] * 4, ["float16"], ["ours"], device="cpu") == 0.0   # no compiled peer


def test_every_shape_gets_its_own_graph(tmp_path, monkeypatch):
    """Past Dynamo's default limit of eight graphs a function the compiled peer would run eager torch."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    counters.clear()
    for rows in range(1, 11):
        softmax.compile_case({"rows": rows, "cols": 3}, "float32", "cpu")
    assert counters["stats"]["unique_graphs"] == 10   # 8 at Dynamo's default limit
