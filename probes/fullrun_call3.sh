# The quick profile's `reproduce` against a full run, on any H200 (about 5.5 min: 331 s at c3249fa).
# In the full run's batch (fullrun_call1.sh): REPRODUCE_BATCH=1 bash probes/fullrun_call3.sh COMMIT
#   compares against the run call 2 published on this machine (/tmp/rooflab-published), the same
#   GPU, and stops at once where there is none (the batch lost its machine).
# Later, on any machine: unpack call 2's full.tgz into the working tree, then
#   bash probes/fullrun_call3.sh COMMIT   (carry .whl); reproduction.json records whether the GPU
#   is the full run's.
# Either way, copy reproduction.csv and .json into data/results/$SLUG/.
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/$SLUG
if [ -n "$REPRODUCE_BATCH" ]; then
    [ -d /tmp/rooflab-published ] || { echo "call3: no run published on this machine"; exit 3; }
    rm -rf data/results/$SLUG && cp -r /tmp/rooflab-published data/results/$SLUG
fi
test -s data/results/$SLUG/env.json || { echo "call3: no full run in data/results/$SLUG"; exit 3; }
$SMK --cores 1 reproduce --config profile=quick 2>&1 | tee "$OUT/call3_quick.log" | grep -E "^(rule|Finished|Error|.*steps)"
rc=${PIPESTATUS[0]}
cp $G/reproduction.csv $G/reproduction.json "$OUT/" 2>/dev/null
tar czf "$OUT/quick.tgz" results logs
cat $G/reproduction.json 2>/dev/null | head -30
exit $rc
