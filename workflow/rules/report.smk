# From CSVs to the paper: aggregate every GPU's results with the published tables (and each GPU
# folder's quality records), derive the shared tables once (comparisons, verdicts, Amdahl checks),
# draw the figures (a fixed set: a figure without data states what is missing), render Markdown and
# LaTeX from the same context, and build the PDF where latexmk exists. Each rule's `code` input is
# every module its script imports (rooflab.report.deps), so a change to any of them re-runs it.
from pathlib import Path

from rooflab.report import deps
from rooflab.report.catalog import FIGURES as _CATALOG, caption_file

FIGURES = list(_CATALOG)
_RECORDS = {"results": "csv", "published": "csv", "ceilings": "csv", "envs": "json", "problems": "txt", "qa": "csv",
            "reproduction": "csv", "records": "json"}
_DERIVED = ("cases", "comparisons", "verdicts", "amdahl")            # rooflab.report.derive.TABLES
AGGREGATE = {k: f"results/aggregate/{k}.{ext}" for k, ext in _RECORDS.items()}
DERIVED = {k: f"results/aggregate/{k}.csv" for k in _DERIVED}
LEAD_GPU = (config.get("report") or {}).get("lead_gpu", "auto")   # the GPU the paper leads with
COMMITTED_FILES = sorted(str(p) for d in RESULT_DIRS if Path(d).name != FRESH_SLUG
                         for p in Path(d).glob("*") if p.suffix in (".csv", ".json"))
CODE = {script: deps.modules(workflow.basedir, f"workflow/scripts/{script}.py")   # every module a script imports
        for script in ("aggregate", "figures", "paper")}


rule aggregate:
    input:
        FRESH_OUTPUTS,
        COMMITTED_FILES,
        published=sorted(str(p) for p in Path("data/published").glob("*.csv")),
        claims="data/published/claims.yaml",
        gpus="data/gpus.yaml",
        schemas=["workflow/schemas/results.schema.yaml", "workflow/schemas/env.schema.yaml"],
        code=CODE["aggregate"],
    output:
        **AGGREGATE,
        **DERIVED,
    params:
        result_dirs=RESULT_DIRS,
        fresh_slug=FRESH_SLUG,
        lead_gpu=LEAD_GPU,
    log:
        "logs/report/aggregate.log",
    conda:
        "../../envs/report.yaml"
    script:
        "../scripts/aggregate.py"


rule figures:
    input:
        **AGGREGATE,
        **DERIVED,
        gpus="data/gpus.yaml",
        captions=[caption_file(n) for n in FIGURES],
        code=CODE["figures"],
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
        **DERIVED,
        gpus="data/gpus.yaml",
        index=rules.figures.output.index,
        figures=rules.figures.output.pdf,
        verify=VERIFY_CSV,
        templates=sorted(str(p) for p in Path("paper/templates").glob("*.j2")),
        code=CODE["paper"],
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
