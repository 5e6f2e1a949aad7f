"""Render paper/templates/*.j2 into paper.md and paper.tex (and paper.pdf through latexmk).

Both formats render the same context (rooflab.report.context.build) through the same templates
(abstract, main text, appendices); only the dialect differs. Template delimiters are << >> for values, <% %> for
statements and <# #> for comments, so LaTeX braces and Markdown never collide with Jinja.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import jinja2

from rooflab.report.markup import DIALECTS, Raw

TEMPLATES = Path(__file__).resolve().parents[2] / "paper" / "templates"


def environment(dialect: str, templates: str | Path = TEMPLATES) -> jinja2.Environment:
    style = DIALECTS[dialect]

    def finalize(value):
        if value is None:
            return ""
        if isinstance(value, Raw):
            return value
        return style.escape(value)

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        block_start_string="<%", block_end_string="%>",
        variable_start_string="<<", variable_end_string=">>",
        comment_start_string="<#", comment_end_string="#>",
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined, autoescape=False, finalize=finalize,
    )
    env.globals["d"] = style
    env.globals["raw"] = Raw
    return env


def render(context: dict, dialect: str, templates: str | Path = TEMPLATES) -> str:
    name = {"markdown": "paper.md.j2", "latex": "paper.tex.j2"}[dialect]
    return environment(dialect, templates).get_template(name).render(**context)


def build_pdf(tex_path: str | Path, pdf_path: str | Path, log=None) -> None:
    """latexmk -pdf in a scratch directory next to the .tex (so relative figure paths resolve);
    only the PDF is copied out. Raises RuntimeError with the tail of LaTeX's log on failure."""
    tex_path, pdf_path = Path(tex_path).resolve(), Path(pdf_path).resolve()
    if shutil.which("latexmk") is None:
        raise RuntimeError("latexmk is not on the PATH")
    with tempfile.TemporaryDirectory(prefix="latexmk-") as out:
        cmd = ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "-file-line-error",
               f"-outdir={out}", tex_path.name]
        env = dict(os.environ, SOURCE_DATE_EPOCH=os.environ.get("SOURCE_DATE_EPOCH", "0"))
        done = subprocess.run(cmd, cwd=tex_path.parent, capture_output=True, text=True, env=env)
        if log is not None:
            log.write(done.stdout[-20000:])
            log.write(done.stderr[-5000:])
        built = Path(out) / (tex_path.stem + ".pdf")
        if done.returncode != 0 or not built.exists():
            tail = (Path(out) / (tex_path.stem + ".log"))
            text = tail.read_text(errors="replace")[-3000:] if tail.exists() else done.stdout[-3000:]
            raise RuntimeError(f"latexmk failed ({done.returncode}):\n{text}")
        pdf_path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, pdf_path)


def stale_pdf_notice(pdf_path: str | Path, tex_path: str | Path) -> str:
    """The line the paper rule prints (and logs) when it could not build the PDF (no latexmk): whether
    the paper.pdf on disk, if any, is older than the paper.tex just written, i.e. no longer this paper."""
    pdf, tex = Path(pdf_path), Path(tex_path)
    if not pdf.exists():
        return f"{pdf} was not built (latexmk not on the PATH when the workflow was parsed)"
    if tex.exists() and pdf.stat().st_mtime < tex.stat().st_mtime:
        return (f"WARNING: {pdf} was NOT rebuilt (latexmk not on the PATH when the workflow was parsed) and is "
                f"older than {tex}: it does not show this render; build it where latexmk exists")
    return f"{pdf} was not rebuilt (latexmk not on the PATH when the workflow was parsed); it is not older than {tex}"
