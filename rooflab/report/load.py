"""Read every GPU's result folder and the published tables into one aggregate.

A folder `<gpu-slug>/` holds env.json, ceilings.csv and one <study>.csv per study measured,
and may hold the run's quality record: qa.csv (the quality gates' flags, rooflab/qa.py) and
reproduction.csv (this run against the committed one, rooflab/reproduce.py, with its .png and
.pdf), and `<study>/` folders of per-job environment records (*.env.json). Those are not result
files: the quality records are carried into the aggregate as they are, the rest is left alone.
Whatever is bad is skipped and named in `problems`, never plotted and never fatal:
the whole folder when its name is not a GPU slug, when no study file of it is usable, when its CSVs together exceed MAX_FOLDER_CSV_BYTES,
or when env.json (workflow/schemas/env.schema.yaml) or ceilings.csv is missing or malformed; one
study file when only that file fails rooflab.schema (or its shape columns, names another GPU, has
a column the study does not define, or holds two rows of one case); one quality record when it
lacks its columns.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd

import jsonschema
import yaml

from rooflab.schema import COMMON_COLUMNS, SHAPE_COLUMNS, SchemaError, columns, read_results

STUDIES = tuple(SHAPE_COLUMNS)
MEASURED_CEILINGS = ("copy_tbps", "read_tbps", "write_tbps", "matmul_fp16_tflops", "matmul_bf16_tflops",
                     "launch_us", "launch_graph_us")
PUBLISHED_COLUMNS = ("source", "section", "claim")
BOOL_COLUMNS = ("causal", "ragged")
TEXT_COLUMNS = ("phase", "part")
NULLABLE_SHAPES = {"e2e"}          # an end-to-end row fills only the shape columns of its phase
CEILING_COLUMNS = ("gpu", "name", "value", "unit")
# The quality records a GPU folder may hold beside its results (file name -> columns it must have).
QA_COLUMNS = ("gpu", "study", "gate", "dtype", "impl", "shape", "value", "limit", "detail", "remeasured", "open")
REPRODUCTION_COLUMNS = ("study", "impl", "dtype", "timing", "shape", "committed_ms", "fresh_ms", "ratio",
                        "committed_low", "committed_high", "fresh_low", "fresh_high", "verdict")
RECORDS = {"qa.csv": QA_COLUMNS, "reproduction.csv": REPRODUCTION_COLUMNS}
# A GPU folder's name: lower-case letters and digits in words joined by single dashes (rooflab.gpus.slug).
SLUG = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
# A folder whose CSVs together are larger than this is listed as a problem, not read.
MAX_FOLDER_CSV_BYTES = 50_000_000
ENV_SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "env.schema.yaml"
# What makes two rows of a study one case: no file may hold two rows with the same values of these.
KEY_COLUMNS = ("gpu", "study", "impl", "dtype", "timing")


def _ordered_union(groups) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for group in groups:
        seen.update(dict.fromkeys(group))
    return tuple(seen)


SHAPE_UNION = _ordered_union(SHAPE_COLUMNS.values())
RESULT_COLUMNS = COMMON_COLUMNS[:4] + SHAPE_UNION + COMMON_COLUMNS[4:]


class LoadError(ValueError):
    """A file that cannot be used, with the reason."""


# ---------------------------------------------------------------- one file at a time

def _as_bool(value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def typed_shapes(frame: pd.DataFrame, study: str, source: str = "<frame>") -> pd.DataFrame:
    """Shape columns as their types (nullable ints, bools, text); LoadError naming the bad column."""
    frame = frame.copy()
    for name in SHAPE_COLUMNS[study]:
        values = frame[name]
        missing = values.isna()
        if missing.any() and study not in NULLABLE_SHAPES:
            raise LoadError(f"{source}: shape column {name!r} is empty in row {int(missing.idxmax()) + 2}")
        try:
            if name in BOOL_COLUMNS:
                frame[name] = values.map(lambda v: None if pd.isna(v) else _as_bool(v)).astype(object)
            elif name in TEXT_COLUMNS:
                frame[name] = values.map(lambda v: None if pd.isna(v) else str(v)).astype(object)
            else:
                numbers = pd.to_numeric(values, errors="raise")
                ok = numbers.isna() | ((numbers >= 0) & (numbers == numbers.round()))
                if not ok.all():
                    raise ValueError(f"{values[~ok].iloc[0]!r} is not a non-negative integer")
                frame[name] = numbers.astype("Int64")
        except (ValueError, TypeError) as exc:
            raise LoadError(f"{source}: shape column {name!r}: {exc}") from exc
    return frame


def read_study_csv(path: Path, slug: str, study: str) -> pd.DataFrame:
    """One <study>.csv of one GPU folder, validated; LoadError says what is wrong."""
    try:
        frame = read_results(path)
    except SchemaError as exc:
        raise LoadError(str(exc)) from exc
    except OSError as exc:
        raise LoadError(f"{path}: unreadable ({exc})") from exc
    wrong_study = set(frame["study"]) - {study}
    if wrong_study:
        raise LoadError(f"{path}: rows of study {sorted(wrong_study)} in {study}.csv")
    wrong_gpu = set(frame["gpu"]) - {slug}
    if wrong_gpu:
        raise LoadError(f"{path}: rows name GPU {sorted(wrong_gpu)}, folder is {slug!r}")
    unknown = [c for c in frame.columns if c not in columns(study)]
    if unknown:
        raise LoadError(f"{path}: unknown columns {unknown} (a {study} row has {', '.join(columns(study))})")
    frame = typed_shapes(frame, study, str(path))[list(columns(study))]
    _check_unique(frame, study, str(path))
    return frame


def _check_unique(frame: pd.DataFrame, study: str, source: str) -> None:
    """LoadError naming the first key (gpu, study, impl, dtype, timing, shape) two rows share, with both rows."""
    keys = list(KEY_COLUMNS + SHAPE_COLUMNS[study])
    twice = frame.duplicated(keys, keep=False)
    if not twice.any():
        return
    first = twice.to_numpy().nonzero()[0][0]
    key = frame.iloc[first][keys]
    same = (frame[keys].astype(str) == key.astype(str).to_numpy()).all(axis=1).to_numpy().nonzero()[0]
    text = " ".join(f"{k}={v}" for k, v in key.items() if not pd.isna(v))
    raise LoadError(f"{source}: duplicate key {text} in rows {', '.join(str(i + 2) for i in same)}")


@lru_cache(maxsize=1)
def _env_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(yaml.safe_load(ENV_SCHEMA_PATH.read_text()))


def read_env(path: Path) -> dict:
    if not path.is_file():
        raise LoadError(f"{path}: missing")
    try:
        env = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LoadError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(env, dict):
        raise LoadError(f"{path}: not a JSON object")
    error = jsonschema.exceptions.best_match(_env_validator().iter_errors(env))
    if error is not None:
        field = ".".join(str(p) for p in error.absolute_path) or "env"
        raise LoadError(f"{path}: field {field!r}: {error.message} (workflow/schemas/env.schema.yaml)")
    bad = [k for k, v in _numbers(env) if not math.isfinite(v)]
    if bad:
        raise LoadError(f"{path}: field {bad[0]!r} is not a finite number")
    return env


def _numbers(value, prefix: str = ""):
    """(dotted key, number) for every float in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{prefix}{key}.")
    elif isinstance(value, list):
        for k, item in enumerate(value):
            yield from _numbers(item, f"{prefix}{k}.")
    elif isinstance(value, float):
        yield prefix.rstrip("."), value


