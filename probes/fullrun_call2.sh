# Full run, call 2 of 2 (about 8 min): the decode and attention sweeps, the run record and quality
# flags, then `publish` into data/results/ here, returned as full.tgz and kept in
# /tmp/rooflab-published for fullrun_call3.sh in the same batch. Run on the machine call 1 left
# warm, in the same batch of device calls (fullrun_call1.sh says why). Outputs already made are
# kept ($KEEP, device_setup.sh). Snakemake is stopped cleanly after SNAKEMAKE_LIMIT_S (560 s);
# the same call again on the warm machine then resumes, and once the run is published a repeat
# does nothing (a new call's tree holds the committed data/results/ again, so publishing twice
# would return those).
# Measured at ae54981 on an H200: the decode and attention sweeps with their merges took 468 s of
# jobs (474 s of wall clock); at c3249fa, on carried compile caches, 441 s of jobs (467 s of wall
# clock with the run record, flags and publish).
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/$SLUG
PUBLISHED=/tmp/rooflab-published
[ -d $PUBLISHED ] && { echo "call2: published already on this machine (full.tgz came back with that call)"; exit 0; }
test -s $G/softmax.csv -a -s $G/e2e.csv || { echo "call2: no softmax.csv and e2e.csv from call 1 on this machine"; exit 3; }
. probes/same_gpu.sh $G || exit 5
timeout -s INT "${SNAKEMAKE_LIMIT_S:-560}" $SMK --cores 1 --keep-going --rerun-incomplete $G/env.json $G/qa.csv $KEEP \
    2>&1 | tee "$OUT/call2.log" | grep -E "^(rule|Finished|Error|.*steps)"
rc=${PIPESTATUS[0]}
save_compile_cache
if [ "$rc" -ne 0 ]; then
    tar czf "$OUT/call2.tgz" results logs
    echo "call2: Snakemake stopped (exit $rc); call 2 again on this machine resumes"
    exit $rc
fi
cat $G/qa.csv
rm -f logs/$SLUG/published.done
$SMK --cores 1 publish --config allow_flags=true $KEEP 2>&1 | tail -3
tar czf "$OUT/full.tgz" data/results/$SLUG logs && cp -r data/results/$SLUG $PUBLISHED
python3 -m rooflab.runtime $G 2>/dev/null | tail -16
