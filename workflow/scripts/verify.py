"""Rule verify: every kernel checked in Triton's CPU interpreter -> results/verify/interpreter.csv."""
from rooflab import interpreter

interpreter.enable()  # TRITON_INTERPRET=1 before anything imports the kernels

import pandas as pd  # noqa: E402

from rooflab.verify import VERIFY_COLUMNS, run  # noqa: E402
from rooflab.workflow import log_to  # noqa: E402

log_to(snakemake.log[0])
rows = run(dict(snakemake.params.verify))
pd.DataFrame(rows, columns=VERIFY_COLUMNS).to_csv(snakemake.output.csv, index=False)
failed = [r for r in rows if r["status"] != "ok"]
print(f"{len(rows) - len(failed)} passed, {len(failed)} failed")
