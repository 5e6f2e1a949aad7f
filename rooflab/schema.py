"""The one result-row contract: column names, shape columns per study, and validation.

Every CSV under data/results/<gpu>/ and data/published/ goes through `validate_frame`
before it is aggregated, so a malformed file is reported by name instead of plotted.
"""
from __future__ import annotations

import math
import re
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
# a whole captured sequence replayed as a CUDA graph (`cudagraph`: e2e blocks); the host's own
# wall-clock time per call, the GPU kept busy (`host`: the wrapper's checks and launch, beside the
# `cupti` rows of small cases; no throughput is derived from it).
TIMINGS = ("events", "cupti", "cudagraph", "host")
HOST_TIMING = "host"
# Implementations that are bounds, not kernels of the task: a copy of the case's bytes timed in its own
# trials (rooflab.studies.softmax). Never a peer; the above_ceiling gate holds rows against them.
BOUND_IMPLS = ("copy",)
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
    """Check every row; raise SchemaError naming the file, row and field at fault.

    The rules of results.schema.yaml are applied column by column (time linear in the rows); the
    first row that breaks one is then described by jsonschema itself. Beyond what JSON schema
    can say: every number is finite, and a row's intervals hold its median (ci_low_ms <= median_ms
    <= ci_high_ms, p20_ms <= median_ms <= p80_ms). Row N is line N of the CSV (the header is line 1).
    """
    if frame.empty:
        raise SchemaError(f"{source}: no rows")
    studies = set(frame["study"].dropna()) if "study" in frame else set()
    missing = [c for c in COMMON_COLUMNS if c not in frame.columns]
    for study in studies & SHAPE_COLUMNS.keys():
        missing += [c for c in SHAPE_COLUMNS[study] if c not in frame.columns]
    if missing:
        raise SchemaError(f"{source}: missing columns {sorted(set(missing))}")
    failures = _column_failures(frame)
    if failures:
        position, field, why = min(failures, key=lambda f: f[0])
        row = {k: _clean(v) for k, v in frame.iloc[position].to_dict().items()}
        for key in ("reps", "trials"):
            if isinstance(row.get(key), float) and row[key].is_integer():
                row[key] = int(row[key])
        error = None if why.startswith("!") else jsonschema.exceptions.best_match(_validator().iter_errors(row))
        if error is not None:
            field = ".".join(str(p) for p in error.absolute_path) or "row"
            why = error.message
        raise SchemaError(f"{source}: row {position + 2} field {field!r}: {why.lstrip('!')}")
    _check_interval(frame, source)
    return frame


def _positions(mask) -> int | None:
    """The first row (0-based position) where a boolean mask is set, or None."""
    hits = mask.to_numpy(dtype=bool).nonzero()[0]
    return int(hits[0]) if len(hits) else None


