"""The fixed figure list: a draw function and a `snakemake --report` caption for each."""
from pathlib import Path

from rooflab.report import figures
from rooflab.report.catalog import FIGURES, caption

ROOT = Path(__file__).resolve().parents[1]


def test_each_figure_has_a_drawer_and_a_caption_file():
    assert set(figures.DRAW) == set(FIGURES)
    for name in FIGURES:
        assert (ROOT / "workflow" / "report" / f"{name}.rst").read_text().strip()


def test_the_paper_reads_the_report_captions():
    for name in FIGURES:
        first = (ROOT / "workflow" / "report" / f"{name}.rst").read_text().split("\n\n")[0]
        assert caption(name) == " ".join(first.split()), name
