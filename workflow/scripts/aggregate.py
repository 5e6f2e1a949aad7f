"""Rule aggregate: every GPU's result folder (with its qa.csv and reproduction.csv) and the published
tables -> results/aggregate/."""
from rooflab.report import load
from rooflab.workflow import log_to

log_to(snakemake.log[0])
agg = load.collect(snakemake.params.result_dirs, snakemake.params.fresh_slug, snakemake.input.published)
out = snakemake.output
load.write(agg, out.results, out.published, out.ceilings, out.envs, out.problems,
           qa_csv=out.qa, reproduction_csv=out.reproduction, records_json=out.records)
for gpu in agg.gpus:
    part = agg.results[agg.results["gpu"] == gpu]
    print(f"{gpu}: {len(part)} rows ({', '.join(f'{s} {n}' for s, n in part['study'].value_counts().items())})")
print(f"published: {len(agg.published)} rows")
for gpu, names in sorted(agg.records.items()):
    print(f"{gpu}: quality records {', '.join(names) if names else 'none'}")
print(f"problems: {len(agg.problems)}", *agg.problems, sep="\n  ")
