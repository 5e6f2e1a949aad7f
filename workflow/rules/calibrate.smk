# The GPU's own ceilings: copy, read-only and write-only bandwidth over buffers many times
# the L2, dense fp16/bf16 matmul, the launch rate of an empty Triton kernel; plus the datasheet values.

rule calibrate:
    input:
        env=rules.env_before.output.json,
    output:
        csv=f"{FRESH}/ceilings.csv",
    params:
        buffer_gib=config["calibrate"]["buffer_gib"],
        matmul_n=config["calibrate"]["matmul_n"],
        read_sizes_mib=config["calibrate"]["read_sizes_mib"],
        copy_sizes_mib=config["calibrate"]["copy_sizes_mib"],
    benchmark:
        f"{FRESH}/benchmarks/calibrate.tsv"
    log:
        f"logs/{SLUG}/calibrate.log",
    resources:
        gpu=1,
    conda:
        "../../envs/measure.yaml"
    script:
        "../scripts/calibrate.py"
