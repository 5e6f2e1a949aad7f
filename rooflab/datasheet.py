"""Vendor datasheet numbers per GPU, from data/gpus.yaml.

`slug(device_name)` names a GPU's results folder; `lookup(device_name)` matches the name torch or
nvidia-smi reports (e.g. "NVIDIA H200"); `for_slug(slug)` finds the entry of a results folder or a
published table. Shared by the measuring code (rooflab.gpus) and the report; imports neither.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml

PATH = Path(__file__).resolve().parents[1] / "data" / "gpus.yaml"
NUMBERS = ("bandwidth_tbps", "fp16_tflops", "bf16_tflops", "fp32_tflops", "memory_gb", "sm_count")
REQUIRED = ("label", "names", "source") + NUMBERS


def slug(device_name: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200' (lower-case, runs of other characters become one dash)."""
    text = re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")
    if not text:
        raise ValueError(f"cannot make a slug from device name {device_name!r}")
    return text


def _check(slug: str, entry) -> dict:
    if not isinstance(entry, dict):
        raise ValueError(f"{PATH.name}: entry {slug!r} is not a mapping")
    missing = [key for key in REQUIRED if key not in entry]
    if missing:
        raise ValueError(f"{PATH.name}: entry {slug!r} lacks {missing}")
    for key in NUMBERS:
        if not isinstance(entry[key], (int, float)) or entry[key] <= 0:
            raise ValueError(f"{PATH.name}: entry {slug!r} field {key!r} must be a positive number, got {entry[key]!r}")
    if not entry["names"] or not all(isinstance(n, str) for n in entry["names"]):
        raise ValueError(f"{PATH.name}: entry {slug!r} needs a list of device-name strings in 'names'")
    return dict(entry, slug=slug)


@lru_cache(maxsize=4)
def load(path: str | Path = PATH) -> dict[str, dict]:
    """{slug: entry}; each entry gains its own `slug` key. Raises ValueError on a malformed entry."""
    raw = yaml.safe_load(Path(path).read_text()) or {}
    return {slug: _check(slug, entry) for slug, entry in raw.items()}


def _norm(name: str) -> str:
    return " ".join(name.split()).casefold()


def lookup(device_name: str, path: str | Path = PATH) -> dict | None:
    """The entry whose `names` include this device name (case and spacing ignored), else None."""
    wanted = _norm(device_name)
    for entry in load(path).values():
        if any(_norm(name) == wanted for name in entry["names"]):
            return entry
    return None


def same_model(a: str, b: str, path: str | Path = PATH) -> bool:
    """True when slugs a and b name one GPU model: equal, or both resolving to one entry (a results
    folder named after the device, nvidia-h100-80gb-hbm3, and a published table's entry key,
    nvidia-h100-sxm)."""
    if a == b:
        return True
    ea, eb = for_slug(a, path), for_slug(b, path)
    return bool(ea and eb and ea["slug"] == eb["slug"])


def for_slug(name: str, path: str | Path = PATH) -> dict | None:
    """The entry keyed by this slug, or whose device names slug to it (see rooflab.gpus.slug)."""
    entries = load(path)
    if name in entries:
        return entries[name]
    for entry in entries.values():
        if any(slug(device) == name for device in entry["names"]):
            return entry
    return None


def peak(slug: str, study: str, dtype: str, path: str | Path = PATH) -> tuple[str, float] | None:
    """(metric, datasheet peak) that a row of this study and dtype is a fraction of, or None.

    Softmax and decode move bytes (bandwidth); attention does matrix products (tensor peak of
    its dtype; float32 against the vector units). End-to-end rows have no single peak.
    """
    entry = for_slug(slug, path)
    if entry is None:
        return None
    if study in ("softmax", "decode"):
        return "tbps", float(entry["bandwidth_tbps"])
    if study == "attention":
        key = {"float16": "fp16_tflops", "bfloat16": "bf16_tflops", "float32": "fp32_tflops"}[dtype]
        return "tflops", float(entry[key])
    return None
