"""Rule verify: every kernel checked in Triton's CPU interpreter -> results/verify/interpreter.csv."""
from rooflab import interpreter

interpreter.enable()  # TRITON_INTERPRET=1 before anything imports the kernels

import pandas as pd  # noqa: E402

from rooflab.verify import VERIFY_COLUMNS, run  # noqa: E402
from rooflab.workflow import log_to  # noqa: E402

log_to(snakemake.log[0])
rows = run(dict(snakemake.params.verify))
pd.DataFrame(rows, columns=VERIFY_COLUMNS).to_csv(snakemake.output.csv, index=False)
counts = {status: sum(r["status"] == status for r in rows) for status in ("ok", "unsupported")}
print(f"interpreter checks: {counts['ok']} ok, {counts['unsupported']} outside a strategy's documented limit, "
      f"{len(rows) - sum(counts.values())} incorrect or failing")
