# H100 (80 GB) check of the sweeps beyond softmax: e2e, attention and decode on a fresh machine.
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
