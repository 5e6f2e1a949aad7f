# Full run, call 2 of 3 (about 8 min): the decode and attention sweeps, on the machine call 1 left
# warm, or on a fresh one given call 1's results/ and logs/ if it is the same GPU (fullrun_call1.sh).
# Outputs already made are kept: mtime is not a rerun trigger here, since the tree is copied anew
# each call.
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/nvidia-h200
T="--rerun-triggers params input software-env code"
test -s $G/softmax.csv || { echo "call2: no softmax.csv from call 1 on this machine"; exit 3; }
. probes/same_gpu.sh $G || exit 5
python3 -m snakemake --cores 1 $G/decode.csv $G/attention.csv $T 2>&1 | tee "$OUT/call2.log" | grep -E "^(rule|Finished|Error|.*steps)"
rc=${PIPESTATUS[0]}
tar czf "$OUT/call2.tgz" results logs
exit $rc
