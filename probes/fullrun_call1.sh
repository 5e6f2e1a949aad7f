# Full run, call 1 of 2 (about 7.5 min): environment record, ceilings, the softmax and e2e sweeps.
# bash probes/fullrun_call1.sh COMMIT   (carry .whl and .devcache; nothing else may use the device until call 2)
# Call 2 continues on the machine this call leaves warm (results/ stays there) and stops at once on
# another GPU (`same_gpu.sh`): the warm machine is given back 30 s after a call ends, so call 2 must
# be asked for at once. A machine lost between the calls loses the run (one run never spans two
# GPUs); it starts again from call 1. Snakemake is stopped cleanly after SNAKEMAKE_LIMIT_S (560 s),
# inside the device's 10-minute limit; the same call again on the warm machine then resumes the DAG.
# Measured at ae54981 on two H200s: env_before, calibrate and the softmax sweep with its merge took
# 355 s of jobs on one host and 417 s on another, nearly all of the difference in first calls
# (compiling); e2e took 82 s at e0c1a10.
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/nvidia-h200
timeout -s INT "${SNAKEMAKE_LIMIT_S:-560}" python3 -m snakemake --cores 1 --rerun-incomplete $G/softmax.csv $G/e2e.csv \
    2>&1 | tee "$OUT/call1.log" | grep -E "^(rule|Finished|Error|.*steps)"
rc=${PIPESTATUS[0]}
tar czf "$OUT/call1.tgz" results logs
save_compile_cache
python3 -m rooflab.runtime $G 2>/dev/null | tail -12
[ "$rc" -eq 0 ] || echo "call1: Snakemake stopped (exit $rc); call 1 again on this machine resumes"
exit $rc
