# Full run, call 1 of 3 (about 9 min): environment record, ceilings, the softmax and decode sweeps.
# bash probes/fullrun_call1.sh COMMIT   (carry .whl; nothing else may use the device until call 3)
# At 0d069c1 on an H200 the jobs took: env_before and calibrate 23 s, softmax 313 s with its merge,
# decode 150 s with its merge, e2e 85 s, attention 293 s with its merge; call 1 ran 487 s of jobs
# (512 s of wall clock with the GPU check of split before it), and call 2 386 s. If softmax grows
# past about 60 s more, move decode to call 2 (which takes it when call 1 did not finish it).
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/nvidia-h200
python3 -m snakemake --cores 1 $G/softmax.csv $G/decode.csv 2>&1 | tee "$OUT/call1.log" | grep -E "^(rule|Finished|Error|.*steps)"
rc=${PIPESTATUS[0]}
tar czf "$OUT/call1.tgz" results logs
python3 -m rooflab.runtime $G 2>/dev/null | tail -15
exit $rc
