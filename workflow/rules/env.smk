# Environment record: versions, GPU properties and clock state before the sweeps, and the
# clock state again after them, so throttling during the run shows in env.json.

rule env_before:
    output:
        json=f"{FRESH}/env_before.json",
    params:
        # a run under another profile (e.g. `reproduce --config profile=quick` after a full run)
        # records its own environment and start time, and re-measures the ceilings after it
        profile=config["profile"],
    benchmark:
        f"{FRESH}/benchmarks/env_before.tsv"
    log:
        f"logs/{SLUG}/env_before.log",
    resources:
        gpu=1,
    conda:
        "../../envs/measure.yaml"
    script:
        "../scripts/env_record.py"


rule env:
    input:
        before=rules.env_before.output.json,
        measured=[f for f in FRESH_OUTPUTS if not f.endswith("env.json")],
    output:
        json=f"{FRESH}/env.json",
    log:
        f"logs/{SLUG}/env.log",
    conda:
        "../../envs/measure.yaml"
    script:
        "../scripts/env_finish.py"
