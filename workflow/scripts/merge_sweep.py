"""Rule merge_sweep: one study's per-dtype CSVs -> one schema-checked CSV, after the quality gates.

Every case rooflab.qa flags (ours against the strategy it chose, fp16 against bf16, a share of
a ceiling above its limit, too few samples) is measured once more on this GPU, all its
implementations together, and its rows are replaced; what stays flagged is the qa rule's.
"""
import pandas as pd

from rooflab import qa, studies
from rooflab.bench import BenchConfig, Sweep, remeasure
from rooflab.gpus import read_ceilings, write_json
from rooflab.gpuslots import claim_for_job, own_ceilings
from rooflab.gpustate import job_record, start_job
from rooflab.schema import columns, read_results, validate_frame
from rooflab.workflow import log_to

log_to(snakemake.log[0])
SLOT = claim_for_job(snakemake.resources)   # this job's own GPU and cores on a multi-GPU host (rooflab/gpuslots.py)
name = snakemake.wildcards.study
# a dtype whose every shape the memory budget skipped (rooflab.workflow.within_budget) wrote a header alone
measured = [path for path in snakemake.input.csv if not pd.read_csv(path, nrows=1).empty]
if not measured:
    raise SystemExit(f"{name}: no rows in any dtype's sweep ({', '.join(snakemake.input.csv)}): every shape skipped")
frame = pd.concat([read_results(path) for path in measured], ignore_index=True)
# the gate takes only the sized ceilings' profile (a factor over the whole-buffer rate) from calibrate's
flagged = qa.flags(frame, snakemake.params.qa, read_ceilings(snakemake.input.ceilings))
cases = [(shape, dtype) for study, dtype, shape in qa.cases(flagged) if study == name]
record = {"flags": flagged.to_dict(orient="records"), "remeasured": []}
if cases:
    print(f"{len(flagged)} quality flags; measuring {len(cases)} cases again:\n{flagged.to_string()}")
    monitor, started = start_job()
    record.update(started)
    sweep = Sweep(study=studies.load(name), gpu=snakemake.params.gpu, shapes=[], dtypes=[],
                  impls=list(snakemake.params.study["impls"]), ceilings=read_ceilings(own_ceilings(SLOT, snakemake.input.ceilings, snakemake.config)),
                  bench=BenchConfig(**snakemake.params.bench), monitor=monitor,
                  steady_mhz=record["warm_up"]["steady_sm_mhz"])
    rows = remeasure(sweep, frame.astype(object).where(frame.notna(), None).to_dict(orient="records"), cases)
    frame = pd.DataFrame(rows, columns=list(columns(name)))
    record.update(remeasured=[dict(shape, dtype=dtype) for shape, dtype in cases], cases=sweep.cases_log,
                  end=job_record(monitor))
validate_frame(frame, snakemake.output.csv).to_csv(snakemake.output.csv, index=False)
write_json(snakemake.output.env, record)
print(frame.groupby(["dtype", "status"]).size().to_string())
