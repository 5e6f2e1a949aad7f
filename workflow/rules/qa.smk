# Quality gates over this run's final rows (rooflab/qa.py): one line per open flag in qa.csv,
# header only when nothing was flagged. `publish` refuses a run with open flags.

localrules: qa


rule qa:
    input:
        csv=[f for f in FRESH_OUTPUTS if f.endswith(".csv") and not f.endswith("ceilings.csv")],
        ceilings=rules.calibrate.output.csv,
    output:
        csv=QA_CSV,
    params:
        thresholds=config["qa"],
    log:
        f"logs/{SLUG}/qa.log",
    conda:
        "../../envs/report.yaml"
    script:
        "../scripts/qa.py"
