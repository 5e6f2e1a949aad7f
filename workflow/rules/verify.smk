# Correctness of every kernel in Triton's CPU interpreter on small, irregular shapes,
# against float64 references. Runs with or without a GPU; the paper reports the table.

rule verify:
    output:
        csv=VERIFY_CSV,
    params:
        verify=config["verify"],
    log:
        "logs/verify.log",
    conda:
        "../../envs/report.yaml"
    script:
        "../scripts/verify.py"
