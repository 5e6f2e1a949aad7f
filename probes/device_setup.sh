# Sourced at the start of every device call: Snakemake and Liger from the carried wheelhouse
# (.whl, built with `PYENV_VERSION=3.12.1 python3.12 -m pip wheel -w .whl snakemake==9.27.1
# liger-kernel`, less what the GPU image already has), and the commit being measured.
# Compiled kernels: Triton's cache and Inductor's under /tmp/rooflab-cache, seeded from a carried
# .devcache/cache.tgz when there is one (what `save_compile_cache` returned from an earlier call:
# the same image's compilers, so a hit loads the same binary a fresh compile makes). Inductor's
# autotuning choices (*.best_config) are never carried: each machine makes its own.
# Usage: . probes/device_setup.sh <commit>
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "device_setup: wheel install failed"; return 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
export ROOFLAB_GIT_COMMIT=${1:?usage: . probes/device_setup.sh COMMIT}
export OUT=${OUT:-$PWD/probe_out}
export TRITON_CACHE_DIR=/tmp/rooflab-cache/triton TORCHINDUCTOR_CACHE_DIR=/tmp/rooflab-cache/inductor
mkdir -p "$OUT" "$TRITON_CACHE_DIR" "$TORCHINDUCTOR_CACHE_DIR"
if [ -s .devcache/cache.tgz ]; then
    tar xzf .devcache/cache.tgz -C /tmp/rooflab-cache && echo "device_setup: compile cache seeded ($(du -sh /tmp/rooflab-cache | cut -f1))"
fi
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader

# $OUT/cache.tgz: the compile caches, for the next call's .devcache/ (at most 16 MiB comes back).
save_compile_cache() {
    tar czf "$OUT/cache.tgz" -C /tmp/rooflab-cache --exclude='*.best_config' triton inductor 2>/dev/null
    local size=$(stat -c %s "$OUT/cache.tgz" 2>/dev/null || echo 0)
    echo "compile cache: $((size >> 20)) MiB compressed"
    [ "$size" -le $((16 << 20)) ] || { rm -f "$OUT/cache.tgz"; echo "compile cache over 16 MiB: not returned"; }
}
