# `snakemake --cores 1 publish`: copy this GPU's fresh results into data/results/<gpu>/ so
# they can be committed; the next render anywhere picks them up.

rule publish:
    input:
        FRESH_OUTPUTS,
    output:
        touch(f"logs/{SLUG}/published.done"),
    params:
        target=f"data/results/{SLUG}",
    log:
        f"logs/{SLUG}/publish.log",
    shell:
        "mkdir -p {params.target} && cp {input} {params.target}/ && ls -l {params.target} > {log}"
