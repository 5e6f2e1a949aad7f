"""Hostile result folders beside a good one: each is named in problems.txt with its reason, the figures
and the paper still render, the good GPU still leads, and a figure that fails never costs the others."""
import json
import math
import os
import time
from pathlib import Path

import pandas as pd
import pytest

import hostile
from rooflab.report import analysis, context, derive, figures, load, render
from rooflab.report.catalog import FIGURES
from rooflab.schema import SchemaError, _validator, columns, read_results, validate_frame

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
GOOD = FIXTURES / "results" / "fixture-gpu"
LIMIT = 40_000     # bytes of CSV a folder may hold in these tests (the fixture's folders hold less)


def _render(agg, out: Path, lead="auto"):
    index = figures.render_all(agg, derive.derive(agg), out / "figures", lead=lead)
    verify = pd.read_csv(FIXTURES / "verify" / "interpreter.csv")
    ctx = context.build(agg, derive.derive(agg), index, verify, None, "../figures", lead=lead)
    return index, ctx, render.render(ctx, "markdown"), render.render(ctx, "latex")


@pytest.fixture(scope="module")
def hostile_render(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    expected = hostile.make(GOOD, root / "results", size_limit=LIMIT)
    # the mathtext name is valid data: it is drawn in a test of its own, not here
    dirs = sorted(p for p in (root / "results").iterdir() if p.name != hostile.MATHTEXT_SLUG) + [GOOD]
    mp = pytest.MonkeyPatch()
    mp.setattr(load, "MAX_FOLDER_CSV_BYTES", LIMIT)
    try:
        agg = load.collect(dirs, None, ROOT / "data" / "published")
    finally:
        mp.undo()
    paths = {k: root / "aggregate" / f"{k}.{'json' if k == 'envs' else 'txt' if k == 'problems' else 'csv'}"
             for k in ("results", "published", "ceilings", "envs", "problems")}
    load.write(agg, *paths.values())
    agg = load.read(*paths.values())
    index, ctx, md, tex = _render(agg, root)
    return dict(root=root, expected=expected, agg=agg, problems=paths["problems"].read_text(), index=index,
                ctx=ctx, md=md, tex=tex)


@pytest.mark.parametrize("slug", list(hostile.CASES))
def test_each_hostile_folder_is_a_named_problem(hostile_render, slug):
    words = hostile_render["expected"][slug]
    lines = [line for line in hostile_render["problems"].splitlines() if f"/{slug}/" in line or line.endswith(f"/{slug}")
             or f"/{slug}:" in line]
    assert lines, f"{slug} not in problems.txt"
    assert any(words in line for line in lines), lines


def test_the_good_gpu_still_leads_and_everything_renders(hostile_render):
    assert hostile_render["ctx"]["primary"]["slug"] == "fixture-gpu"
    assert {e["gpu"] for e in hostile_render["index"]} == {"fixture-gpu"}
    assert set(hostile_render["agg"].results["gpu"]) == {"fixture-gpu"}
    assert hostile_render["agg"].gpus == ["fixture-gpu"]        # no hostile folder shows up as a GPU of 0 rows
    assert [g["slug"] for g in hostile_render["ctx"]["gpus"]] == ["fixture-gpu"]   # the paper names one GPU
    assert [e["name"] for e in hostile_render["index"]] == list(FIGURES)
    for entry in hostile_render["index"]:
        assert "failed" not in (entry["reason"] or ""), entry
        for ext in ("png", "pdf"):
            assert (hostile_render["root"] / "figures" / f"{entry['name']}.{ext}").stat().st_size > 0
    assert "hostile-duplicate-rows/softmax.csv" in hostile_render["md"]
    assert "hostile-duplicate-rows/softmax.csv" in hostile_render["tex"]


# ---------------------------------------------------------------- figures: plain text, failures contained

def test_a_mathtext_gpu_name_is_drawn_as_plain_text(tmp_path):
    folder = hostile.copy_gpu(GOOD, tmp_path / "results" / hostile.MATHTEXT_SLUG)
    env = json.loads((folder / "env.json").read_text())
    env["gpu"] = hostile.MATHTEXT_NAME
    (folder / "env.json").write_text(json.dumps(env))
    agg = load.collect([folder])
    assert agg.problems == []
    index, ctx, md, tex = _render(agg, tmp_path, lead=hostile.MATHTEXT_SLUG)
    assert ctx["primary"]["slug"] == hostile.MATHTEXT_SLUG
    bad = [e for e in index if "failed" in (e["reason"] or "")]
    assert not bad, bad
    drawn = [e["name"] for e in index if e["drawn"]]
    assert "softmax_bandwidth" in drawn           # its title carries the GPU's name
    assert r"A100 \$\\frac{\$" in md               # a dollar sign in Markdown, not TeX math
    assert r"A100 \$\textbackslash{}frac\{\$" in tex


def test_a_figure_that_fails_to_draw_or_save_leaves_the_others(tmp_path, monkeypatch):
    agg = load.collect([GOOD])
    out = tmp_path / "figures"
    out.mkdir()
    (out / "roofline.png").write_bytes(b"committed png")
    (out / "roofline.pdf").write_bytes(b"committed pdf")

    def broken_draw(fig, data):
        raise RuntimeError("drawing broke")
    monkeypatch.setitem(figures.DRAW, "launch_bound", broken_draw)
    real_savefig = figures.plt.Figure.savefig

    def savefig(self, path, *args, **kwargs):   # roofline: every save fails, its placeholder's too
        if "roofline" in str(path):
            raise ValueError("disk full")
        return real_savefig(self, path, *args, **kwargs)
    monkeypatch.setattr(figures.plt.Figure, "savefig", savefig)
    index = {e["name"]: e for e in figures.render_all(agg, derive.derive(agg), out)}
    assert "drawing failed: RuntimeError: drawing broke" in index["launch_bound"]["reason"]
    assert (out / "launch_bound.png").stat().st_size > 0     # a placeholder saying why
    assert "saving failed: ValueError: disk full" in index["roofline"]["reason"]
    assert "previous files are kept" in index["roofline"]["reason"]
    assert (out / "roofline.png").read_bytes() == b"committed png"
    assert (out / "roofline.pdf").read_bytes() == b"committed pdf"
    assert index["softmax_bandwidth"]["drawn"]
    assert not list(out.glob(".*.tmp"))
    assert json.loads((out / "index.json").read_text())[0]["name"] == list(FIGURES)[0]


# ---------------------------------------------------------------- which GPU leads

def _rows(gpu, n):
    return pd.DataFrame({"gpu": [gpu] * n, "status": ["ok"] * n})


def test_lead_gpu_is_never_decided_by_row_counts():
    results = pd.concat([_rows("aaa-gpu", 1), _rows("zzz-gpu", 500), _rows("nvidia-h200", 2)])
    assert analysis.primary_gpu(results) == "nvidia-h200"
    assert analysis.primary_gpu(results, fresh_slug="zzz-gpu") == "zzz-gpu"
    assert analysis.primary_gpu(results, lead="aaa-gpu") == "aaa-gpu"
    assert analysis.primary_gpu(results, lead="not-here") == "nvidia-h200"
    without = results[results["gpu"] != "nvidia-h200"]
    assert analysis.primary_gpu(without) == "aaa-gpu"               # alphabetically first, not the largest
    assert analysis.primary_gpu(without.iloc[:0], gpus=["b-gpu", "a-gpu"]) == "a-gpu"
    assert analysis.primary_gpu(without.iloc[:0]) is None


def test_duplicates_cannot_make_a_gpu_lead(tmp_path):
    many = hostile.copy_gpu(GOOD, tmp_path / "aaa-many")
    frame = pd.read_csv(many / "softmax.csv")
    pd.concat([frame] * 5).to_csv(many / "softmax.csv", index=False)
    agg = load.collect([many, GOOD])
    assert any("aaa-many/softmax.csv: duplicate key" in p for p in agg.problems)
    assert analysis.primary_gpu(agg.results, None, "auto", agg.gpus) == "fixture-gpu"


def test_config_names_the_lead_gpu():
    import yaml
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert config["report"]["lead_gpu"] == "auto"


# ---------------------------------------------------------------- the row schema

def _frame():
    return pd.read_csv(GOOD / "softmax.csv")


def test_a_non_numeric_cell_is_reported_on_its_own_csv_line(tmp_path):
    path = tmp_path / "softmax.csv"
    lines = (GOOD / "softmax.csv").read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[6].split(",")                  # line 7 of the file (the header is line 1)
    cells[header.index("p80_ms")] = "n/a?"
    lines[6] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SchemaError, match=r"row 7 field 'p80_ms': 'n/a\?' is not a number"):
        read_results(path)


