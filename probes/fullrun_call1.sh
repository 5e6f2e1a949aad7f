# Full run, call 1 of 3 (about 8 min): environment record, ceilings, the softmax and decode sweeps.
# bash probes/fullrun_call1.sh COMMIT   (carry .whl; nothing else may use the device until call 3)
# At 31551e4 on an H200 the jobs took: env_before and calibrate 23 s, softmax 289 s with its merge,
# decode 145 s with its merge, e2e 83 s, attention 313 s with its merge; so call 1 (about 470 s)
# and call 2 (about 410 s) both stay well inside a call's 10 minutes.
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/nvidia-h200
python3 -m snakemake --cores 1 $G/softmax.csv $G/decode.csv 2>&1 | tee "$OUT/call1.log" | grep -E "^(rule|Finished|Error|.*steps)"
rc=${PIPESTATUS[0]}
tar czf "$OUT/call1.tgz" results logs
python3 -m rooflab.runtime $G 2>/dev/null | tail -15
exit $rc
