"""Rule paper: aggregate + derived tables + figures + interpreter table -> paper.md, paper.tex (and paper.pdf
when declared)."""
import json
import os
from pathlib import Path

import pandas as pd

from rooflab.report import context, derive, load, render
from rooflab.report.render import stale_pdf_notice
from rooflab.workflow import log_to

log = log_to(snakemake.log[0])
agg = load.read(*(snakemake.input[k] for k in ("results", "published", "ceilings", "envs", "problems")),
                qa_csv=snakemake.input.qa, reproduction_csv=snakemake.input.reproduction,
                records_json=snakemake.input.records)
tables = derive.read({name: snakemake.input[name] for name in derive.TABLES})
index = json.loads(Path(snakemake.input.index).read_text())
verify = pd.read_csv(snakemake.input.verify) if os.path.getsize(snakemake.input.verify) else None
out = snakemake.output
base = os.path.relpath(Path(snakemake.input.index).parent, Path(out.md).parent)
ctx = context.build(agg, tables, index, verify, snakemake.params.fresh_slug, base, config=dict(snakemake.config),
                    lead=snakemake.params.lead_gpu)
Path(out.md).write_text(render.render(ctx, "markdown"))
Path(out.tex).write_text(render.render(ctx, "latex"))
print(f"wrote {out.md} and {out.tex}")
pdf = getattr(out, "pdf", None)
if pdf:
    render.build_pdf(out.tex, pdf, log)
    print(f"wrote {pdf}")
else:
    print(stale_pdf_notice(Path(out.tex).with_suffix(".pdf"), Path(out.tex)))
