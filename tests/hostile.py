"""Hostile result folders: each one a copy of a good GPU folder (env.json, ceilings.csv, softmax.csv) with
one thing wrong, and the words problems.txt must give as its reason. Used by tests/test_report_hostile.py,
and as a script to lay the same folders beside real results for a render by hand:

    python tests/hostile.py data/results/nvidia-h200 /tmp/scratch/data/results [--large]
"""
from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pandas as pd


def copy_gpu(template: Path, dest: Path, slug: str | None = None) -> Path:
    """env.json, ceilings.csv and softmax.csv of `template`, renamed to the GPU `slug` (default: dest's name)."""
    slug = slug or dest.name
    dest.mkdir(parents=True, exist_ok=True)
    env = json.loads((template / "env.json").read_text())
    env["slug"] = slug
    (dest / "env.json").write_text(json.dumps(env, indent=2))
    shutil.copy(template / "ceilings.csv", dest / "ceilings.csv")
    frame = pd.read_csv(template / "softmax.csv").assign(gpu=slug)
    frame.to_csv(dest / "softmax.csv", index=False)
    return dest


def _csv(folder: Path, change) -> None:
    frame = pd.read_csv(folder / "softmax.csv")
    frame = change(frame)
    frame.to_csv(folder / "softmax.csv", index=False)


def _env(folder: Path, change) -> None:
    env = json.loads((folder / "env.json").read_text())
    change(env)
    (folder / "env.json").write_text(json.dumps(env))


def _ok_row(frame: pd.DataFrame) -> int:
    """Position of a row with every time filled (the third such row, so the error is not on row 2)."""
    full = frame[["median_ms", "p20_ms", "p80_ms", "ci_low_ms", "ci_high_ms"]].notna().all(axis=1).to_numpy()
    return int(full.nonzero()[0][2])


def _set(frame, column, value, row=None):
    frame = frame.copy()
    if column in frame and frame[column].dtype != object and not isinstance(value, (int, float)):
        frame[column] = frame[column].astype(object)
    frame.loc[frame.index[_ok_row(frame) if row is None else row], column] = value
    return frame


def _swap_percentiles(frame):
    frame = frame.copy()
    i = frame.index[_ok_row(frame)]
    low, high = float(frame.at[i, "p20_ms"]), float(frame.at[i, "p80_ms"])
    frame.at[i, "p20_ms"], frame.at[i, "p80_ms"] = high, low
    return frame


def _non_numeric(folder: Path) -> None:
    """A word in median_ms on the line after the header's third data line (CSV line 5)."""
    lines = (folder / "softmax.csv").read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    cells = lines[4].rstrip("\n").split(",")
    cells[header.index("median_ms")] = "fast"
    lines[4] = ",".join(cells) + "\n"
    (folder / "softmax.csv").write_text("".join(lines))


def _extra_column(frame):
    return frame.assign(notes="remeasured by hand")


def _big(folder: Path, limit: int) -> None:
    """A softmax.csv padded with valid rows past `limit` bytes."""
    frame = pd.read_csv(folder / "softmax.csv")
    size = (folder / "softmax.csv").stat().st_size
    copies = int(limit / max(size, 1)) + 2
    parts = [frame.assign(rows=frame["rows"] + k * 10_000_000) for k in range(copies)]
    pd.concat(parts, ignore_index=True).to_csv(folder / "softmax.csv", index=False)


# slug -> (what is wrong, how to break a copied folder, words its problems.txt line holds)
CASES = {
    "hostile-duplicate-rows": ("two rows of one case", lambda d: _csv(d, lambda f: pd.concat([f, f.iloc[[3]]])),
                               "duplicate key"),
    "hostile-duplicate-case": ("one case measured twice with other numbers",
                               lambda d: _csv(d, lambda f: pd.concat([f, f.iloc[[5]].assign(median_ms=f["median_ms"].iloc[5] * 0.5,
                                                                                             ci_low_ms=None, ci_high_ms=None,
                                                                                             p20_ms=None, p80_ms=None)])),
                               "duplicate key"),
    "hostile-inf-median": ("inf as a median", lambda d: _csv(d, lambda f: _set(f, "median_ms", math.inf)),
                           "not a finite number"),
    "hostile-inf-bytes": ("inf bytes", lambda d: _csv(d, lambda f: _set(f, "bytes", math.inf)), "not a finite number"),
    "hostile-p20-above-p80": ("p20 above p80", lambda d: _csv(d, _swap_percentiles), "20th to 80th percentile"),
    "hostile-ci-inverted": ("an interval that misses its median",
                            lambda d: _csv(d, lambda f: _set(f, "ci_low_ms", 1e3)), "does not hold median_ms"),
    "hostile-non-numeric": ("a word in a number column", _non_numeric, "row 5 field 'median_ms'"),
    "hostile-extra-column": ("a column no study has", lambda d: _csv(d, _extra_column), "unknown columns ['notes']"),
    "hostile-env-config-list": ("env.json config as a list", lambda d: _env(d, lambda e: e.update(config=[1, 2])),
                                "field 'config'"),
    "hostile-env-memory-lots": ("env.json memory_gib as a word", lambda d: _env(d, lambda e: e.update(memory_gib="lots")),
                                "field 'memory_gib'"),
    "hostile-env-sm-count-text": ("env.json sm_count as text", lambda d: _env(d, lambda e: e.update(sm_count="132")),
                                  "field 'sm_count'"),
    "hostile-env-memory-nan": ("env.json memory_gib NaN", lambda d: _env(d, lambda e: e.update(memory_gib=math.nan)),
                               "not a finite number"),
    "hostile-env-bench-text": ("env.json bench flush_mib as text",
                               lambda d: _env(d, lambda e: e.setdefault("config", {}).update(bench={"flush_mib": "big"})),
                               "field 'config.bench.flush_mib'"),
    "Hostile Spaces": ("a folder name with spaces and capitals", lambda d: None, "is not a GPU slug"),
    "hostile..dots": ("a folder name with '..'", lambda d: None, "is not a GPU slug"),
    "hostile--double-dash": ("a folder name with a double dash", lambda d: None, "is not a GPU slug"),
    "hostile-trailing-": ("a folder name ending in a dash", lambda d: None, "is not a GPU slug"),
    "hostile-too-large": ("CSVs over the size limit", None, "over the"),
}
# Not a problem but a trap for the figures: a GPU name that matplotlib would read as mathtext.
MATHTEXT_SLUG = "hostile-mathtext-name"
MATHTEXT_NAME = r"A100 $\frac{$"


def make(template: Path, root: Path, size_limit: int = 50_000_000) -> dict[str, str]:
    """Every hostile folder under `root`; returns slug -> the words its problem line must hold."""
    expected = {}
    for slug, (_, breaks, words) in CASES.items():
        folder = copy_gpu(template, root / slug)
        if breaks is None:
            _big(folder, size_limit)
        else:
            breaks(folder)
        expected[slug] = words
    folder = copy_gpu(template, root / MATHTEXT_SLUG)
    _env(folder, lambda e: e.update(gpu=MATHTEXT_NAME))
    return expected


if __name__ == "__main__":
    found = make(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{len(found) + 1} hostile folders under {sys.argv[2]}")
