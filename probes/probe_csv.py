"""The probes' CSV output: rows (dicts with the same keys) written under $OUT."""
from __future__ import annotations

import csv


def write_csv(path: str, rows: list[dict]) -> None:
    """rows as a CSV at path; a lone `status` header when there are none."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["status"])
        writer.writeheader()
        writer.writerows(rows)
