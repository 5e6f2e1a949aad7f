"""Rule figures: the aggregate -> figures/<name>.png and .pdf for every catalogued figure, and index.json."""
from pathlib import Path

from rooflab.report import figures, load
from rooflab.workflow import log_to

log_to(snakemake.log[0])
agg = load.read(*(snakemake.input[k] for k in ("results", "published", "ceilings", "envs", "problems")),
                qa_csv=snakemake.input.qa, reproduction_csv=snakemake.input.reproduction,
                records_json=snakemake.input.records)
index = figures.render_all(agg, Path(snakemake.output.index).parent, snakemake.params.fresh_slug)
for entry in index:
    print(f"{entry['name']:20} {'drawn' if entry['drawn'] else 'not drawn: ' + entry['reason']}")
