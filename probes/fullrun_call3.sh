# Full run, call 3 of 3 (about 6 min): the e2e sweep, the run record and quality flags, publish into
# data/results/ here, keep a copy of the full run, then the quick profile against it (reproduce).
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/nvidia-h200
T="--rerun-triggers params input software-env code"
test -s $G/attention.csv || { echo "call3: no attention.csv from call 2 on this machine"; exit 3; }
. probes/same_gpu.sh $G || exit 5
python3 -m snakemake --cores 1 $G/env.json $G/qa.csv $T 2>&1 | tee "$OUT/call3_full.log" | grep -E "^(rule|Finished|Error|.*steps)" || exit 4
cat $G/qa.csv
python3 -m snakemake --cores 1 publish --config allow_flags=true $T 2>&1 | tail -3
tar czf "$OUT/full.tgz" data/results/nvidia-h200 logs
python3 -m snakemake --cores 1 reproduce --config profile=quick $T 2>&1 | tee "$OUT/call3_quick.log" | grep -E "^(rule|Finished|Error|.*steps)"
rc=${PIPESTATUS[0]}
cp $G/reproduction.csv $G/reproduction.json "$OUT/" 2>/dev/null
tar czf "$OUT/quick.tgz" results logs
cat $G/reproduction.json 2>/dev/null | head -30
exit $rc
