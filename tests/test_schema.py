"""The result-row schema: what read_results accepts and what it rejects, by name."""
import pandas as pd
import pytest

from rooflab.schema import SchemaError, columns, read_results, validate_frame


def _row(**overrides):
    row = dict.fromkeys(columns("softmax"))
    row.update(gpu="nvidia-h200", study="softmax", impl="ours", dtype="float16", timing="events",
               rows=8192, cols=4096, median_ms=0.04, p20_ms=0.039, p80_ms=0.041, reps=100,
               tbps=3.3, frac_ceiling=0.8, frac_datasheet=0.7, max_abs_err=1e-4, rel_err=1e-3, status="ok")
    row.update(overrides)
    return row


def test_columns_put_shape_between_identity_and_measurements():
    cols = columns("decode")
    assert cols[:4] == ("gpu", "study", "impl", "dtype")
    assert cols[4:10] == ("batch", "heads_q", "heads_kv", "cache_len", "head_dim", "ragged")
    assert cols[-1] == "message"


def test_valid_rows_round_trip(tmp_path):
    path = tmp_path / "softmax.csv"
    pd.DataFrame([_row(), _row(impl="torch", status="oom", median_ms=None, p20_ms=None, p80_ms=None,
                               reps=None, tbps=None, frac_ceiling=None, frac_datasheet=None,
                               message="CUDA out of memory")]).to_csv(path, index=False)
    frame = read_results(path)
    assert list(frame["status"]) == ["ok", "oom"]


@pytest.mark.parametrize("overrides, field", [
    ({"status": "fast"}, "status"),
    ({"gpu": "NVIDIA H200"}, "gpu"),
    ({"dtype": "float64"}, "dtype"),
    ({"median_ms": -1.0}, "median_ms"),
    ({"median_ms": None}, "median_ms"),   # an ok row must carry a time
    ({"study": "fft"}, "study"),
    ({"timing": "wallclock"}, "timing"),
])
def test_bad_rows_fail_naming_file_row_and_field(overrides, field):
    frame = pd.DataFrame([_row(), _row(**overrides)])
    with pytest.raises(SchemaError) as info:
        validate_frame(frame, "x.csv")
    assert "x.csv: row 3" in str(info.value) and field in str(info.value)


def test_missing_shape_column_is_named():
    frame = pd.DataFrame([_row()]).drop(columns=["cols"])
    with pytest.raises(SchemaError, match="cols"):
        validate_frame(frame, "x.csv")


def test_unreadable_file_is_a_schema_error(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"")
    with pytest.raises(SchemaError, match="bad.csv"):
        read_results(path)
