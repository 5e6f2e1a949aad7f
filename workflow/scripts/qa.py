"""Rule qa: this run's study CSVs -> qa.csv, one line per open quality flag."""
import pandas as pd

from rooflab import qa
from rooflab.gpus import read_ceilings
from rooflab.schema import read_results
from rooflab.workflow import log_to

log_to(snakemake.log[0])
frame = pd.concat([read_results(path) for path in snakemake.input.csv], ignore_index=True)
table = qa.report(frame, dict(snakemake.params.thresholds), read_ceilings(snakemake.input.ceilings))
table.to_csv(snakemake.output.csv, index=False)
print(f"{len(table)} open quality flags over {len(frame)} rows ({int(table['remeasured'].sum())} after re-measuring)")
if len(table):
    print(table.groupby(["study", "gate"]).size().to_string())
    print(table[["study", "gate", "dtype", "impl", "shape", "detail"]].to_string(index=False))
