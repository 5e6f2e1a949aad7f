# End-to-end: one decoder block in prefill and decode, PyTorch defaults against the same
# block with our kernels swapped in, time broken down by part (Amdahl's law in the paper).
import glob

rule e2e:
    input:
        ceilings=rules.calibrate.output.csv,
        code=sorted(glob.glob("kernels/**/*.py", recursive=True)) + ["rooflab/e2e.py"],
    output:
        csv=f"{FRESH}/e2e.csv",
    params:
        gpu=SLUG,
        model=config["e2e"],
        grid=config["e2e"]["grid"][PROFILE],
        reps={"quick": 10, "full": 30}[PROFILE],
    log:
        f"logs/{SLUG}/e2e.log",
    resources:
        gpu=1,
    conda:
        "../../envs/measure.yaml"
    script:
        "../scripts/e2e.py"
