# H100 (80 GB) check of the sweeps beyond softmax: e2e, attention and decode on a fresh machine.
#   bash probes/h100_check.sh COMMIT   (carry .whl; CHECK_LIMIT_S caps the sweeps, default 540 s)
# Measured at acd613b on GPU-00648679 (an H100 80GB HBM3, cold compile caches, CHECK_LIMIT_S=360):
# e2e 111 s, 206 rows ok and 4 error rows: at the 16384-token prefill every configuration's events
# rows ok (eager 91.6 ms, ours_softmax 82.0, sdpa 12.6, ours_attention 13.7) and its cudagraph row
# "graph released: out of memory with the case's graphs held"; at 8192 tokens all graphs held (eager
# 30.1 ms replayed, sdpa 5.7). The bf16 attention sweep 158 s: 273 ok, 15 unsupported, 4 oom (eager
# at 16384 and 32768 tokens; the H200 run has 2), 1 error (seed_attention at D=256 causal, over the
# shared-memory limit, as on the H200). fp16 attention and decode were not reached. Before
# 8e13682 the same e2e job failed at the 16384-token prefill (an OOM outside the guarded checks).
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/$SLUG
# One target after another (e2e first: its long prefill is the case that ran out of memory), all
# inside CHECK_LIMIT_S (default 540 s) from here.
deadline=$(( $(date +%s) + ${CHECK_LIMIT_S:-540} ))
for target in e2e.csv attention.csv decode.csv; do
    left=$(( deadline - $(date +%s) ))
    [ $left -gt 30 ] || { echo "h100_check: no time left for $target"; break; }
    timeout -s INT $left $SMK --cores 1 --keep-going --rerun-incomplete $G/$target \
        2>&1 | tee -a "$OUT/check.log" | grep -E "^(rule|Finished|Error|.*steps)"
done
tar czf "$OUT/check.tgz" results logs
python3 - "$G" <<'PY'
import sys, pandas as pd, pathlib
g = pathlib.Path(sys.argv[1])
for name in ("e2e", "attention", "decode"):
    f = g / f"{name}.csv"
    if not f.exists():
        print(name, "missing"); continue
    d = pd.read_csv(f)
    print(name, d.status.value_counts().to_dict())
e = pd.read_csv(g / "e2e.csv") if (g / "e2e.csv").exists() else None
if e is not None:
    print(e[(e.seqlen >= 8192) & (e.part == "total")][["phase", "seqlen", "impl", "timing", "status", "median_ms", "message"]].to_string())
PY
python3 -m rooflab.runtime $G 2>/dev/null | tail -12
