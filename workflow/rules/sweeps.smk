# The kernel sweeps (softmax, attention, decode): one job per study and dtype, so an
# interrupted run loses little; then one CSV per study. A change to a kernel re-measures.
import glob


wildcard_constraints:
    study="softmax|attention|decode",
    dtype="float32|float16|bfloat16",


rule sweep:
    input:
        ceilings=rules.calibrate.output.csv,
        code=lambda w: sorted(glob.glob("kernels/**/*.py", recursive=True) + [f"rooflab/studies/{w.study}.py"]),
    output:
        csv=f"{FRESH}/{{study}}/{{dtype}}.csv",
    params:
        gpu=SLUG,
        study=lambda w: config[w.study],
        grid=lambda w: config[w.study]["grid"][PROFILE],
        bench=dict(config["bench"][PROFILE], graph_below_bytes=config["bench"]["graph_below_bytes"],
                   case_timeout_s=config["bench"]["case_timeout_s"]),
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
        lambda w: expand(f"{FRESH}/{w.study}/{{dtype}}.csv", dtype=config[w.study]["dtypes"]),
    output:
        csv=f"{FRESH}/{{study}}.csv",
    log:
        f"logs/{SLUG}/{{study}}_merge.log",
    conda:
        "../../envs/measure.yaml"
    script:
        "../scripts/merge_csv.py"
