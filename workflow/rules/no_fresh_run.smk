# Without a CUDA GPU nothing is measured, so there is no fresh run to publish or reproduce:
# these targets stand in for workflow/rules/publish.smk and reproduce.smk and fail with one
# line (the Snakefile's onstart says it before any job; the shell line is for --no-hooks).
from rooflab.workflow import no_fresh_run_message

localrules: publish, reproduce


rule publish:
    params:
        message=no_fresh_run_message("publish"),
    log:
        "logs/no_fresh_run/publish.log",
    conda:
        "../../envs/report.yaml"
    shell:
        "echo {params.message:q} | tee {log} >&2; exit 1"


rule reproduce:
    params:
        message=no_fresh_run_message("reproduce"),
    log:
        "logs/no_fresh_run/reproduce.log",
    conda:
        "../../envs/report.yaml"
    shell:
        "echo {params.message:q} | tee {log} >&2; exit 1"
