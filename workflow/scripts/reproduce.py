"""Rule reproduce: fresh study CSVs against the committed ones -> reproduction.csv/.png/.pdf, and reproduction.json
naming the two runs (rooflab.reproduce.provenance)."""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from rooflab import measuring_code, reproduce  # noqa: E402
from rooflab.gpus import write_json  # noqa: E402
from rooflab.schema import read_results  # noqa: E402
from rooflab.workflow import log_to  # noqa: E402

log_to(snakemake.log[0])
committed_dir = Path("data/results") / snakemake.params.gpu
if not committed_dir.is_dir():
    sys.exit(f"reproduce: no committed results at {committed_dir}/ to compare this run with "
             f"(publish a run of this GPU first, or fetch its data/results folder)")
fresh_paths = [Path(p) for p in snakemake.input.fresh]
committed_paths = [committed_dir / p.name for p in fresh_paths if (committed_dir / p.name).exists()]
for p in fresh_paths:
    if not (committed_dir / p.name).exists():
        print(f"no committed {committed_dir / p.name}: every row of {p.stem} counts as new")
if not committed_paths:
    sys.exit(f"reproduce: {committed_dir}/ holds none of {', '.join(p.name for p in fresh_paths)}")

fresh = pd.concat([read_results(p) for p in fresh_paths], ignore_index=True)
committed = pd.concat([read_results(p) for p in committed_paths], ignore_index=True)
table = reproduce.compare(committed, fresh, tolerance=snakemake.params.tolerance)
table.to_csv(snakemake.output.csv, index=False)
envs = [json.loads(Path(p).read_text()) for p in (committed_dir / "env.json", snakemake.input.env)]
write_json(snakemake.output.json, reproduce.provenance(*envs, snakemake.params.tolerance, snakemake.params.min_ms,
                                                      code_id=measuring_code.from_commit))

fig, ax = plt.subplots(figsize=(5.5, 5.0), layout="constrained")
reproduce.draw(table, ax, tolerance=snakemake.params.tolerance)
ax.set_title(f"{committed_dir.name}: fresh run against the committed one")
fig.savefig(snakemake.output.png, dpi=150)
fig.savefig(snakemake.output.pdf)
plt.close(fig)

print(f"committed {committed_dir}/ against {Path(snakemake.output.csv).parent}/ "
      f"(tolerance {snakemake.params.tolerance:.0%}, share over cases >= {snakemake.params.min_ms} ms):")
print(reproduce.summary(table, min_ms=snakemake.params.min_ms).to_string(index=False))
