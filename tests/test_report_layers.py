"""Layers point one way: the report never imports measuring code and nothing imports the report back;
the Snakefile parses and the report rules run with torch absent; no import cycle in the tree; each
report rule's inputs list every module its script imports."""
import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from rooflab.report import deps

ROOT = Path(__file__).resolve().parents[1]
MEASURING = ("rooflab.bench", "rooflab.timing", "rooflab.e2e", "rooflab.studies", "rooflab.gpustate",
             "rooflab.ceilings", "rooflab.verify", "rooflab.interpreter", "kernels", "torch", "triton")
SCRIPTS = ("aggregate", "figures", "paper")


def _graph() -> dict[str, set[str]]:
    """module -> the repository modules it imports (at any depth of its code), from the source."""
    files = sorted(ROOT.glob("rooflab/**/*.py")) + sorted(ROOT.glob("kernels/**/*.py"))
    names = {".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): f for f in files}
    graph = {}
    for name, path in names.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            found |= {t for t in targets if t in names and t != name}
        graph[name] = found
    return graph


def test_no_import_cycle():
    graph, done, path = _graph(), set(), []

    def visit(node):
        if node in path:
            raise AssertionError(f"import cycle: {' -> '.join(path[path.index(node):] + [node])}")
        if node in done:
            return
        path.append(node)
        for nxt in sorted(graph[node]):
            visit(nxt)
        path.pop()
        done.add(node)
    for node in sorted(graph):
        visit(node)


def test_the_report_imports_no_measuring_code_and_nothing_imports_it_back():
    for script in SCRIPTS:
        for module in deps.modules(ROOT, f"workflow/scripts/{script}.py"):
            dotted = module.removesuffix(".py").replace("/", ".")
            assert not dotted.startswith(MEASURING), (script, module)
    for name, imported in _graph().items():
        if not name.startswith("rooflab.report"):
            assert not any(i.startswith("rooflab.report") for i in imported), name


def test_report_rules_list_every_module_their_script_imports():
    for script in SCRIPTS:
        files = deps.modules(ROOT, f"workflow/scripts/{script}.py")
        assert "rooflab/report/derive.py" in files or script != "aggregate"
        assert "rooflab/schema.py" in files and "rooflab/report/load.py" in files
    assert "rooflab/report/context.py" in deps.modules(ROOT, "workflow/scripts/paper.py")
    rules = (ROOT / "workflow" / "rules" / "report.smk").read_text()
    assert all(f'code=CODE["{script}"]' in rules for script in SCRIPTS)   # each rule's inputs: deps.modules


def _without_torch(tmp_path) -> dict:
    """An environment whose Python processes cannot import torch or triton (a sitecustomize blocks them)."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['torch'] = None\nsys.modules['triton'] = None\n")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))


def test_the_snakefile_parses_without_torch(tmp_path):
    snakemake = Path(sys.executable).with_name("snakemake")
    done = subprocess.run([str(snakemake), "-n", "--cores", "1", "paper", "--config", "device=auto"], cwd=ROOT,
                          env=_without_torch(tmp_path), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_aggregate_figures_and_paper_run_without_torch(tmp_path):
    code = textwrap.dedent(f"""
        import importlib.util, json, sys
        assert importlib.util.find_spec("torch") is None or sys.modules.get("torch", 0) is None
        from pathlib import Path
        from rooflab.report import context, derive, figures, load, render
        out = Path({str(tmp_path)!r})
        agg = load.collect([Path({str(ROOT / 'tests' / 'fixtures' / 'results' / 'fixture-gpu')!r})], None,
                           Path({str(ROOT / 'data' / 'published')!r}))
        paths = {{n: out / f"{{n}}.csv" for n in derive.TABLES}}
        derive.write(derive.derive(agg), paths)
        tables = derive.read(paths)
        index = figures.render_all(agg, tables, out / "figures")
        md = render.render(context.build(agg, tables, index, None), "markdown")
        assert "## Appendix A" in md
        print("ok", [n for n in sys.modules if n.split(".")[0] in ("torch", "triton") and sys.modules[n]])
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_without_torch(tmp_path), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok []")
