# Full run, call 1 of 3 (about 6 min): environment record, ceilings and the softmax sweep.
# bash probes/fullrun_call1.sh COMMIT   (carry .whl; nothing else may use the device until call 3)
# At e0c1a10 on an H200 the three calls took 338 s (env_before and calibrate 21 s, softmax 310 s
# with its merge), 438 s (decode 143 s and attention 288 s with their merges) and 366 s (e2e 82 s,
# the run record and publish, then the quick profile with its reproduce, 269 s) of wall clock.
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
