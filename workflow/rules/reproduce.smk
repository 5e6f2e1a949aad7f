# `snakemake --cores 1 reproduce`: this run's study CSVs against the committed ones of the same
# GPU (data/results/<gpu>/): one verdict per case and timing, a per-study summary and a figure.
# Not part of `all`; `publish` copies reproduction.csv when it exists.
from pathlib import Path

localrules: reproduce

COMMITTED = f"data/results/{SLUG}"


rule reproduce:
    input:
        fresh=[f for f in FRESH_OUTPUTS if f.endswith(".csv") and not f.endswith("ceilings.csv")],
        committed=sorted(str(p) for p in Path(COMMITTED).glob("*.csv") if p.name != "ceilings.csv"),
        env=f"{FRESH}/env.json",
    output:
        csv=f"{FRESH}/reproduction.csv",
        json=f"{FRESH}/reproduction.json",   # which two runs (commit, GPU UUID, time, profile) it compares
        png=f"{FRESH}/reproduction.png",
        pdf=f"{FRESH}/reproduction.pdf",
    params:
        gpu=SLUG,
        tolerance=0.05,    # medians this close (or overlapping intervals) reproduce
        min_ms=0.020,      # the summary's share counts cases at least this long (committed)
    log:
        f"logs/{SLUG}/reproduce.log",
    conda:
        "../../envs/report.yaml"
    script:
        "../scripts/reproduce.py"
