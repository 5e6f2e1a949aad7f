"""Edited copies of a kernel module for timing probes: the source, changed by the probe, written to a
file and imported under a name of its own, beside the module as shipped."""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile


def import_source(name: str, source: str, directory: str | None = None):
    """Import `source` as module `name` from `directory`/`name`.py (a new temporary folder by default).
    The module is in sys.modules while it executes: dataclasses look their module up there."""
    path = os.path.join(directory or tempfile.mkdtemp(prefix="rooflab_probe_"), f"{name}.py")
    with open(path, "w") as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
