"""Escaping and the two output dialects (Markdown, LaTeX) the paper's templates write through.

The templates never hold markup of their own: every section, table, figure and code span
comes from a dialect method, which escapes its arguments and returns `Raw`. Every other
value a template prints is escaped by the environment's `finalize` hook (see render.py),
so a stray `_` or `%` in data can never break the LaTeX build.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field


class Raw(str):
    """Already in the output dialect: printed as is."""


class Strong(str):
    """A table cell printed in bold (the best value of its column)."""


LATEX_SPECIALS = {
    "\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "_": r"\_", "%": r"\%", "&": r"\&",
    "#": r"\#", "$": r"\$", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}",   # OT1 fonts print <>| as other glyphs
}
LATEX_UNICODE = {
    "×": r"$\times$", "≤": r"$\leq$", "≥": r"$\geq$", "≈": r"$\approx$", "±": r"$\pm$", "→": r"$\rightarrow$",
    "µ": r"$\mu$", "μ": r"$\mu$", "−": "-", "–": "--", "—": "---", "…": r"\ldots{}", "°": r"\textdegree{}",
    "‘": "`", "’": "'", "“": "``", "”": "''", "\u00a0": "~",
}


def escape_latex(text) -> str:
    """Plain text -> LaTeX that prints it: specials escaped, common symbols as math, other
    non-ASCII reduced to its ASCII base letter (or '?')."""
    out = []
    for ch in str(text):
        if ch in LATEX_SPECIALS:
            out.append(LATEX_SPECIALS[ch])
        elif ch in LATEX_UNICODE:
            out.append(LATEX_UNICODE[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            base = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            out.append(escape_latex(base) if base else "?")
    return "".join(out)


MARKDOWN_SPECIALS = set("\\`*_[]<>|#$")   # `$`: a dollar sign, never the start of TeX math


def escape_markdown(text) -> str:
    """Plain text -> Markdown that prints it literally (table-safe: `|` escaped too)."""
    return "".join("\\" + ch if ch in MARKDOWN_SPECIALS else ch for ch in str(text))


RATIO_CELL = re.compile(r"^(\S+x) \[([^\]]+)\] (win|tie|loss)$")   # '1.11x [1.09, 1.12] win'


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""
    align: list[str] = field(default_factory=list)   # per column: l, r, c or p{width}; default l then r
    label: str = ""
    notes: list[str] = field(default_factory=list)

    def alignment(self) -> list[str]:
        return list(self.align) or ["l"] + ["r"] * (len(self.columns) - 1)


class Markdown:
    name = "markdown"
    escape = staticmethod(escape_markdown)

    def section(self, title, level: int = 1, label: str = "") -> Raw:
        return Raw(f"{'#' * (level + 1)} {self.escape(title)}")

    def code(self, text) -> Raw:
        return Raw(f"`{str(text).replace('`', '')}`")

    def emph(self, text) -> Raw:
        return Raw(f"*{self.escape(text)}*")

    def bold(self, text) -> Raw:
        return Raw(f"**{self.escape(text)}**")

    def items(self, lines) -> Raw:
        return Raw("\n".join(f"- {self.escape(line)}" for line in lines))

    def link(self, text, url) -> Raw:
        return Raw(f"[{self.escape(text)}]({url})")

    def table(self, table: Table) -> Raw:
        if not table.rows:
            return Raw("")
        align = {"l": ":---", "r": "---:", "c": ":---:"}
        lines = []
        if table.caption:
            lines += [f"*{self.escape(table.caption)}*", ""]
        lines.append("| " + " | ".join(self.escape(c) for c in table.columns) + " |")
        lines.append("|" + "|".join(align.get(a, ":---") for a in table.alignment()) + "|")
        lines += ["| " + " | ".join(self._cell(c) for c in row) + " |" for row in table.rows]
        lines += [""] + [self.escape(note) for note in table.notes] if table.notes else []
        return Raw("\n".join(lines))

    def _cell(self, text) -> str:
        return f"**{self.escape(text)}**" if isinstance(text, Strong) else self.escape(text)

    def code_block(self, lines) -> Raw:
        return Raw("```\n" + "\n".join(str(line) for line in lines) + "\n```")

    def appendix(self) -> Raw:
        return Raw("")

    def appendix_section(self, letter: str, title) -> Raw:
        return self.section(f"Appendix {letter}: {title}")

    def figure(self, fig: dict, base: str) -> Raw:
        if not fig["drawn"]:
            return Raw(f"*Figure {self.escape(fig['name'])} not drawn: {self.escape(fig['reason'])}.*")
        return Raw(f"![{self.escape(fig['name'])}]({base}/{fig['png']})\n\n"
                   f"*Figure ({self.escape(fig['name'])}): {self.escape(fig['caption'])}*")


class Latex:
    name = "latex"
    escape = staticmethod(escape_latex)
    LEVELS = ("section", "subsection", "subsubsection", "paragraph")
    WIDE = 8         # a table with more columns is set smaller, its numeric column heads turned upright
    VERY_WIDE = 12   # ... and one with more than this, smaller still

    def _head(self, text, turn: bool) -> str:
        cell = f"\\textbf{{{self.escape(text)}}}"
        return f"\\rotatebox{{90}}{{{cell}}}" if turn else cell

    def section(self, title, level: int = 1, label: str = "") -> Raw:
        star = "*" if label == "nonumber" else ""
        return Raw(f"\\{self.LEVELS[level - 1]}{star}{{{self.escape(title)}}}")

    def code(self, text) -> Raw:
        return Raw(f"\\texttt{{{self.escape(text)}}}")

    def emph(self, text) -> Raw:
        return Raw(f"\\emph{{{self.escape(text)}}}")

    def bold(self, text) -> Raw:
        return Raw(f"\\textbf{{{self.escape(text)}}}")

    def items(self, lines) -> Raw:
        lines = list(lines)
        if not lines:
            return Raw("")
        body = "\n".join(f"  \\item {self.escape(line)}" for line in lines)
        return Raw(f"\\begin{{itemize}}\n{body}\n\\end{{itemize}}")

    def link(self, text, url) -> Raw:
        return Raw(f"\\href{{{_url(url)}}}{{{self.escape(text)}}}")

    def _cell(self, text) -> str:
        """A table cell; a ratio with its interval and outcome ('1.11x [1.09, 1.12] win') is stacked on
        two lines, so that wide tables fit the page."""
        if isinstance(text, Strong):
            return f"\\textbf{{{self.escape(text)}}}"
        match = RATIO_CELL.match(str(text))
        if not match:
            return self.escape(text)
        value, interval, outcome = (self.escape(g) for g in match.groups())
        return f"\\shortstack[r]{{{value} {outcome}\\\\\\relax {{[}}{interval}{{]}}}}"

    def table(self, table: Table) -> Raw:
        if not table.rows:
            return Raw("")
        spec = "".join(r">{\raggedright\arraybackslash}" + a if a.startswith("p{") else a for a in table.alignment())
        wide = len(table.columns) > self.WIDE
        head = " & ".join(self._head(c, wide and a == "r") for c, a in zip(table.columns, table.alignment())) + r" \\"
        rows = "\n".join(" & ".join(self._cell(c) for c in row) + r" \\" for row in table.rows)
        caption = f"\\caption{{{self.escape(table.caption)}}}\\\\\n" if table.caption else ""
        notes = "".join(f"\n\n{self.escape(n)}" for n in table.notes)
        size = ("\\tiny\\setlength{\\tabcolsep}{2pt}" if len(table.columns) > self.VERY_WIDE
                else "\\scriptsize\\setlength{\\tabcolsep}{2pt}" if wide else "\\footnotesize\\setlength{\\tabcolsep}{3pt}")
        return Raw(
            f"{{{size}\n"
            f"\\begin{{longtable}}{{{spec}}}\n{caption}\\toprule\n{head}\n\\midrule\n\\endhead\n"
            f"{rows}\n\\bottomrule\n\\end{{longtable}}}}{notes}"
        )

    def code_block(self, lines) -> Raw:
        body = "\n".join(str(line).replace("\\end{verbatim}", "") for line in lines)
        return Raw("{\\small\n\\begin{verbatim}\n" + body + "\n\\end{verbatim}\n}")

    def appendix(self) -> Raw:
        return Raw("\\clearpage\n\\appendix")

    def appendix_section(self, letter: str, title) -> Raw:
        return self.section(title)

    def figure(self, fig: dict, base: str) -> Raw:
        if not fig["drawn"]:
            return Raw(f"\\emph{{Figure {self.escape(fig['name'])} not drawn: {self.escape(fig['reason'])}.}}")
        tall = fig.get("height_in", 0) > fig.get("width_in", 1)      # a tall figure may take most of a page
        return Raw(
            "\\begin{figure}\n\\centering\n"
            f"\\includegraphics[width=\\linewidth,height={0.6 if tall else 0.34}\\textheight,keepaspectratio]"
            f"{{{base}/{fig['pdf']}}}\n"
            f"\\caption{{{self.escape(fig['caption'])}}}\n\\end{{figure}}"
        )


def _url(url: str) -> str:
    """A URL inside \\href: only % and # need escaping there."""
    return str(url).replace("\\", "/").replace("%", r"\%").replace("#", r"\#")


DIALECTS = {"markdown": Markdown(), "latex": Latex()}
