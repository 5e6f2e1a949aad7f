# Full run, call 1 of 3 (about 9 min): environment record, ceilings, the softmax and decode sweeps.
# bash probes/fullrun_call1.sh COMMIT   (carry .whl; nothing else may use the device until call 3)
# At c899ebb on an H200 the jobs took: env_before and calibrate 22 s, softmax 337 s with its merge,
# decode 164 s with its merge, e2e 83 s, attention 305 s with its merge; call 1 ran 523 s of jobs
# (552 s of wall clock with a 30 s check before it), within 48 s of a call's 10 minutes, and call 2
# 394 s. If softmax grows, move decode to call 2 (which takes it when call 1 did not finish it).
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/nvidia-h200
python3 -m snakemake --cores 1 $G/softmax.csv $G/decode.csv 2>&1 | tee "$OUT/call1.log" | grep -E "^(rule|Finished|Error|.*steps)"
rc=${PIPESTATUS[0]}
tar czf "$OUT/call1.tgz" results logs
python3 -m rooflab.runtime $G 2>/dev/null | tail -15
exit $rc
