"""Config grids -> concrete shapes. Each grid entry maps a shape column to a list of values;
an entry expands to the cartesian product of its lists, entries concatenate in order."""
from __future__ import annotations

import itertools


def expand(entries: list[dict]) -> list[dict]:
    shapes: list[dict] = []
    for entry in entries:
        keys = list(entry)
        for values in itertools.product(*(entry[k] for k in keys)):
            shape = dict(zip(keys, values))
            if shape not in shapes:
                shapes.append(shape)
    return shapes
