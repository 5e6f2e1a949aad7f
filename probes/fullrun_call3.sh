# After a full run (fullrun_call1.sh, fullrun_call2.sh) is in data/results/nvidia-h200/ of the
# working tree (unpacked from call 2's full.tgz): the quick profile on any H200, compared against it
# (`reproduce`; reproduction.json records whether the GPU is the one of the full run). About 4.5
# min; a machine of its own is fine, so the full run's two calls need no third one in a row.
# bash probes/fullrun_call3.sh COMMIT   (carry .whl), then copy reproduction.csv and .json into
# data/results/nvidia-h200/.
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/nvidia-h200
test -s data/results/nvidia-h200/env.json || { echo "call3: no full run in data/results/nvidia-h200"; exit 3; }
python3 -m snakemake --cores 1 reproduce --config profile=quick 2>&1 | tee "$OUT/call3_quick.log" | grep -E "^(rule|Finished|Error|.*steps)"
rc=${PIPESTATUS[0]}
cp $G/reproduction.csv $G/reproduction.json "$OUT/" 2>/dev/null
tar czf "$OUT/quick.tgz" results logs
cat $G/reproduction.json 2>/dev/null | head -30
exit $rc
