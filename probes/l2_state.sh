# One device call (4-8 min on an H100; the first run compiles every kernel): does the fast state at softmax 16384x1024 fp32 come
# from x's lines loaded evict_last by the looped and split kernels' first pass, outliving the
# sweep's read flush? Five runs of probes/trial_order.py, each into $OUT/<run>/ under its own limit:
#   reset_call  RESET=call (persisting lines reset before every call's flush), 24 trials
#   stand_ins   PROBE_EXTRA=lastread,plainread,firstread,ones3: reads of x at one priority, 36 trials
#   fillread    FLUSH=fillread (a zero fill of the flush buffer, then its read), 24 trials
#   big         32768x4096 fp32, 8 trials, the sweep's flush
#   big_reset   the same with RESET=call
# Compiled for sm_90 (probes/sm90.py, offline), looped's first pass loads through
# `createpolicy.fractional.L2::evict_last.b64 1.0` and `ld.global.L1::evict_last.L2::cache_hint`
# (SASS LDG.E.EL.128), its second pass loads and stores through L2::evict_first policies (LDG/STG
# .E.EF.128): if a hit by an evict_first load demotes a line, no evict_last line outlives a looped
# call, and `lastread` (evict_last loads only) is the stand-in that can still leave them.
# The hypothesis holds if reset_call puts every block in one state, lastread leaves the next block
# fast and plainread and firstread do not, and looped at 32768x4096 falls under the in-trial copy
# with RESET=call but not without. Usage: bash probes/l2_state.sh COMMIT
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
base=$OUT
probe() {   # probe NAME LIMIT_S VAR=VALUE ...
    local name=$1 limit=$2; shift 2
    mkdir -p "$base/$name"
    echo "== $name ($*; limit $limit s)"; local s=$SECONDS
    env OUT="$base/$name" "$@" timeout "$limit" python3 probes/trial_order.py > "$base/$name.log" 2>&1
    echo "rc=$? in $((SECONDS - s)) s" | tee -a "$base/$name.log"
}
one=SHAPES=16384x1024:float32
probe reset_call 120 $one TRIALS=24 RESET=call
probe stand_ins 120 $one TRIALS=36 PROBE_EXTRA=lastread,plainread,firstread,ones3
probe fillread 90 $one TRIALS=24 FLUSH=fillread
probe big 90 SHAPES=32768x4096:float32 TRIALS=8
probe big_reset 90 SHAPES=32768x4096:float32 TRIALS=8 RESET=call
for name in reset_call stand_ins fillread big big_reset; do
    echo "== $name"; tail -30 "$base/$name.log" | cut -c1-400
done
echo "== verdict"; python3 probes/l2_verdict.py "$base"
