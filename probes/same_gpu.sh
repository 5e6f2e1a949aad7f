# Sourced by full-run call 2 after device_setup.sh: stops the call unless this machine's GPU
# is the one call 1 recorded (results/<slug>/env_before.json), so one run never spans two GPUs.
# Usage: . probes/same_gpu.sh results/nvidia-h200
recorded=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['gpu_uuid'])" "$1/env_before.json" 2>/dev/null)
current=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
if [ -z "$recorded" ] || [ "$recorded" != "$current" ]; then
    echo "same_gpu: call 1 ran on ${recorded:-no recorded GPU}, this is $current; the run starts again from call 1"
    return 5 2>/dev/null || exit 5
fi
