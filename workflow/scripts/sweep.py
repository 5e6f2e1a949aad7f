"""Rule sweep: one study at one dtype over the profile's grid -> CSV rows (see rooflab.bench), and
the job's own environment record (GPU, clocks and throttle reasons at its start and end and around
every case, other processes on the GPU, host load)."""
from rooflab import precompile, studies
from rooflab.bench import BenchConfig, Sweep, run_sweep
from rooflab.gpus import read_ceilings, write_json
from rooflab.gpuslots import claim_for_job, own_ceilings
from rooflab.gpustate import job_record, start_job
from rooflab.grid import expand
from rooflab.workflow import log_to, within_budget

log_to(snakemake.log[0])
SLOT = claim_for_job(snakemake.resources)   # this job's own GPU and cores on a multi-GPU host (rooflab/gpuslots.py)
study = studies.load(snakemake.wildcards.study)
cfg = snakemake.params.study
shapes = within_budget(study, study.shapes(expand(snakemake.params.grid)), snakemake.wildcards.dtype, cfg)
# torch.compile's graphs, compiled in parallel processes before the GPU is warmed up (rooflab/precompile.py)
precompile_s = precompile.warm(study.STUDY, shapes, [snakemake.wildcards.dtype], list(cfg["impls"]))
monitor, record = start_job()
record["precompile_s"] = round(precompile_s, 3)
print(f"GPU warmed up in {record['warm_up']['seconds']} s: SM clock {record['warm_up']['sm_mhz_readings']} MHz")
sweep = Sweep(
    study=study,
    gpu=snakemake.params.gpu,
    shapes=shapes,
    dtypes=[snakemake.wildcards.dtype],
    impls=list(cfg["impls"]),
    ceilings=read_ceilings(own_ceilings(SLOT, snakemake.input.ceilings, snakemake.config)),
    bench=BenchConfig(**snakemake.params.bench),
    monitor=monitor,
    steady_mhz=record["warm_up"]["steady_sm_mhz"],
)


def finish(stopped: str | None = None) -> None:
    """The job's record, written at its end, or by the watchdog before it ends a hung job (so that
    Snakemake keeps the rows: a job missing an output loses them all)."""
    try:
        record.update(end=job_record(monitor))
    except Exception as exc:  # noqa: BLE001  the GPU's state unreadable: the record says so
        record.update(end={"error": str(exc)[:300]})
    record.update(cases=sweep.cases_log, **({"stopped": stopped} if stopped else {}))
    write_json(snakemake.output.env, record)


rows = run_sweep(sweep, snakemake.output.csv, before_exit=lambda: finish("a case timed out"))
finish()
print(f"{rows} rows -> {snakemake.output.csv}")