@pytest.mark.parametrize("column, value, words", [
    ("median_ms", math.inf, "median_ms"), ("tbps", math.inf, "tbps"), ("median_ms", -math.inf, "median_ms"),
    ("p20_ms", 1.0, "p20_ms"), ("p80_ms", 1e-9, "p80_ms"),
])
def test_infinite_numbers_and_inverted_percentiles_fail(column, value, words):
    frame = _frame()
    frame.loc[3, column] = value
    with pytest.raises(SchemaError, match=f"x.csv: row 5 field .*{words}"):
        validate_frame(frame, "x.csv")


@pytest.mark.parametrize("column, value", [
    ("status", "fast"), ("gpu", "Fixture GPU"), ("dtype", "float64"), ("median_ms", -1.0), ("median_ms", 0.0),
    ("reps", 1.5), ("reps", -1), ("impl", "Ours!"), ("timing", "wallclock"), ("message", 3.0), ("max_abs_err", -1e-9),
    ("median_ms", None), ("median_ms", "0.1"), ("ceiling_name", 1.0), ("median_ms", True),
])
def test_column_checks_agree_with_jsonschema(column, value):
    """The column-at-a-time checks reject exactly the rows jsonschema rejects, on the same row."""
    frame = _frame()
    frame[column] = frame[column].astype(object)
    frame.at[4, column] = value
    row = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in frame.iloc[4].to_dict().items()}
    for key in ("reps", "trials"):
        if isinstance(row.get(key), float) and row[key].is_integer():
            row[key] = int(row[key])
    schema_says_bad = any(True for _ in _validator().iter_errors(row))
    if schema_says_bad:
        with pytest.raises(SchemaError, match=f"row 6 field '{column}'"):
            validate_frame(frame, "x.csv")
    else:
        validate_frame(frame, "x.csv")


