"""The repository's Python files a script imports, followed through `rooflab` and `kernels` imports.

workflow/rules/report.smk lists them as each report rule's inputs, so a change to any module that
shapes a rule's output re-runs it. Read from the source (ast), never imported: torch-free and fast.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGES = ("rooflab", "kernels")


def _imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n.split(".")[0] in PACKAGES}


def _file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def modules(root: str | Path, *scripts: str | Path) -> list[str]:
    """Every repository file the scripts import, directly or not (package __init__ files included),
    as paths relative to `root`, sorted."""
    root = Path(root)
    seen: set[Path] = set()
    todo = [root / s for s in scripts]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in _imported(ast.parse(path.read_text(), str(path))):
            parts = module.split(".")
            for k in range(1, len(parts) + 1):
                found = _file(root, ".".join(parts[:k]))
                if found is not None and found not in seen:
                    todo.append(found)
    return sorted(str(p.relative_to(root)) for p in seen)
