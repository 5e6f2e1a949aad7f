# Sourced at the start of every device call: Snakemake and Liger from the carried wheelhouse
# (.whl, built with `PYENV_VERSION=3.12.1 python3.12 -m pip wheel -w .whl snakemake==9.27.1
# liger-kernel`, less what the GPU image already has), and the commit being measured.
# Usage: . probes/device_setup.sh <commit>
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "device_setup: wheel install failed"; return 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
export ROOFLAB_GIT_COMMIT=${1:?usage: . probes/device_setup.sh COMMIT}
export OUT=${OUT:-$PWD/probe_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader
