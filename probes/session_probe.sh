# One device call of probes, each under its own time limit so that one that hangs or runs long
# costs only its share; the table each prints last is echoed at the end.
#   bash probes/session_probe.sh COMMIT [hopper_tests] NAME:LIMIT_S[:BUDGET_S[:DIAG]] ...
# hopper_tests: the suite's GPU tests first (the Gluon attention kernel, softmax's lean launcher and
# native replay: outside the interpreter the suite's conftest turns on). BUDGET_S goes to the probe as
# PROBE_BUDGET_S (when it stops starting new work), DIAG as DIAG (else the caller's DIAG).
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
shift
names=()
for spec in "$@"; do
    if [ "$spec" = hopper_tests ]; then
        timeout 120 python3 -m pytest -q --noconftest -p no:cacheprovider tests/test_attention_hopper.py \
            tests/test_lean_launch.py tests/test_native_replay.py -k "test_gpu_" -x 2>&1 \
            | tee "$OUT/hopper_tests.log" | tail -4
        continue
    fi
    IFS=: read -r name limit budget diag <<<"$spec"
    names+=("$name")
    echo "== $name (limit $limit s${diag:+, DIAG=$diag})"; s=$SECONDS
    DIAG=${diag:-$DIAG} PROBE_BUDGET_S=${budget:-$((limit * 3 / 4))} timeout "$limit" python3 "probes/$name.py" \
        > "$OUT/$name.log" 2>&1
    echo "rc=$? in $((SECONDS - s)) s" >> "$OUT/$name.log"
done
for name in "${names[@]}"; do echo "== $name"; tail -40 "$OUT/$name.log" | cut -c1-600; done
