"""Which code measured a run: one short id for the files that compute the numbers.

The files are those under MEASURING_CODE (kernels, harness, studies, the measuring rules and
their scripts, the configuration). The id hashes each file's path and git blob id (the SHA-1 of
"blob <size>\\0" and its bytes), so the same files give the same id whether read from a working
tree (`from_tree`, no git needed: what the env rule records in env.json) or from a commit
(`from_commit`, through git: for a run recorded before env.json carried the id).
"""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

MEASURING_CODE = ("kernels", "rooflab/bench.py", "rooflab/trial_orders.py", "rooflab/timing.py", "rooflab/e2e.py", "rooflab/studies",
                  "rooflab/gpustate.py", "rooflab/ceilings.py", "rooflab/qa.py", "rooflab/sized_ceilings.py",
                  "workflow/scripts/sweep.py",
                  "workflow/scripts/merge_sweep.py", "workflow/scripts/e2e.py", "workflow/scripts/calibrate.py",
                  "workflow/rules/sweeps.smk", "workflow/rules/e2e.smk", "workflow/rules/calibrate.smk",
                  "config/config.yaml")
SUFFIXES = (".py", ".smk", ".yaml")     # what counts under a folder (not caches or compiled files)


def _id(entries: list[tuple[str, str]]) -> str:
    text = "\n".join(f"{blob} {path}" for path, blob in sorted(entries))
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def _blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _wanted(path: str) -> bool:
    return path in MEASURING_CODE or path.endswith(SUFFIXES)


def from_tree(root: str | Path = ".") -> str | None:
    """The id of the measuring code in a working tree; None when one of its paths is missing."""
    root = Path(root)
    entries = []
    for name in MEASURING_CODE:
        path = root / name
        if not path.exists():
            return None
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        entries += [(p.relative_to(root).as_posix(), _blob(p.read_bytes())) for p in files
                    if _wanted(p.relative_to(root).as_posix())]
    return _id(entries)


def from_commit(commit: str | None, repo: str | Path = ".") -> str | None:
    """The id of the measuring code in a commit, through git; None without git, the commit or a path."""
    if not commit:
        return None
    try:
        out = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--full-tree", commit, "--", *MEASURING_CODE],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    entries = []
    for line in out.stdout.splitlines():
        meta, path = line.split("\t", 1)
        if _wanted(path):
            entries.append((path, meta.split()[2]))
    found = {p for p, _ in entries}
    if not all(name in found or any(p.startswith(name + "/") for p in found) for name in MEASURING_CODE):
        return None
    return _id(entries)
