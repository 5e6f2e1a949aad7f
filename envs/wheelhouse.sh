#!/usr/bin/env bash
# Build a wheelhouse for a GPU node without internet access (common on clusters).
#
#   PYTHON=python3.12 bash envs/wheelhouse.sh [OUT_DIR] [PACKAGES_THE_NODE_ALREADY_HAS...]
#   e.g. PYTHON=python3.12 bash envs/wheelhouse.sh wheelhouse torch triton numpy pandas matplotlib
#
# Run it on a machine with internet access and an interpreter of the node's Python version
# (wheels are built, not only downloaded, because some of Snakemake's dependencies ship only
# as source). Copy OUT_DIR to the node, then there:
#   python -m pip install --no-index --find-links OUT_DIR -r envs/requirements.txt -r envs/requirements-peers.txt
# or, if the node's site-packages is read-only:
#   python -m pip install --no-index --no-deps --target /tmp/site OUT_DIR/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${1:-wheelhouse}
shift || true
requirements=$(mktemp)
trap 'rm -f "$requirements"' EXIT
grep -hv '^\s*#' envs/requirements.txt envs/requirements-peers.txt | grep -v '^\s*$' > "$requirements"
"$PYTHON" -m pip wheel -q -w "$OUT" -r "$requirements"
# Drop what the node already provides, so the wheelhouse stays small.
for have in "$@"; do
    name=$(echo "$have" | tr '-' '_' | tr 'A-Z' 'a-z')
    find "$OUT" -maxdepth 1 -iname "${name}-*.whl" -delete
done
echo "$(ls "$OUT" | wc -l) wheels, $(du -sh "$OUT" | cut -f1) in $OUT for $("$PYTHON" --version)"
