"""Ceilings measured at several sizes (rooflab.ceilings: read_tbps_<n>mib, copy_tbps_<n>mib) and the
rate they give a transfer of any size. Pure Python: the quality gates and the report both use it."""
from __future__ import annotations

import math
import re

SIZED = re.compile(r"(read|copy)_tbps_(\d+)mib")   # rooflab.ceilings.sized_reads / sized_copies: n MiB moved


def rate_at(ceilings: dict, nbytes: float, kind: str = "read") -> float | None:
    """The rate (TB/s) a transfer of nbytes can reach, from a GPU's <kind>_tbps_<n>mib ceilings
    (rooflab.ceilings.sized_reads: the read over the first n MiB of the calibrate buffer;
    sized_copies: a copy moving n MiB): linear in log2(size) between the measured sizes, the
    nearest end's rate outside them; None without such rows."""
    points = sorted((int(sized.group(2)) * 2**20, float(value)) for name, value in ceilings.items()
                    if (sized := SIZED.fullmatch(name)) and sized.group(1) == kind and value == value)
    if not points:
        return None
    if nbytes <= points[0][0]:
        return points[0][1]
    for (b0, r0), (b1, r1) in zip(points, points[1:]):
        if nbytes <= b1:
            t = (math.log2(nbytes) - math.log2(b0)) / (math.log2(b1) - math.log2(b0))
            return r0 + t * (r1 - r0)
    return points[-1][1]