def read_ceilings(path: Path) -> pd.DataFrame:
    """ceilings.csv -> frame (name, value, unit); every measured ceiling present, finite and positive."""
    if not path.is_file():
        raise LoadError(f"{path}: missing")
    try:
        frame = pd.read_csv(path)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise LoadError(f"{path}: unreadable CSV ({exc})") from exc
    missing = [c for c in ("name", "value", "unit") if c not in frame.columns]
    if missing:
        raise LoadError(f"{path}: missing columns {missing}")
    frame = frame[["name", "value", "unit"]]
    if frame["name"].duplicated().any():
        raise LoadError(f"{path}: ceiling {frame['name'][frame['name'].duplicated()].iloc[0]!r} listed twice")
    values = pd.to_numeric(frame["value"], errors="coerce")
    named = dict(zip(frame["name"], values))
    absent = [n for n in MEASURED_CEILINGS if n not in named]
    if absent:
        raise LoadError(f"{path}: lacks measured ceilings {absent}")
    bad = [n for n in MEASURED_CEILINGS if not (math.isfinite(named[n]) and named[n] > 0)]
    if bad:
        raise LoadError(f"{path}: measured ceilings {bad} are not positive numbers")
    return frame.assign(value=values)


def _reason(exc: Exception, prefix: Path) -> str:
    """The error text without the leading path it repeats."""
    text = str(exc)
    for start in (f"{prefix}: ", f"{prefix}/"):
        if text.startswith(start):
            return text[len(start):]
    return text


