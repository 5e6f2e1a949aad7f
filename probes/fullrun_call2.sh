# Full run, call 2 of 2 (about 8 min): the decode and attention sweeps, the run record and quality
# flags, then `publish` into data/results/ here, returned as full.tgz. Run on the machine call 1
# left warm (fullrun_call1.sh). Outputs already made are kept: mtime is not a rerun trigger here,
# since the tree is copied anew each call. Measured at ae54981 on an H200: the decode and attention
# sweeps with their merges took 468 s of jobs (474 s of wall clock for the call).
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/nvidia-h200
T="--rerun-triggers params input software-env code"
test -s $G/softmax.csv -a -s $G/e2e.csv || { echo "call2: no softmax.csv and e2e.csv from call 1 on this machine"; exit 3; }
. probes/same_gpu.sh $G || exit 5
python3 -m snakemake --cores 1 $G/env.json $G/qa.csv $T 2>&1 | tee "$OUT/call2.log" | grep -E "^(rule|Finished|Error|.*steps)" || exit 4
cat $G/qa.csv
python3 -m snakemake --cores 1 publish --config allow_flags=true $T 2>&1 | tail -3
tar czf "$OUT/full.tgz" data/results/nvidia-h200 logs
save_compile_cache
python3 -m rooflab.runtime $G 2>/dev/null | tail -16
