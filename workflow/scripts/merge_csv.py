"""Rule merge_sweep: the per-dtype CSVs of one study -> one schema-checked CSV."""
import pandas as pd

from rooflab.schema import read_results, validate_frame
from rooflab.workflow import log_to

log_to(snakemake.log[0])
frame = pd.concat([read_results(path) for path in snakemake.input], ignore_index=True)
validate_frame(frame, snakemake.output.csv).to_csv(snakemake.output.csv, index=False)
print(frame.groupby(["dtype", "status"]).size().to_string())
