"""One module per study. Each module defines, for the harness in rooflab.bench:

STUDY                         the study name (a key of rooflab.schema.SHAPE_COLUMNS)
shapes(grid) -> [dict]        the config grid expanded into shape dicts keyed by the shape columns
make_inputs(shape, dtype, device) -> dict   random inputs for one case
reference(inputs)             the float64 (or fp32) answer, computed once per case
check(out, ref, inputs) -> (max_abs_err, rel_err)
tolerance(dtype) -> float     rel_err above which a row is `incorrect`
work(shape, dtype) -> (bytes, flops)        the traffic / FLOP count behind tbps and tflops
ceiling(dtype, ceilings) -> rooflab.bench.Ceiling
impls() -> {name: factory}    factory(inputs) -> zero-argument callable; raises Unsupported
"""
from importlib import import_module

NAMES = ("softmax", "attention", "decode")


def load(name: str):
    if name not in NAMES:
        raise ValueError(f"unknown study {name!r}; expected one of {NAMES}")
    return import_module(f"rooflab.studies.{name}")
