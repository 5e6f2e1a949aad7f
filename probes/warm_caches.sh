# Compile caches for a later full run, and what they save (about 9 min of one call):
#  1. the fp32 softmax sweep on a cold cache, then again on the cache it left (first calls then
#     load compiled kernels; Inductor's autotuning still runs: *.best_config is never carried);
#  2. the decode and attention sweeps on a cold cache, until SNAKEMAKE_LIMIT_S (default 520 s
#     from the start of this call) is spent;
#  3. the caches back as $OUT/cache.txz.NN (at most 60 MiB here), with what they hold by file kind.
# bash probes/warm_caches.sh COMMIT   (carry .whl); save the parts under .devcache/.
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/$SLUG
sweep() { $SMK --cores 1 --rerun-incomplete "$@" 2>&1 | tee -a "$OUT/warm.log" | grep -E "^(Finished|Error)"; }
sweep $G/softmax/float32.csv
cp $G/softmax/float32.env.json "$OUT/cold.env.json"
python3 -m rooflab.runtime $G 2>/dev/null | grep -E "^\| (job|sweep_softmax)" | sed 's/^/cold /'
rm -f $G/softmax/float32.csv $G/softmax/float32.env.json
sweep $G/softmax/float32.csv
cp $G/softmax/float32.env.json "$OUT/warm.env.json"
python3 -m rooflab.runtime $G 2>/dev/null | grep -E "^\| sweep_softmax" | sed 's/^/warm /'
left=$(( ${SNAKEMAKE_LIMIT_S:-520} - SECONDS ))
echo "cold caches, decode and attention: ${left} s"
timeout -s INT "$left" $SMK --cores 1 --rerun-incomplete $G/decode/float16.csv $G/decode/bfloat16.csv \
    $G/attention/float16.csv $G/attention/bfloat16.csv 2>&1 | tee -a "$OUT/warm.log" | grep -E "^(Finished|Error)"
find /tmp/rooflab-cache -type f -printf '%s %p\n' | awk '{n=split($2,a,"/"); f=a[n]; k=(f ~ /\./) ? f : "(none)"; sub(/^[^.]*\./,"",k); d=a[4]; s[d" "k]+=$1; c[d" "k]++} END {for (x in s) printf "%8.1f MiB %6d  %s\n", s[x]/1048576, c[x], x}' | sort -rn | head -20
save_compile_cache 60
python3 -m rooflab.runtime $G 2>/dev/null | tail -8
