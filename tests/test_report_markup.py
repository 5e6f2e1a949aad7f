"""LaTeX and Markdown escaping, and the templates' own text free of specials."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rooflab.report.markup import Latex, Markdown, Raw, Table, escape_latex, escape_markdown

TEMPLATES = Path(__file__).resolve().parents[1] / "paper" / "templates"


@pytest.mark.parametrize("text, expected", [
    ("a_b", r"a\_b"), ("50%", r"50\%"), ("R&D", r"R\&D"), ("#1", r"\#1"), ("$5", r"\$5"),
    ("{x}", r"\{x\}"), ("~", r"\textasciitilde{}"), ("x^2", r"x\textasciicircum{}2"),
    ("C:\\path", r"C:\textbackslash{}path"), ("2.78×", r"2.78$\times$"), ("≤ 1024", r"$\leq$ 1024"),
    ("0.9–1.1", "0.9--1.1"), ("10 µs", r"10 $\mu$s"), ("café", "cafe"), ("漢", "?"),
    ("<a|b>", r"\textless{}a\textbar{}b\textgreater{}"),
])
def test_escape_latex(text, expected):
    assert escape_latex(text) == expected


def test_escape_latex_single_pass():
    # the backslash of an escape is never escaped again
    assert escape_latex("\\_") == r"\textbackslash{}\_"
    assert escape_latex("_%&#$") == r"\_\%\&\#\$"


def test_escape_markdown_is_table_safe():
    assert escape_markdown("a|b_c*d") == r"a\|b\_c\*d"


def test_dialects_escape_their_arguments_and_return_raw():
    table = Table(columns=["impl", "x"], rows=[["seed_rowwise", "50%"]], caption="rows & cols")
    tex = Latex().table(table)
    assert isinstance(tex, Raw)
    assert r"seed\_rowwise & 50\%" in tex and r"rows \& cols" in tex
    md = Markdown().table(table)
    assert r"| seed\_rowwise | 50% |" in md
    assert Latex().code("ours_rows") == r"\texttt{ours\_rows}"
    assert Latex().items(["a_b", "c"]).count(r"\item") == 2


def test_template_text_has_no_unescaped_specials():
    """Literal text of the shared templates must print the same in LaTeX and Markdown."""
    for name in ("abstract.j2", "main.j2", "appendix.j2", "appendix_study.j2", "headline.j2"):
        text = (TEMPLATES / name).read_text()
        literal = re.sub(r"<<.*?>>|<%.*?%>|<#.*?#>", "", text, flags=re.S)
        bad = sorted(set(literal) & set("_%&#$\\{}~^<>|*`[]"))
        assert not bad, f"{name}: write {bad} through the dialect (d.code, a value), not as template text"


@pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk not installed")
def test_escaped_text_compiles(tmp_path):
    nasty = "a_b 50% R&D #1 $5 {x} ~ x^2 C:\\path 2.78× ≤ 0.9–1.1 10 µs café 漢 <tag> |pipe|"
    preamble = (TEMPLATES / "paper.tex.j2").read_text().split("\\title")[0]
    preamble = re.sub(r"<#.*?#>\n?", "", preamble, flags=re.S)
    doc = preamble + r"\begin{document}" + escape_latex(nasty) + r"\end{document}"
    (tmp_path / "t.tex").write_text(doc)
    done = subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:]
