# End-to-end: one decoder block in prefill and decode, PyTorch defaults against the same
# block with our kernels swapped in, time broken down by part (Amdahl's law in the paper).
import glob

rule e2e:
    input:
        ceilings=rules.calibrate.output.csv,
        code=sorted(glob.glob("kernels/**/*.py", recursive=True)) + ["rooflab/e2e.py"],
    output:
        csv=f"{FRESH}/e2e.csv",
        env=f"{FRESH}/e2e/e2e.env.json",
    params:
        gpu=SLUG,
        model=config["e2e"],
        grid=config["e2e"]["grid"][PROFILE],
        reps=config["bench"]["min_reps"],
        trials=config["bench"][PROFILE]["trials"],
        qa=config["qa"],
    benchmark:
        f"{FRESH}/benchmarks/e2e.tsv"
    log:
        f"logs/{SLUG}/e2e.log",
    resources:
        gpu=1,
    conda:
        "../../envs/measure.yaml"
    script:
        "../scripts/e2e.py"
