"""The one result-row contract: column names, shape columns per study, and validation.

Every CSV under data/results/<gpu>/ and data/published/ goes through `validate_frame`
before it is aggregated, so a malformed file is reported by name instead of plotted.
"""
from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import jsonschema
import pandas as pd
import yaml

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "workflow" / "schemas" / "results.schema.yaml"

COMMON_COLUMNS = (
    "gpu", "study", "impl", "dtype", "timing", "median_ms", "ci_low_ms", "ci_high_ms", "p20_ms", "p80_ms",
    "reps", "trials", "bytes", "flops", "ceiling_name", "tbps", "tflops", "frac_ceiling", "frac_datasheet",
    "max_abs_err", "rel_err", "strategy", "status", "message",
)
# Columns a transcribed article's row (data/published/, marked by `source`) may leave out: the
# article printed no interval, trial count or byte count. read_results adds them empty.
PUBLISHED_OPTIONAL = ("ci_low_ms", "ci_high_ms", "trials", "bytes", "flops", "ceiling_name", "strategy")
# Timing methods (the `timing` column): plain calls timed with CUDA events around each call, L2
# flushed before it (`events`: what a Python caller pays); the device time of the same calls'
# kernels from CUPTI through torch.profiler, L2 flushed before each (`cupti`: the kernel alone);
# a whole captured sequence replayed as a CUDA graph (`cudagraph`: e2e decode steps).
TIMINGS = ("events", "cupti", "cudagraph")
SHAPE_COLUMNS = {
    "softmax": ("rows", "cols"),
    "attention": ("batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "head_dim", "causal"),
    "decode": ("batch", "heads_q", "heads_kv", "cache_len", "head_dim", "ragged"),
    "e2e": ("phase", "seqlen", "cache_len", "width", "heads", "part"),
}
STATUSES = ("ok", "oom", "incorrect", "unsupported", "error")


def columns(study: str) -> tuple[str, ...]:
    """All columns of a study's CSV, in file order: identity, shape, then measurements."""
    return COMMON_COLUMNS[:4] + SHAPE_COLUMNS[study] + COMMON_COLUMNS[4:]


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(yaml.safe_load(SCHEMA_PATH.read_text()))


def _clean(value):
    """pandas NaN / numpy scalars -> JSON-schema friendly Python values."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        value = value.item()
        if isinstance(value, float) and math.isnan(value):
            return None
    return value


class SchemaError(ValueError):
    """A results file that does not follow workflow/schemas/results.schema.yaml."""


def validate_frame(frame: pd.DataFrame, source: str = "<frame>") -> pd.DataFrame:
    """Check every row; raise SchemaError naming the file, row and field at fault."""
    if frame.empty:
        raise SchemaError(f"{source}: no rows")
    studies = set(frame["study"].dropna()) if "study" in frame else set()
    missing = [c for c in COMMON_COLUMNS if c not in frame.columns]
    for study in studies & SHAPE_COLUMNS.keys():
        missing += [c for c in SHAPE_COLUMNS[study] if c not in frame.columns]
    if missing:
        raise SchemaError(f"{source}: missing columns {sorted(set(missing))}")
    _check_interval(frame, source)
    validator = _validator()
    for index, record in enumerate(frame.to_dict(orient="records")):
        row = {k: _clean(v) for k, v in record.items()}
        if isinstance(row.get("reps"), float) and row["reps"].is_integer():
            row["reps"] = int(row["reps"])
        error = jsonschema.exceptions.best_match(validator.iter_errors(row))
        if error is not None:
            field = ".".join(str(p) for p in error.absolute_path) or "row"
            raise SchemaError(f"{source}: row {index + 2} field {field!r}: {error.message}")
    return frame


def _check_interval(frame: pd.DataFrame, source: str) -> None:
    """A row's interval holds its median: ci_low_ms <= median_ms <= ci_high_ms where all three exist."""
    lo, mid, hi = (pd.to_numeric(frame[c], errors="coerce") for c in ("ci_low_ms", "median_ms", "ci_high_ms"))
    bad = (lo.notna() & mid.notna() & (lo > mid)) | (hi.notna() & mid.notna() & (mid > hi))
    if bad.any():
        index = int(bad.to_numpy().nonzero()[0][0])
        raise SchemaError(f"{source}: row {index + 2} field 'ci_low_ms'/'ci_high_ms': the interval "
                          f"[{lo.iloc[index]}, {hi.iloc[index]}] does not hold median_ms {mid.iloc[index]}")


def read_results(path: str | Path) -> pd.DataFrame:
    """Read and validate one results CSV."""
    path = Path(path)
    try:
        frame = pd.read_csv(path, keep_default_na=True, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{path}: unreadable CSV ({exc})") from exc
    if "message" in frame:
        frame["message"] = frame["message"].astype(object).where(frame["message"].notna(), None)
    if "source" in frame:
        for column in PUBLISHED_OPTIONAL:
            if column not in frame:
                frame[column] = None
    return validate_frame(frame, str(path))
