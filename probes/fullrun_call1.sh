# Full run, call 1 of 3 (about 6 min): environment record, ceilings, the softmax sweep.
# bash probes/fullrun_call1.sh COMMIT   (carry .whl; nothing else may use the device until call 3)
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/nvidia-h200
python3 -m snakemake --cores 1 $G/softmax.csv 2>&1 | tee "$OUT/call1.log" | grep -E "^(rule|Finished|Error|.*steps)" 
rc=${PIPESTATUS[0]}
tar czf "$OUT/call1.tgz" results logs
python3 -m rooflab.runtime $G 2>/dev/null | tail -15
exit $rc