def _is_type(values: pd.Series, kind: str) -> pd.Series:
    """Which cells hold a JSON value of `kind` (null cells excluded: checked apart)."""
    if kind == "string":
        if pd.api.types.is_string_dtype(values) or values.dtype == object:
            return values.map(lambda v: isinstance(v, str))
        return pd.Series(False, index=values.index)
    if kind in ("number", "integer"):
        if pd.api.types.is_bool_dtype(values):
            return pd.Series(False, index=values.index)
        if pd.api.types.is_numeric_dtype(values):
            numbers = values.astype(float)
        else:
            numeric = values.map(lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
            numbers = pd.to_numeric(values.where(numeric), errors="coerce").astype(float)
            if kind == "number":
                return numeric
            return numeric & ((numbers == numbers.round()) | ~numbers.map(math.isfinite))
        return pd.Series(True, index=values.index) if kind == "number" else \
            (numbers == numbers.round()) | ~numbers.map(math.isfinite)
    if kind == "boolean":
        return values.map(lambda v: isinstance(v, bool))
    return pd.Series(False, index=values.index)


def _column_failures(frame: pd.DataFrame) -> list[tuple[int, str, str]]:
    """(first row position, field, reason) for each rule of the row schema some row breaks, checked a
    column at a time. A reason starting with '!' is not one jsonschema reports (non-finite numbers)."""
    schema = _SCHEMA
    failures = []
    for name, rule in schema["properties"].items():
        if name not in frame.columns:
            continue
        values = frame[name]
        kinds = rule.get("type", [])
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        null = values.isna()
        if "null" not in kinds and null.any():
            failures.append((_positions(null), name, "None is not of the required type"))
        present = ~null
        typed = pd.Series(False, index=values.index)
        for kind in (k for k in kinds if k != "null"):
            typed |= _is_type(values, kind)
        if kinds and (bad := present & ~typed).any():
            failures.append((_positions(bad), name, f"not of type {kinds}"))
        good = present & typed
        if "enum" in rule and (bad := good & ~values.isin(rule["enum"])).any():
            failures.append((_positions(bad), name, f"not one of {rule['enum']}"))
        if "pattern" in rule and (bad := good & ~values.astype(str).map(re.compile(rule["pattern"]).search).notna()).any():
            failures.append((_positions(bad), name, f"does not match {rule['pattern']!r}"))
        if any(k in ("number", "integer") for k in kinds):
            numbers = pd.to_numeric(values.where(good), errors="coerce").astype(float)
            if (bad := good & numbers.isin([math.inf, -math.inf])).any():
                failures.append((_positions(bad), name, f"!{numbers[bad].iloc[0]} is not a finite number"))
            if "minimum" in rule and (bad := good & (numbers < rule["minimum"])).any():
                failures.append((_positions(bad), name, f"below {rule['minimum']}"))
            if "exclusiveMinimum" in rule and (bad := good & (numbers <= rule["exclusiveMinimum"])).any():
                failures.append((_positions(bad), name, f"not above {rule['exclusiveMinimum']}"))
    # allOf: a measured ok row (no `source`) has a time.
    if "status" in frame and "median_ms" in frame:
        published = frame["source"].map(lambda v: isinstance(v, str)) if "source" in frame else False
        timed = pd.to_numeric(frame["median_ms"], errors="coerce").notna()
        if (bad := (frame["status"] == "ok") & ~published & ~timed).any():
            failures.append((_positions(bad), "median_ms", "an ok row needs a time"))
    return failures


_SCHEMA = yaml.safe_load(SCHEMA_PATH.read_text())


def _check_interval(frame: pd.DataFrame, source: str) -> None:
    """A row's intervals hold its median: ci_low_ms <= median_ms <= ci_high_ms and p20_ms <= median_ms <=
    p80_ms, where the numbers exist."""
    mid = pd.to_numeric(frame["median_ms"], errors="coerce")
    for low, high, what in (("ci_low_ms", "ci_high_ms", "interval"), ("p20_ms", "p80_ms", "20th to 80th percentile")):
        lo, hi = (pd.to_numeric(frame[c], errors="coerce") for c in (low, high))
        bad = (lo.notna() & mid.notna() & (lo > mid)) | (hi.notna() & mid.notna() & (mid > hi)) | \
              (lo.notna() & hi.notna() & (lo > hi))
        if bad.any():
            index = _positions(bad)
            raise SchemaError(f"{source}: row {index + 2} field {low!r}/{high!r}: the {what} "
                              f"[{lo.iloc[index]}, {hi.iloc[index]}] does not hold median_ms {mid.iloc[index]}")


NUMERIC_COLUMNS = tuple(name for name, rule in _SCHEMA["properties"].items()
                        if {"number", "integer"} & set([rule.get("type")] if isinstance(rule.get("type"), str)
                                                       else rule.get("type", [])))


def read_results(path: str | Path) -> pd.DataFrame:
    """Read and validate one results CSV."""
    path = Path(path)
    try:
        frame = pd.read_csv(path, keep_default_na=True, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise SchemaError(f"{path}: unreadable CSV ({exc})") from exc
    for column in NUMERIC_COLUMNS:
        if column in frame and not pd.api.types.is_numeric_dtype(frame[column]):
            numbers = pd.to_numeric(frame[column], errors="coerce")
            bad = frame[column].notna() & numbers.isna()
            if bad.any():
                index = _positions(bad)
                raise SchemaError(f"{path}: row {index + 2} field {column!r}: {frame[column].iloc[index]!r} "
                                  f"is not a number")
            frame[column] = numbers
    if "message" in frame:
        frame["message"] = frame["message"].astype(object).where(frame["message"].notna(), None)
    if "source" in frame:
        for column in PUBLISHED_OPTIONAL:
            if column not in frame:
                frame[column] = None
    return validate_frame(frame, str(path))
