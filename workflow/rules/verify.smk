# Correctness of every kernel in Triton's CPU interpreter on small, irregular shapes,
# against float64 references. Runs with or without a GPU; the paper reports the table.
# A change to a kernel, a study or the checking code (harness, interpreter set-up, inputs' seed)
# re-runs it.
import glob

rule verify:
    input:
        code=sorted(glob.glob("kernels/**/*.py", recursive=True) + glob.glob("rooflab/studies/*.py"))
        + ["rooflab/bench.py", "rooflab/interpreter.py", "rooflab/verify.py"],
    output:
        csv=VERIFY_CSV,
    params:
        verify=config["verify"],
    log:
        "logs/verify.log",
    conda:
        "../../envs/verify.yaml"
    script:
        "../scripts/verify.py"
