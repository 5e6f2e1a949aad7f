# `snakemake --cores 1 publish`: copy this GPU's fresh results into data/results/<gpu>/ so
# they can be committed; the next render anywhere picks them up. Refused while qa.csv holds
# open quality flags, unless `--config allow_flags=true`. Also copies qa.csv, the per-job
# environment records ({study}/*.env.json) and reproduction.csv where they exist.

localrules: publish


rule publish:
    input:
        FRESH_OUTPUTS,
        qa=QA_CSV,
    output:
        touch(f"logs/{SLUG}/published.done"),
    params:
        target=f"data/results/{SLUG}",
        allow_flags=str(config["allow_flags"]).lower() == "true",
    log:
        f"logs/{SLUG}/publish.log",
    conda:
        "../../envs/report.yaml"
    script:
        "../scripts/publish.py"
