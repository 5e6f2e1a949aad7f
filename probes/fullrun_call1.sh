# Full run, call 1 of 3 (about 6.5 min): environment record, ceilings and the softmax sweep.
# bash probes/fullrun_call1.sh COMMIT   (carry .whl; nothing else may use the device until call 3)
# At 8d2c4c8 on an H200 the jobs took: env_before and calibrate 26 s, softmax 316 s with its merge,
# decode 163 s with its merge (541 s of jobs, 550 s of wall clock for the two in one call, too
# near the 600 s limit); at 0d069c1 e2e took 85 s, attention 293 s with its merge, call 3's record,
# publish and quick reproduce 276 s. So call 1 takes softmax (about 350 s), call 2 decode and
# attention (about 460 s), call 3 e2e, the record and the quick profile (about 360 s).
# Calls 2 and 3 continue on the machine call 1 left warm (results/ stays there) and stop at once
# on another GPU (`same_gpu.sh`). When the machine was given back between calls, its results
# are lost there, not here: unpack the last call's tgz into the working tree (`tar xzf callN.tgz`
# puts results/ and logs/ in place) and carry them with .whl; the run resumes only if the new
# call lands on the same GPU, else the run starts again from call 1.
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/nvidia-h200
python3 -m snakemake --cores 1 $G/softmax.csv 2>&1 | tee "$OUT/call1.log" | grep -E "^(rule|Finished|Error|.*steps)"
rc=${PIPESTATUS[0]}
tar czf "$OUT/call1.tgz" results logs
python3 -m rooflab.runtime $G 2>/dev/null | tail -15
exit $rc
