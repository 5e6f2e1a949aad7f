"""Read every GPU's result folder and the published tables into one aggregate.

A folder `<gpu-slug>/` holds env.json, ceilings.csv and one <study>.csv per study measured.
Whatever is bad is skipped and named in `problems`, never plotted and never fatal:
the whole folder when env.json or ceilings.csv is missing or malformed, one study file
when only that file fails rooflab.schema (or its shape columns, or names another GPU).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from rooflab.schema import COMMON_COLUMNS, SHAPE_COLUMNS, SchemaError, columns, read_results

STUDIES = tuple(SHAPE_COLUMNS)
MEASURED_CEILINGS = ("copy_tbps", "read_tbps", "write_tbps", "matmul_fp16_tflops", "matmul_bf16_tflops",
                     "launch_us", "launch_graph_us")
PUBLISHED_COLUMNS = ("source", "section", "claim")
BOOL_COLUMNS = ("causal", "ragged")
TEXT_COLUMNS = ("phase", "part")
NULLABLE_SHAPES = {"e2e"}          # an end-to-end row fills only the shape columns of its phase
CEILING_COLUMNS = ("gpu", "name", "value", "unit")


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
    return typed_shapes(frame, study, str(path))[list(columns(study))]


def read_env(path: Path) -> dict:
    if not path.is_file():
        raise LoadError(f"{path}: missing")
    try:
        env = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LoadError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(env, dict):
        raise LoadError(f"{path}: not a JSON object")
    return env


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


@dataclass
class Folder:
    slug: str
    path: Path
    env: dict
    ceilings: pd.DataFrame
    studies: dict[str, pd.DataFrame]


def read_folder(path: str | Path) -> tuple[Folder | None, list[str]]:
    """(folder or None, problems): None when env.json or ceilings.csv is unusable."""
    path = Path(path)
    slug = path.name
    try:
        env = read_env(path / "env.json")
        ceilings = read_ceilings(path / "ceilings.csv")
    except LoadError as exc:
        return None, [f"skipped folder {path}: {_reason(exc, path)}"]
    studies, problems = {}, []
    for study in STUDIES:
        csv = path / f"{study}.csv"
        if not csv.exists():
            continue
        try:
            studies[study] = read_study_csv(csv, slug, study)
        except LoadError as exc:
            problems.append(f"skipped file {csv}: {_reason(exc, csv)}")
    return Folder(slug, path, env, ceilings, studies), problems


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
    for slug in sorted(chosen):
        path = chosen[slug]
        if not path.is_dir():
            problems.append(f"skipped folder {path}: not a directory")
            continue
        folder, found = read_folder(path)
        problems += found
        if folder is None:
            continue
        envs[slug] = folder.env
        ceilings.append(folder.ceilings.assign(gpu=slug))
        results += list(folder.studies.values())
    published, found = read_published(published) if published is not None else \
        (_concat([], RESULT_COLUMNS + PUBLISHED_COLUMNS), [])
    return Aggregate(
        results=_concat(results, RESULT_COLUMNS),
        published=published,
        ceilings=_concat(ceilings, CEILING_COLUMNS),
        envs=envs,
        problems=problems + found,
    )


def write(agg: Aggregate, results_csv, published_csv, ceilings_csv, envs_json, problems_txt) -> None:
    for path in (results_csv, published_csv, ceilings_csv, envs_json, problems_txt):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    agg.results.to_csv(results_csv, index=False)
    agg.published.to_csv(published_csv, index=False)
    agg.ceilings.to_csv(ceilings_csv, index=False)
    Path(envs_json).write_text(json.dumps(agg.envs, indent=2, sort_keys=True, default=str) + "\n")
    Path(problems_txt).write_text("".join(f"{line}\n" for line in agg.problems))


def read(results_csv, published_csv, ceilings_csv, envs_json, problems_txt) -> Aggregate:
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
    )
