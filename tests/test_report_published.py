"""The seeds' published tables: schema-valid, every table row present, nothing added."""
from pathlib import Path

import pytest

from rooflab.report import load
from rooflab.schema import read_results

PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "published"


@pytest.fixture(scope="module")
def published():
    frame, problems = load.read_published(PUBLISHED)
    assert problems == []
    return frame


@pytest.mark.parametrize("path", sorted(PUBLISHED.glob("*.csv")), ids=lambda p: p.name)
def test_each_file_passes_the_schema(path):
    frame = read_results(path)
    assert frame["source"].notna().all() and frame["section"].notna().all()


def _count(frame, source, impl):
    return int(((frame["source"] == source) & (frame["impl"] == impl)).sum())


def test_seed_000_rtx_3050_softmax(published):
    src = "000_2ee922c98ce738df.txt"
    part = published[published["source"] == src]
    assert len(part) == 12 and set(part["gpu"]) == {"nvidia-rtx-3050"} and set(part["dtype"]) == {"float32"}
    assert _count(published, src, "seed_multipass") == 5     # naive Triton, seq 256..4096
    assert _count(published, src, "seed_rowwise") == 5       # fused Triton
    assert _count(published, src, "torch") == 2              # PyTorch: only seq 1024 and 2048 published
    assert (part["rows"] == part["cols"]).all()
    fused = part[part["impl"] == "seed_rowwise"].set_index("rows")
    assert fused.loc[2048, "median_ms"] == 0.1851 and fused.loc[2048, "tbps"] == 0.181
    assert fused.loc[4096, "frac_datasheet"] == 0.95


def test_seed_001_h100_softmax(published):
    src = "001_859921a564fedd80.txt"
    part = published[published["source"] == src].set_index(["impl", "rows"])
    assert len(part) == 4
    assert part.loc[("seed_rowwise", 8192), "median_ms"] == 0.048 and part.loc[("seed_rowwise", 8192), "tbps"] == 2.8
    derived = part.loc["torch"]
    assert len(derived) == 2 and derived["message"].str.startswith("derived").all()
    assert derived.loc[8192, "median_ms"] == pytest.approx(0.048 * 2.78)


def test_seed_003_h100_attention(published):
    src = "003_9928cd312cd54c53.txt"
    part = published[published["source"] == src]
    assert len(part) == 15
    for impl in ("eager", "seed_attention", "sdpa_flash"):
        assert _count(published, src, impl) == 5
    assert sorted(part.loc[part["status"] == "oom", "seqlen_q"]) == [16384, 32768]
    assert set(part.loc[part["status"] == "oom", "impl"]) == {"eager"}
    assert part["median_ms"].isna().all()                      # the article prints only TFLOP/s
    top = part[(part["impl"] == "sdpa_flash") & (part["seqlen_q"] == 32768)]
    assert top["tflops"].item() == 842


def test_published_ok_rows_carry_a_number(published):
    ok = published[published["status"] == "ok"]
    assert ok[["median_ms", "tbps", "tflops"]].notna().any(axis=1).all()
    assert len(published) == 31
