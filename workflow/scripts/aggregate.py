"""Rule aggregate: every GPU's result folder (with its qa.csv and reproduction.csv) and the published
tables -> results/aggregate/, then the shared tables derived from them once (rooflab.report.derive)."""
from rooflab.report import derive, load
from rooflab.report.analysis import primary_gpu
from rooflab.workflow import log_to

log_to(snakemake.log[0])
agg = load.collect(snakemake.params.result_dirs, snakemake.params.fresh_slug, snakemake.input.published)
out = snakemake.output
load.write(agg, out.results, out.published, out.ceilings, out.envs, out.problems,
           qa_csv=out.qa, reproduction_csv=out.reproduction, records_json=out.records)
lead = primary_gpu(agg.results, snakemake.params.fresh_slug, snakemake.params.lead_gpu, agg.gpus)
tables = derive.derive(agg, prefer=[lead] if lead else None)
derive.write(tables, {name: out[name] for name in derive.TABLES})
for gpu in agg.gpus:
    part = agg.results[agg.results["gpu"] == gpu]
    print(f"{gpu}: {len(part)} rows ({', '.join(f'{s} {n}' for s, n in part['study'].value_counts().items())})")
print(f"published: {len(agg.published)} rows")
print(*(f"derived {name}: {len(table)} lines" for name, table in tables.items()), sep="\n")
for gpu, names in sorted(agg.records.items()):
    print(f"{gpu}: quality records {', '.join(names) if names else 'none'}")
print(f"problems: {len(agg.problems)}", *agg.problems, sep="\n  ")
