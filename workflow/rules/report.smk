# From CSVs to the paper: aggregate every GPU's results with the published tables (and each GPU
# folder's quality records, qa.csv and reproduction.csv), draw the figures (a fixed set: a figure
# without data states what is missing), render Markdown and LaTeX from the same context, and build
# the PDF where latexmk exists.
from pathlib import Path

from rooflab.report.catalog import FIGURES as _CATALOG

FIGURES = list(_CATALOG)
AGGREGATE = {k: f"results/aggregate/{k}.{'json' if k in ('envs', 'records') else 'txt' if k == 'problems' else 'csv'}"
             for k in ("results", "published", "ceilings", "envs", "problems", "qa", "reproduction", "records")}
LEAD_GPU = (config.get("report") or {}).get("lead_gpu", "auto")   # the GPU the paper leads with
COMMITTED_FILES = sorted(str(p) for d in RESULT_DIRS if Path(d).name != FRESH_SLUG
                         for p in Path(d).glob("*") if p.suffix in (".csv", ".json"))


rule aggregate:
    input:
        FRESH_OUTPUTS,
        COMMITTED_FILES,
        published=sorted(str(p) for p in Path("data/published").glob("*.csv")),
    output:
        **AGGREGATE,
    params:
        result_dirs=RESULT_DIRS,
        fresh_slug=FRESH_SLUG,
    log:
        "logs/report/aggregate.log",
    conda:
        "../../envs/report.yaml"
    script:
        "../scripts/aggregate.py"


REPORT_CODE = sorted(str(p) for p in Path("rooflab/report").glob("*.py"))


rule figures:
    input:
        **AGGREGATE,
        gpus="data/gpus.yaml",
        code=REPORT_CODE,
    output:
        index="figures/index.json",
        png=[report(f"figures/{n}.png", caption=f"../report/{n}.rst", category=_CATALOG[n][1]) for n in FIGURES],
        pdf=[f"figures/{n}.pdf" for n in FIGURES],
    params:
        fresh_slug=FRESH_SLUG,
        lead_gpu=LEAD_GPU,
    log:
        "logs/report/figures.log",
    conda:
        "../../envs/report.yaml"
    script:
        "../scripts/figures.py"


rule paper:
    input:
        **AGGREGATE,
        gpus="data/gpus.yaml",
        index=rules.figures.output.index,
        figures=rules.figures.output.pdf,
        verify=VERIFY_CSV,
        templates=sorted(str(p) for p in Path("paper/templates").glob("*.j2")),
        code=REPORT_CODE,
    output:
        md="paper/paper.md",
        tex="paper/paper.tex",
        **({"pdf": "paper/paper.pdf"} if HAS_LATEX else {}),
    params:
        fresh_slug=FRESH_SLUG,
        lead_gpu=LEAD_GPU,
    log:
        "logs/report/paper.log",
    conda:
        "../../envs/report.yaml"
    script:
        "../scripts/paper.py"
