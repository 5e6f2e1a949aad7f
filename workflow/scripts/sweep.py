"""Rule sweep: one study at one dtype over the profile's grid -> CSV rows (see rooflab.bench)."""
from rooflab import studies
from rooflab.bench import BenchConfig, Sweep, run_sweep
from rooflab.gpus import read_ceilings
from rooflab.grid import expand
from rooflab.workflow import log_to, within_budget

log_to(snakemake.log[0])
study = studies.load(snakemake.wildcards.study)
cfg = snakemake.params.study
shapes = within_budget(study, study.shapes(expand(snakemake.params.grid)), snakemake.wildcards.dtype, cfg)
sweep = Sweep(
    study=study,
    gpu=snakemake.params.gpu,
    shapes=shapes,
    dtypes=[snakemake.wildcards.dtype],
    impls=list(cfg["impls"]),
    ceilings=read_ceilings(snakemake.input.ceilings),
    bench=BenchConfig(**snakemake.params.bench),
)
rows = run_sweep(sweep, snakemake.output.csv)
print(f"{rows} rows -> {snakemake.output.csv}")
