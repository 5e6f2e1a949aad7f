"""Rule publish: this run's results -> data/results/<gpu>/, unless quality flags are still open."""
import sys
from pathlib import Path

import pandas as pd

from rooflab.publish import publish
from rooflab.workflow import log_to

log_to(snakemake.log[0])
qa_csv = Path(snakemake.input.qa)
flags = pd.read_csv(qa_csv)
open_flags = int(flags["open"].astype(str).str.lower().eq("true").sum()) if len(flags) else 0
if open_flags and not snakemake.params.allow_flags:
    sys.exit(f"publish: {qa_csv} holds {open_flags} open quality flag{'s' if open_flags != 1 else ''}; "
             f"read it, re-run the flagged cases, or publish anyway with --config allow_flags=true")
if open_flags:
    print(f"publishing with {open_flags} open quality flags (allow_flags=true); {qa_csv.name} goes along")

publish(qa_csv.parent, Path(snakemake.params.target), list(snakemake.input))
