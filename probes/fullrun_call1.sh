# Full run, call 1 of 2 (about 8 min): environment record, ceilings, the softmax and e2e sweeps.
# bash probes/fullrun_call1.sh COMMIT   (carry .whl and .devcache; nothing else may use the device until call 2)
# Call 2 continues on the machine this call leaves warm (results/ stays there) and stops at once on
# another GPU (`same_gpu.sh`). A warm machine is given back 30 s after a call ends, longer than a
# reply to one call takes to ask for the next; device calls asked for together, in one batch, run
# back to back on the same machine (seen on 3 Dec 2026: the second call of a batch found the first's
# GPU and results/). So ask for the whole run in one batch: call 1, call 1 again, call 2, call 2
# again, then the reproduction (fullrun_call3.sh with REPRODUCE_BATCH=1). A repeat resumes what the
# call before it left unfinished and is a no-op otherwise. Where starts are being refused, a batch
# pays for each of its calls (15 s each inside the refusal window, 1.5-2 min a failed start): ask for
# call 1 alone then, and for the rest as soon as it returns (on 6 Dec 2026 call 2, asked for right
# after call 1 came back, found its machine warm with results/ in place). A call of kind nvidia-h200
# may be given an H100 (on 7 Dec 2026 it was, and the run went to results/nvidia-h100-80gb-hbm3,
# device_setup.sh's SLUG): for an H200 run, ask with needs_h200 on every call of the run.
# Snakemake is stopped cleanly after SNAKEMAKE_LIMIT_S (560 s), inside the device's 10-minute
# limit. Outputs already made are kept ($KEEP, device_setup.sh).
# Measured on fresh H200 machines: 457 s of jobs at 8dd107b (env_before 13 s, calibrate 16, softmax
# sweeps 98-108 each with 65-75 s of first calls, their merge 29, e2e 88); 349 s at c3249fa on the
# compile caches .devcache carried (softmax sweeps 61-84 s, 31-50 of first calls), 365 s of wall clock.
set -o pipefail
. probes/device_setup.sh "$1" || exit 1
G=results/$SLUG
timeout -s INT "${SNAKEMAKE_LIMIT_S:-560}" $SMK --cores 1 --keep-going --rerun-incomplete $G/softmax.csv $G/e2e.csv $KEEP \
    2>&1 | tee "$OUT/call1.log" | grep -E "^(rule|Finished|Error|.*steps|Nothing)"
rc=${PIPESTATUS[0]}
tar czf "$OUT/call1.tgz" results logs
save_compile_cache
python3 -m rooflab.runtime $G 2>/dev/null | tail -12
[ "$rc" -eq 0 ] || echo "call1: Snakemake stopped (exit $rc); call 1 again on this machine resumes"
exit $rc
