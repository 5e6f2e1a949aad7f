"""What `publish` copies from a fresh run (results/<gpu>/) into data/results/<gpu>/.

data/results/<gpu>/ holds one run: its study CSVs and run record (the rule's inputs), its quality
flags, the per-job environment records (<study>/*.env.json) and wall clocks (benchmarks/*.tsv),
and reproduction.{csv,json} when this run was compared against the one before it. Whatever else
is there came from an earlier run (a reproduction of that run, a study or job this run did not
measure) and is removed, so no file of one run is read beside another's.
"""
from __future__ import annotations

import shutil
from pathlib import Path

RUN_FILES = ("reproduction.csv", "reproduction.json")   # copied when the fresh run has them
RUN_GLOBS = ("*/*.env.json", "benchmarks/*.tsv")        # per-job records, wherever they exist


def plan(fresh: Path, target: Path, inputs: list[str]) -> tuple[dict[Path, Path], list[Path]]:
    """({source: destination} to copy, [files under target to remove]) for publishing `fresh`."""
    fresh, target = Path(fresh), Path(target)
    copies = {Path(p): target / Path(p).name for p in inputs}
    copies.update({fresh / name: target / name for name in RUN_FILES if (fresh / name).exists()})
    for pattern in RUN_GLOBS:
        copies.update({p: target / p.relative_to(fresh) for p in sorted(fresh.glob(pattern))})
    keep = {dest.resolve() for dest in copies.values()}
    stale = sorted(p for p in target.rglob("*") if p.is_file() and p.resolve() not in keep) \
        if target.exists() else []
    return copies, stale


def publish(fresh: Path, target: Path, inputs: list[str], log=print) -> None:
    """Replace target's run with fresh's: remove the earlier run's leftovers, then copy."""
    copies, stale = plan(fresh, target, inputs)
    for path in stale:
        path.unlink()
        log(f"removed {path} (from an earlier run)")
    for source, dest in copies.items():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)
        log(f"{source} -> {dest} ({dest.stat().st_size} bytes)")
