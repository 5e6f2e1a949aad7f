# The kernel sweeps (softmax, attention, decode): one job per study and dtype, so an
# interrupted run loses little; then one CSV per study, after the quality gates (rooflab.qa)
# have had every flagged case measured once more. A change to a kernel re-measures.
import glob

BENCH = dict({k: v for k, v in config["bench"].items() if k not in ("quick", "full")}, **config["bench"][PROFILE])


wildcard_constraints:
    study="softmax|attention|decode",
    dtype="float32|float16|bfloat16",


rule sweep:
    input:
        ceilings=rules.calibrate.output.csv,
        code=lambda w: sorted(glob.glob("kernels/**/*.py", recursive=True) + [f"rooflab/studies/{w.study}.py"]),
    output:
        csv=f"{FRESH}/{{study}}/{{dtype}}.csv",
        env=f"{FRESH}/{{study}}/{{dtype}}.env.json",
    params:
        gpu=SLUG,
        study=lambda w: config[w.study],
        grid=lambda w: config[w.study]["grid"][PROFILE],
        bench=BENCH,
    benchmark:
        f"{FRESH}/benchmarks/sweep_{{study}}_{{dtype}}.tsv"
    log:
        f"logs/{SLUG}/{{study}}_{{dtype}}.log",
    resources:
        gpu=1,
    conda:
        "../../envs/measure.yaml"
    script:
        "../scripts/sweep.py"


rule merge_sweep:
    input:
        csv=lambda w: expand(f"{FRESH}/{w.study}/{{dtype}}.csv", dtype=config[w.study]["dtypes"]),
        ceilings=rules.calibrate.output.csv,
    output:
        csv=f"{FRESH}/{{study}}.csv",
        env=f"{FRESH}/{{study}}/remeasured.env.json",
    params:
        gpu=SLUG,
        study=lambda w: config[w.study],
        bench=BENCH,
        qa=config["qa"],
    benchmark:
        f"{FRESH}/benchmarks/merge_{{study}}.tsv"
    log:
        f"logs/{SLUG}/{{study}}_merge.log",
    resources:
        gpu=1,
    conda:
        "../../envs/measure.yaml"
    script:
        "../scripts/merge_sweep.py"
