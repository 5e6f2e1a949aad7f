# Sourced at the start of every device call: Snakemake and Liger from the carried wheelhouse
# (.whl, 56 wheels and 15 MB at Snakemake 9.27.1 and Liger 0.8.5, built in about a minute with
# `PYENV_VERSION=3.12.1 PYTHON=python3.12 bash envs/wheelhouse.sh .whl torch triton numpy pandas
# matplotlib jinja2 markupsafe && rm .whl/pulp-*`: what the requirements need beyond what the GPU
# image has, less PuLP, whose 16 MB wheel is the solvers of Snakemake's ILP scheduler, which a
# --cores 1 run does not need; $SMK runs Snakemake with the greedy scheduler instead), and the
# commit being measured.
# Compiled kernels: Triton's cache and Inductor's under /tmp/rooflab-cache, seeded from carried
# .devcache/cache.txz.NN (or .tgz.NN) parts when there are some (what `save_compile_cache` returned from an
# earlier call: the same image's compilers, so a hit loads the same binary a fresh compile makes).
# Inductor's autotuning choices (*.best_config) are never carried: each machine makes its own.
# Usage: . probes/device_setup.sh <commit>
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "device_setup: wheel install failed"; return 1; }
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
export ROOFLAB_GIT_COMMIT=${1:?usage: . probes/device_setup.sh COMMIT}
export OUT=${OUT:-$PWD/probe_out}
SMK="python3 -m snakemake --scheduler greedy"
# Full-run calls keep the outputs a call before them made on this machine: mtime is no rerun
# trigger there, since each call copies the tree anew.
KEEP="--rerun-triggers params input software-env code"
export TRITON_CACHE_DIR=/tmp/rooflab-cache/triton TORCHINDUCTOR_CACHE_DIR=/tmp/rooflab-cache/inductor
mkdir -p "$OUT" "$TRITON_CACHE_DIR" "$TORCHINDUCTOR_CACHE_DIR"
if ls .devcache/cache.t?z.* >/dev/null 2>&1; then
    if ls .devcache/cache.txz.* >/dev/null 2>&1; then
        if command -v xz >/dev/null; then unpack="xz -dc"
        else unpack="python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)'"; fi
        cat .devcache/cache.txz.* | eval "$unpack" | tar x -C /tmp/rooflab-cache
    else
        cat .devcache/cache.tgz.* | tar xz -C /tmp/rooflab-cache
    fi && echo "device_setup: compile cache seeded ($(du -sh /tmp/rooflab-cache | cut -f1), $(find /tmp/rooflab-cache -type f | wc -l) files)"
fi
# This machine's GPU as the workflow names its results folder (results/$SLUG, data/results/$SLUG):
# an H200 and an H100 may both answer for the same kind of call.
SLUG=$(python3 -c "from rooflab.workflow import detect_gpu; print(detect_gpu()[1])") && [ "$SLUG" != None ] || { echo "device_setup: no GPU slug"; return 1; }
echo "device_setup: results folder $SLUG"
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader

# $OUT/cache.txz.NN: the compile caches, xz-compressed where the machine has xz (else gzip,
# cache.tgz.NN; xz makes them about 2.8x smaller: Triton's LLVM IR is most of them), in parts of
# 15 MiB (16 MiB is the most a file that comes back may hold), for the next call's .devcache/. Not
# returned over $1 MiB (default 40): the carry limit (64 MiB) also holds the working tree (about
# 8 MiB) and the wheelhouse (about 11 MiB).
save_compile_cache() {
    rm -f "$OUT"/cache.t?z.*
    local ext=tgz pack=gzip
    if command -v xz >/dev/null; then ext=txz pack="xz -T0 -6"; fi
    tar c -C /tmp/rooflab-cache --exclude='*.best_config' triton inductor 2>/dev/null | $pack | split -b 15m -d - "$OUT/cache.$ext."
    local size=$(cat "$OUT"/cache.$ext.* 2>/dev/null | wc -c)
    echo "compile cache: $((size >> 20)) MiB compressed ($ext), $(ls "$OUT"/cache.$ext.* | wc -l) parts"
    [ "$size" -le $((${1:-40} << 20)) ] || { rm -f "$OUT"/cache.$ext.*; echo "compile cache over ${1:-40} MiB: not returned"; }
}
