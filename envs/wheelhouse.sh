#!/usr/bin/env bash
# Build a wheelhouse for a GPU node without internet access (common on clusters), holding only
# what the node lacks.
#
#   PYTHON=python3.12 bash envs/wheelhouse.sh OUT_DIR [WHAT_THE_NODE_HAS...]
#
# WHAT_THE_NODE_HAS: package names (torch triton numpy ...) and/or files written on the node by
# `python -m pip freeze > node-freeze.txt`. Run it on a machine with internet access and an
# interpreter of the node's Python version. The requirements (envs/requirements.txt and
# envs/requirements-peers.txt) are resolved from package metadata alone; the packages the node
# has, and what only they depend on (torch's CUDA libraries, say), are left out before any
# download, so a node that has torch never makes this script fetch a multi-GB CUDA build.
# Then only the rest is downloaded and built as wheels (some of Snakemake's dependencies ship
# only as source). Copy OUT_DIR to the node, then there:
#   python -m pip install --no-index --find-links OUT_DIR -r envs/requirements.txt -r envs/requirements-peers.txt
# or, if the node's site-packages is read-only:
#   python -m pip install --no-index --no-deps --target /tmp/site OUT_DIR/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ $# -ge 1 ] || { echo "usage: PYTHON=python3.X bash envs/wheelhouse.sh OUT_DIR [PACKAGE|FREEZE_FILE...]" >&2; exit 2; }
OUT=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What the node has: one lower-case name a line.
for have in "$@"; do
    if [ -f "$have" ]; then
        sed -E 's/[[:space:]]*(#.*)?$//; s/[[:space:]]*(==|>=|<=|~=|!=| @ ).*$//' "$have"
    elif [[ "$have" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
        echo "$have"
    else
        echo "wheelhouse: '$have' is neither a file (pip freeze output) nor a package name" >&2
        exit 2
    fi
done | grep -v '^\s*$' | grep -v '^-' | tr 'A-Z_.' 'a-z--' | sort -u > "$work/have.txt" || true

grep -hv '^\s*#' envs/requirements.txt envs/requirements-peers.txt | grep -v '^\s*$' > "$work/requirements.txt"

# Resolve without installing: pip reads each candidate's metadata (PEP 658: no wheel download
# where the index serves it) and writes the resolved set with each package's own requirements.
"$PYTHON" -m pip install -q --dry-run --ignore-installed --report "$work/report.json" -r "$work/requirements.txt"

# Keep what the requirements reach without passing through a package the node has.
"$PYTHON" - "$work" > "$work/build.txt" <<'PY'
import json
import re
import sys
from pathlib import Path

from pip._vendor.packaging.markers import default_environment
from pip._vendor.packaging.requirements import Requirement

work = Path(sys.argv[1])
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()   # noqa: E731
have = set((work / "have.txt").read_text().split())
resolved = {norm(item["metadata"]["name"]): item["metadata"] for item in json.loads((work / "report.json").read_text())["install"]}
environment = dict(default_environment(), extra="")


def requirements(lines):
    for line in lines:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(environment):
            yield req


todo = [req for req in requirements((work / "requirements.txt").read_text().splitlines())]
keep = {}
while todo:
    req = todo.pop()
    name = norm(req.name)
    if name in have or name in keep or name not in resolved:
        continue
    keep[name] = resolved[name]["version"]
    todo += list(requirements(resolved[name].get("requires_dist", [])))
    for extra in req.extras:          # e.g. a dependency asked for with [extra]
        todo += [r for r in (Requirement(x) for x in resolved[name].get("requires_dist", []))
                 if r.marker is not None and r.marker.evaluate(dict(environment, extra=extra))]
left_out = sorted(set(resolved) - set(keep))
print(f"left out (the node has them, or only they need them): {' '.join(left_out) or 'nothing'}", file=sys.stderr)
for name, version in sorted(keep.items()):
    print(f"{name}=={version}")
PY

mkdir -p "$OUT"
if [ -s "$work/build.txt" ]; then
    "$PYTHON" -m pip wheel -q --no-deps -w "$OUT" -r "$work/build.txt"
fi
echo "$(ls "$OUT" | wc -l) wheels, $(du -sh "$OUT" | cut -f1) in $OUT for $("$PYTHON" --version)"
