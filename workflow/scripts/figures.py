"""Rule figures: the aggregate and its derived tables -> figures/<name>.png and .pdf for every catalogued
figure, and index.json.

A figure that fails is a placeholder saying why (rooflab.report.figures.render_all), so one bad input never
fails the job: Snakemake deletes the outputs of a failed job, and these are committed files. Should the
rendering fail as a whole, the job keeps the figures already in place (if every one is there) and says so.
"""
import sys
import traceback
from pathlib import Path

from rooflab.report import derive, figures, load
from rooflab.workflow import log_to

log_to(snakemake.log[0])
try:
    agg = load.read(*(snakemake.input[k] for k in ("results", "published", "ceilings", "envs", "problems")),
                    qa_csv=snakemake.input.qa, reproduction_csv=snakemake.input.reproduction,
                    records_json=snakemake.input.records)
    tables = derive.read({name: snakemake.input[name] for name in derive.TABLES})
    index = figures.render_all(agg, tables, Path(snakemake.output.index).parent, snakemake.params.fresh_slug,
                               lead=snakemake.params.lead_gpu)
except Exception:
    traceback.print_exc()
    outputs = [Path(p) for p in snakemake.output]
    if not all(p.is_file() for p in outputs):
        raise
    for path in outputs:
        path.touch()   # kept as they were; newer than the inputs so the paper rule takes them as they are
    print("figures NOT re-rendered (the error above): the previous figures are kept", file=sys.stderr)
else:
    for entry in index:
        print(f"{entry['name']:20} {'drawn' if entry['drawn'] else 'not drawn: ' + entry['reason']}")