def test_validation_time_grows_with_rows_not_faster():
    """10x the rows costs about 10x the time (not the per-row jsonschema call it was): both stay fast."""
    base = _frame()
    small = pd.concat([base.assign(rows=base["rows"] + k * 10**7) for k in range(40)], ignore_index=True)
    large = pd.concat([base.assign(rows=base["rows"] + k * 10**7) for k in range(400)], ignore_index=True)
    timings = []
    for frame in (small, large):
        started = time.perf_counter()
        validate_frame(frame, "x.csv")
        timings.append(time.perf_counter() - started)
    assert len(large) > 15_000 and timings[1] < 5.0
    assert timings[1] < 30 * max(timings[0], 0.01)     # linear in rows: a per-row call would be far past 10x


# ---------------------------------------------------------------- reproducible renders

def test_two_renders_of_the_same_data_are_byte_identical(tmp_path):
    dirs = [FIXTURES / "results" / n for n in ("fixture-gpu", "fixture-gpu-partial", "fixture-gpu-broken")]
    papers = []
    for k in range(2):
        agg = load.collect(dirs, None, ROOT / "data" / "published")
        _, _, md, tex = _render(agg, tmp_path / f"render-{k}")
        papers.append((md, tex))
    assert papers[0] == papers[1]
    figs = [sorted((p.name, p.read_bytes()) for p in (tmp_path / f"render-{k}" / "figures").glob("*.pdf")) for k in range(2)]
    assert figs[0] == figs[1]


def test_the_paper_shows_no_check_seconds():
    from rooflab.report.context import verify_view
    view = verify_view(pd.read_csv(FIXTURES / "verify" / "interpreter.csv"))
    assert "seconds" not in view["table"].columns and "seconds" not in view


def test_interpreter_checks_fix_their_random_state():
    from rooflab.verify import run
    cfg = {"softmax": {"dtypes": ["float32"], "impls": ["ours"], "grid": [{"rows": [2], "cols": [7]}]}}
    import torch
    torch.manual_seed(123)
    first = [(r["rel_err"], r["max_abs_err"]) for r in run(cfg)]
    torch.manual_seed(456)
    second = [(r["rel_err"], r["max_abs_err"]) for r in run(cfg)]
    assert first == second


def test_a_stale_pdf_is_said_to_be_stale(tmp_path):
    tex, pdf = tmp_path / "paper.tex", tmp_path / "paper.pdf"
    assert "was not built" in render.stale_pdf_notice(pdf, tex)
    pdf.write_bytes(b"%PDF")
    tex.write_text("new")
    os.utime(pdf, (time.time() - 100, time.time() - 100))
    notice = render.stale_pdf_notice(pdf, tex)
    assert "NOT rebuilt" in notice and "older than" in notice
