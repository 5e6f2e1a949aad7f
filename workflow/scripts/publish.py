"""Rule publish: this run's results -> data/results/<gpu>/, unless quality flags are still open."""
import shutil
import sys
from pathlib import Path

import pandas as pd

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

fresh, target = qa_csv.parent, Path(snakemake.params.target)
target.mkdir(parents=True, exist_ok=True)
copies = [(Path(p), target / Path(p).name) for p in snakemake.input]
for name in ("reproduction.csv", "reproduction.json"):
    if (fresh / name).exists():
        copies.append((fresh / name, target / name))
copies += [(p, target / p.relative_to(fresh)) for p in sorted(fresh.glob("*/*.env.json"))]
copies += [(p, target / p.relative_to(fresh)) for p in sorted(fresh.glob("benchmarks/*.tsv"))]  # job wall clocks
for source, dest in dict(copies).items():
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, dest)
    print(f"{source} -> {dest} ({dest.stat().st_size} bytes)")
