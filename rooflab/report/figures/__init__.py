"""Every figure of the paper, drawn with matplotlib (Agg) from the aggregate and its derived tables.

Each figure is one function `draw(fig, data) -> None | str` in the module of what it shows (softmax,
attention, decode, e2e, overview; the shared look in style): None when it drew, else the reason it
could not (which data are missing). A figure without data is still written, as a page that states
that reason, so the workflow's outputs stay fixed; figures/index.json records which is which, and
the paper only shows the drawn ones.
"""
from __future__ import annotations

import json
import os
import traceback
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rooflab.report.analysis import primary_gpu  # noqa: E402
from rooflab.report.catalog import FIGURES, caption  # noqa: E402
from rooflab.report.figures import attention, decode, e2e, overview, softmax  # noqa: E402
from rooflab.report.figures.inputs import FigureData  # noqa: E402
from rooflab.report.figures.style import plain  # noqa: E402
from rooflab.report.load import Aggregate  # noqa: E402

DRAW = {
    "softmax_bandwidth": softmax.bandwidth, "softmax_speedup": softmax.speedup,
    "softmax_strategies": softmax.strategies, "launch_bound": overview.launch_bound, "claims": overview.claims,
    "attention_tflops": attention.tflops, "decode_bandwidth": decode.bandwidth, "decode_split": decode.split,
    "roofline": overview.roofline, "cross_gpu": overview.cross_gpu, "e2e_breakdown": e2e.breakdown,
    "reproduction": overview.reproduction,
}
assert set(DRAW) == set(FIGURES), "every catalogued figure needs a draw function"


def _placeholder(fig, name: str, reason: str) -> None:
    fig.clear()
    fig.set_size_inches(6, 2.2)
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, plain(f"{name}: not drawn\n{reason}"), ha="center", va="center", wrap=True, fontsize=10)


PLAIN_TEXT = {"text.usetex": False}     # no figure text goes through TeX (see style.plain)


def render_all(agg: Aggregate, tables: dict, out_dir: str | Path, fresh_slug: str | None = None, names=None,
               lead: str | None = "auto") -> list[dict]:
    """Write <name>.png and <name>.pdf for every figure (a stated placeholder when data are missing).

    A figure that fails to draw or to save becomes a placeholder saying why; one whose placeholder fails
    too keeps its previous files and its index entry says so. Each file is written beside its target
    and moved into place only once complete, so a failure never leaves a truncated or missing figure."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = FigureData(agg, tables, primary_gpu(agg.results, fresh_slug, lead, agg.gpus))
    index = []
    with matplotlib.rc_context(PLAIN_TEXT):
        for name in names or FIGURES:
            index.append(_render_one(name, data, out_dir))
    _write_atomic(out_dir / "index.json", (json.dumps(index, indent=2) + "\n").encode())
    return index


def _render_one(name: str, data: FigureData, out_dir: Path) -> dict:
    study, category = FIGURES[name]
    fig = plt.figure()
    try:
        try:
            reason = DRAW[name](fig, data)
        except Exception as exc:  # a figure must never take the report down: say what broke instead
            traceback.print_exc()
            reason = f"drawing failed: {type(exc).__name__}: {exc}"
        try:
            if reason:
                _placeholder(fig, name, reason)
            elif fig.get_layout_engine() is None:
                fig.tight_layout()
            _save(fig, out_dir, name)
        except Exception as exc:
            traceback.print_exc()
            reason = f"saving failed: {type(exc).__name__}: {exc}"
            plt.close(fig)
            fig = plt.figure()
            try:
                _placeholder(fig, name, reason)
                _save(fig, out_dir, name)
            except Exception as again:
                traceback.print_exc()
                reason += f"; its placeholder failed too ({type(again).__name__}: {again}): the previous files are kept"
        width, height = (round(float(x), 2) for x in fig.get_size_inches())
    finally:
        plt.close(fig)
    return dict(name=name, study=study, category=category, caption=caption(name), gpu=data.gpu,
                drawn=reason is None, reason=reason, png=f"{name}.png", pdf=f"{name}.pdf",
                width_in=width, height_in=height)


def _save(fig, out_dir: Path, name: str) -> None:
    """Both files of one figure, each written to a temporary name and moved into place once complete;
    neither target is replaced unless both were written."""
    temps = {}
    try:
        for ext in ("png", "pdf"):
            temp = out_dir / f".{name}.{ext}.tmp"
            fig.savefig(temp, format=ext, dpi=150, metadata={"CreationDate": None} if ext == "pdf" else None)
            temps[ext] = temp
        for ext, temp in temps.items():
            os.replace(temp, out_dir / f"{name}.{ext}")
    finally:
        for temp in temps.values():
            temp.unlink(missing_ok=True)


def _write_atomic(path: Path, content: bytes) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(content)
    os.replace(temp, path)
