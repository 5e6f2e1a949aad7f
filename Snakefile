# Roofline Lab: `snakemake --cores 1`.
# With a CUDA GPU: record the environment, measure the GPU's ceilings, run the sweeps, then
# aggregate every GPU's results and render figures and the paper. Without one: check the
# kernels in Triton's CPU interpreter and render from the results committed under data/.
import subprocess
import sys

from snakemake.utils import min_version, validate

min_version("9.0")

configfile: "config/config.yaml"
validate(config, "workflow/schemas/config.schema.yaml")

# Scripts import `rooflab` and `kernels` from the checkout.
sys.path.insert(0, workflow.basedir)
from rooflab import config_checks  # noqa: E402

config_checks.check(config)   # rules across keys the schema cannot state (heads_q vs heads_kv, impl names)
from rooflab.gpuslots import check_run as check_gpu_slots  # noqa: E402
from rooflab.workflow import detect_gpu, importable_from, preflight, result_dirs, stale_pdf_message  # noqa: E402

importable_from(workflow.basedir)

DEVICE, SLUG = detect_gpu(config["device"])       # (None, None) on a machine without a CUDA GPU
# A local run on a host with GPUs: up to K GPU jobs at once (--resources gpu=K; default every GPU),
# each on its own GPU and share of the cores (rooflab/gpuslots.py); checked here, before any job.
GPU_SLOTS = check_gpu_slots(workflow.global_resources.get("gpu"), workflow.local_exec) if SLUG else None
PROFILE = config["profile"]
SWEEPS = [s for s in ("softmax", "attention", "decode") if s in config["studies"]] if SLUG else []
FRESH = f"results/{SLUG}" if SLUG else None
FRESH_OUTPUTS = ([f"{FRESH}/env.json", f"{FRESH}/ceilings.csv"] + [f"{FRESH}/{s}.csv" for s in SWEEPS]
                 + ([f"{FRESH}/e2e.csv"] if "e2e" in config["studies"] else [])) if SLUG else []
RESULT_DIRS = result_dirs("data/results", fresh=FRESH)
FRESH_SLUG = SLUG
QA_CSV = f"{FRESH}/qa.csv" if SLUG else None      # open quality flags of the fresh run
VERIFY_CSV = "results/verify/interpreter.csv"
HAS_LATEX = subprocess.run(["which", "latexmk"], capture_output=True).returncode == 0
STALE_PDF = []      # onstart's warning about a PDF this run does not rebuild (stale_pdf_message)

if SLUG:
    include: "workflow/rules/env.smk"
    include: "workflow/rules/calibrate.smk"
    include: "workflow/rules/sweeps.smk"
    include: "workflow/rules/e2e.smk"
    include: "workflow/rules/qa.smk"
    include: "workflow/rules/publish.smk"
    include: "workflow/rules/reproduce.smk"
else:
    include: "workflow/rules/no_fresh_run.smk"    # publish / reproduce: say there is no run here
include: "workflow/rules/verify.smk"
include: "workflow/rules/report.smk"

if config.get("cluster", {}).get("cpu_rules", "local") == "local":
    localrules: verify, aggregate, figures, paper  # under a cluster executor, CPU work stays on the submitting node


onstart:
    # Before any job (not in a dry run): one line, not a job's traceback, when a forced device has
    # no GPU here to run on, or publish/reproduce are asked for on a machine that measured nothing.
    problem = preflight(config["device"], SLUG, workflow.local_exec,
                        targets={job.rule.name for job in workflow.dag.targetjobs},
                        gpu_rules={job.rule.name for job in workflow.dag.needrun_jobs()
                                   if job.rule.resources.get("gpu")})
    if problem:
        raise SystemExit(problem)
    # The paper rendered here without latexmk leaves a committed PDF behind: say so once the run ends.
    STALE_PDF.append(stale_pdf_message(HAS_LATEX, "paper/paper.pdf",
                                       "paper" in {job.rule.name for job in workflow.dag.needrun_jobs()}))


onsuccess:
    if STALE_PDF and STALE_PDF[-1]:
        print(STALE_PDF[-1], file=sys.stderr)


rule all:
    input:
        FRESH_OUTPUTS,
        [QA_CSV] if SLUG else [],
        VERIFY_CSV,
        expand("figures/{name}.{ext}", name=FIGURES, ext=["png", "pdf"]),
        "paper/paper.md",
        "paper/paper.tex",
        ["paper/paper.pdf"] if HAS_LATEX else [],