def read_record(path: Path, slug: str) -> pd.DataFrame:
    """qa.csv or reproduction.csv of one GPU folder with a `gpu` column; LoadError when it lacks its columns
    (a header-only file is a valid record with no lines)."""
    try:
        frame = pd.read_csv(path, keep_default_na=True, na_values=[""], dtype={"shape": object})
    except pd.errors.EmptyDataError as exc:
        raise LoadError(f"{path}: empty file, not even a header ({exc})") from exc
    except (OSError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise LoadError(f"{path}: unreadable CSV ({exc})") from exc
    missing = [c for c in RECORDS[path.name] if c not in frame.columns and c != "gpu"]
    if missing:
        raise LoadError(f"{path}: missing columns {missing}")
    if "gpu" in frame and len(frame) and set(frame["gpu"].dropna()) - {slug}:
        raise LoadError(f"{path}: lines name GPU {sorted(set(frame['gpu'].dropna()) - {slug})}, folder is {slug!r}")
    return frame.assign(gpu=slug)


@dataclass
class Folder:
    slug: str
    path: Path
    env: dict
    ceilings: pd.DataFrame
    studies: dict[str, pd.DataFrame]
    records: dict[str, pd.DataFrame] = field(default_factory=dict)   # qa.csv / reproduction.csv -> its lines


def read_folder(path: str | Path) -> tuple[Folder | None, list[str]]:
    """(folder or None, problems): None when env.json or ceilings.csv is unusable."""
    path = Path(path)
    slug = path.name
    if not SLUG.fullmatch(slug):
        return None, [f"skipped folder {path}: {slug!r} is not a GPU slug (lower-case letters and digits, "
                      f"words joined by single dashes)"]
    size = sum(p.stat().st_size for p in path.rglob("*.csv") if p.is_file() and not p.is_symlink())
    if size > MAX_FOLDER_CSV_BYTES:
        return None, [f"skipped folder {path}: its CSVs hold {size:,} bytes, over the {MAX_FOLDER_CSV_BYTES:,}-byte "
                      f"limit of a results folder (not read)"]
    try:
        env = read_env(path / "env.json")
        ceilings = read_ceilings(path / "ceilings.csv")
    except LoadError as exc:
        return None, [f"skipped folder {path}: {_reason(exc, path)}"]
    studies, problems = {}, []
    sidecar = path / "reproduction.json"     # which two runs reproduction.csv compares (rooflab.reproduce.provenance)
    if sidecar.is_file():
        try:
            env = dict(env, reproduction=json.loads(sidecar.read_text()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            problems.append(f"skipped file {sidecar}: not readable JSON ({exc})")
    for study in STUDIES:
        csv = path / f"{study}.csv"
        if not csv.exists():
            continue
        try:
            studies[study] = read_study_csv(csv, slug, study)
        except LoadError as exc:
            problems.append(f"skipped file {csv}: {_reason(exc, csv)}")
    records = {}
    for name in RECORDS:
        if (path / name).is_file():
            try:
                records[name] = read_record(path / name, slug)
            except LoadError as exc:
                problems.append(f"skipped file {path / name}: {_reason(exc, path / name)}")
    return Folder(slug, path, env, ceilings, studies, records), problems


def read_published(paths) -> tuple[pd.DataFrame, list[str]]:
    """data/published/*.csv (a directory, or a list of files) validated like result files;
    each row must name its source and section."""
    if isinstance(paths, (str, Path)):
        paths = sorted(Path(paths).glob("*.csv"))
    frames, problems = [], []
    for csv in map(Path, paths):
        try:
            frame = read_results(csv)
            lacking = [c for c in ("source", "section") if c not in frame or frame[c].isna().any()]
            if lacking:
                raise LoadError(f"{csv}: every published row needs {lacking}")
            ok = frame["status"] == "ok"
            numbers = frame[["median_ms", "tbps", "tflops"]].notna().any(axis=1)
            if (ok & ~numbers).any():
                raise LoadError(f"{csv}: row {int((ok & ~numbers).idxmax()) + 2} is ok but carries no number")
            parts = [typed_shapes(part, study, str(csv)) for study, part in frame.groupby("study", sort=False)]
            frames.append(pd.concat(parts))
        except (SchemaError, LoadError) as exc:
            problems.append(f"skipped file {csv}: {_reason(exc, csv)}")
    return _concat(frames, RESULT_COLUMNS + PUBLISHED_COLUMNS), problems


# ---------------------------------------------------------------- the aggregate

def _concat(frames: list[pd.DataFrame], cols: tuple[str, ...]) -> pd.DataFrame:
    frames = [f.dropna(axis=1, how="all") for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(cols))
    return pd.concat(frames, ignore_index=True).reindex(columns=list(cols))


@dataclass
class Aggregate:
    """Everything the figures and the paper read."""
    results: pd.DataFrame                        # every valid measured row of every GPU (RESULT_COLUMNS)
    published: pd.DataFrame                      # the seeds' rows (RESULT_COLUMNS + PUBLISHED_COLUMNS)
    ceilings: pd.DataFrame                       # gpu, name, value, unit
    envs: dict[str, dict]                        # slug -> env.json
    problems: list[str] = field(default_factory=list)
    qa: pd.DataFrame | None = None               # every GPU's qa.csv lines (QA_COLUMNS), gpu filled in
    reproduction: pd.DataFrame | None = None     # every GPU's reproduction.csv lines, with a gpu column
    records: dict[str, list[str]] = field(default_factory=dict)   # slug -> the quality records its folder has

    def __post_init__(self):
        if self.qa is None:
            self.qa = pd.DataFrame(columns=list(QA_COLUMNS))
        if self.reproduction is None:
            self.reproduction = pd.DataFrame(columns=["gpu", *REPRODUCTION_COLUMNS])

    def has_record(self, gpu: str | None, name: str) -> bool:
        """Whether GPU `gpu`'s folder holds the quality record `name` (qa.csv, reproduction.csv)."""
        return gpu is not None and name in self.records.get(gpu, [])

    def study(self, name: str, published: bool = False) -> pd.DataFrame:
        """One study's rows with only its own columns, shape columns typed."""
        frame = self.published if published else self.results
        extra = PUBLISHED_COLUMNS if published else ()
        part = frame[frame["study"] == name]
        cols = list(columns(name) + extra)
        if part.empty:
            return pd.DataFrame(columns=cols)
        part = typed_shapes(part[cols].reset_index(drop=True), name, f"aggregate {name}")
        for col in ("message",) + extra:
            part[col] = part[col].astype(object).where(part[col].notna(), None)
        return part

    def ceiling(self, gpu: str) -> dict[str, float]:
        part = self.ceilings[self.ceilings["gpu"] == gpu]
        return {str(n): float(v) for n, v in zip(part["name"], part["value"]) if pd.notna(v)}

    @property
    def gpus(self) -> list[str]:
        return sorted(self.envs)

    def lead_first(self, lead: str | None) -> list[str]:
        """Every GPU read, `lead` (the paper's GPU) first; none when there is no lead."""
        return [lead] + [g for g in self.gpus if g != lead] if lead else []


def _is_fresh(path: Path, fresh_slug: str | None) -> bool:
    """This run's own folder (results/<slug>), as opposed to a committed data/results/<slug>."""
    return path.name == fresh_slug and "data" not in path.parts[:-1]


def collect(result_dirs, fresh_slug: str | None = None, published=None) -> Aggregate:
    """Read every folder and the published tables. Two folders of one slug: the fresh one wins, else the later."""
    chosen: dict[str, Path] = {}
    problems: list[str] = []
    for d in map(Path, result_dirs):
        old = chosen.get(d.name)
        if old is not None:
            keep, drop = (old, d) if _is_fresh(old, fresh_slug) and not _is_fresh(d, fresh_slug) else (d, old)
            problems.append(f"skipped folder {drop}: superseded by {keep}")
            d = keep
        chosen[d.name] = d
    results, ceilings, envs = [], [], {}
    found_records: dict[str, list[pd.DataFrame]] = {name: [] for name in RECORDS}
    records: dict[str, list[str]] = {}
    for slug in sorted(chosen):
        path = chosen[slug]
        if not path.is_dir():
            problems.append(f"skipped folder {path}: not a directory")
            continue
        folder, found = read_folder(path)
        problems += found
        if folder is None:
            continue
        if not folder.studies:   # not a GPU of the paper: nothing of it can be shown
            problems.append(f"skipped folder {path}: no study file with usable rows"
                            f"{' (the files above say why)' if found else ''}")
            continue
        envs[slug] = folder.env
        ceilings.append(folder.ceilings.assign(gpu=slug))
        results += list(folder.studies.values())
        records[slug] = sorted(folder.records)
        for name, frame in folder.records.items():
            found_records[name].append(frame)
    published, found = read_published(published) if published is not None else \
        (_concat([], RESULT_COLUMNS + PUBLISHED_COLUMNS), [])
    return Aggregate(
        results=_concat(results, RESULT_COLUMNS),
        published=published,
        ceilings=_concat(ceilings, CEILING_COLUMNS),
        envs=envs,
        problems=problems + found,
        qa=_records(found_records["qa.csv"], QA_COLUMNS),
        reproduction=_records(found_records["reproduction.csv"], ("gpu", *REPRODUCTION_COLUMNS)),
        records=records,
    )


def _records(frames: list[pd.DataFrame], first: tuple[str, ...]) -> pd.DataFrame:
    """Quality records of several folders in one frame: the named columns first, then any others."""
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=list(first))
    frame = pd.concat(frames, ignore_index=True)
    return frame[list(first) + [c for c in frame.columns if c not in first]]


def write(agg: Aggregate, results_csv, published_csv, ceilings_csv, envs_json, problems_txt,
          qa_csv=None, reproduction_csv=None, records_json=None) -> None:
    """The aggregate as files; the quality records (every GPU's qa.csv and reproduction.csv lines, and
    which folder had which record) where their paths are given, written even when empty."""
    for path in (results_csv, published_csv, ceilings_csv, envs_json, problems_txt, qa_csv, reproduction_csv,
                 records_json):
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    agg.results.to_csv(results_csv, index=False)
    agg.published.to_csv(published_csv, index=False)
    agg.ceilings.to_csv(ceilings_csv, index=False)
    Path(envs_json).write_text(json.dumps(agg.envs, indent=2, sort_keys=True, default=str) + "\n")
    Path(problems_txt).write_text("".join(f"{line}\n" for line in agg.problems))
    if qa_csv is not None:
        agg.qa.to_csv(qa_csv, index=False)
    if reproduction_csv is not None:
        agg.reproduction.to_csv(reproduction_csv, index=False)
    if records_json is not None:
        Path(records_json).write_text(json.dumps(agg.records, indent=2, sort_keys=True) + "\n")


def _read_record(path, cols: tuple[str, ...]) -> pd.DataFrame:
    data = pd.read_csv(path, keep_default_na=True, na_values=[""], dtype={c: object for c in BOOL_COLUMNS + TEXT_COLUMNS + ("shape",)})
    for col in BOOL_COLUMNS:
        if col in data:
            data[col] = data[col].map(lambda v: None if pd.isna(v) else _as_bool(v)).astype(object)
    return data.reindex(columns=list(cols) + [c for c in data.columns if c not in cols])


def read(results_csv, published_csv, ceilings_csv, envs_json, problems_txt,
         qa_csv=None, reproduction_csv=None, records_json=None) -> Aggregate:
    """The aggregate back from the files `write` produced."""
    def frame(path, cols):
        data = pd.read_csv(path, keep_default_na=True, na_values=[""], dtype={c: object for c in BOOL_COLUMNS + TEXT_COLUMNS})
        for col in BOOL_COLUMNS:
            if col in data:
                data[col] = data[col].map(lambda v: None if pd.isna(v) else _as_bool(v)).astype(object)
        return data.reindex(columns=list(cols))
    problems = [line for line in Path(problems_txt).read_text().splitlines() if line.strip()]
    return Aggregate(
        results=frame(results_csv, RESULT_COLUMNS),
        published=frame(published_csv, RESULT_COLUMNS + PUBLISHED_COLUMNS),
        ceilings=frame(ceilings_csv, CEILING_COLUMNS),
        envs=json.loads(Path(envs_json).read_text()),
        problems=problems,
        qa=_read_record(qa_csv, QA_COLUMNS) if qa_csv is not None else None,
        reproduction=_read_record(reproduction_csv, ("gpu", *REPRODUCTION_COLUMNS))
        if reproduction_csv is not None else None,
        records=json.loads(Path(records_json).read_text()) if records_json is not None else {},
    )
