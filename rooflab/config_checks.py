"""Cross-field checks of the configuration, run in the Snakefile right after the schema.

The schema (workflow/schemas/config.schema.yaml) checks each key on its own; the rules here
relate keys to each other (a grid entry's heads_q against its heads_kv, e2e.width against
e2e.heads) or to the implementations a study has, which JSON schema cannot express across
the cartesian lists of a grid. Each failure is a ValueError naming the key path, e.g.

    attention.grid.full[1]: heads_q 30 is not a multiple of heads_kv 8

Pure Python on purpose: the Snakefile calls it at parse time, where importing torch (which
rooflab/studies/*.py do) would cost seconds and, on a GPU node, could touch the driver.
"""
from __future__ import annotations

# Implementation names of each study, as rooflab/studies/<study>.py impls() returns them
# (tests/test_config.py checks that the two agree).
SOFTMAX_STRATEGIES = ("rows", "row", "looped", "split")          # kernels.fused_softmax.STRATEGIES
STUDY_IMPLS: dict[str, tuple[str, ...]] = {
    "softmax": ("ours", *(f"ours_{s}" for s in SOFTMAX_STRATEGIES), "torch", "torch_compile", "liger",
                "seed_rowwise", "seed_multipass", "copy"),
    "attention": ("ours", "ours_triton", "seed_attention", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "eager"),
    "decode": ("ours", "ours_nosplit", "ours_paged", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"),
}
# The implementations the CPU-interpreter verification may run: our own kernels only.
VERIFY_IMPLS: dict[str, tuple[str, ...]] = {
    "softmax": ("ours", *(f"ours_{s}" for s in SOFTMAX_STRATEGIES)),
    "attention": ("ours",),
    "decode": ("ours", "ours_nosplit", "ours_paged"),
}
# Head dims the attention kernel accepts (kernels.flash_attention.MIN_HEAD_DIM, MAX_HEAD_DIM).
ATTENTION_HEAD_DIM = (16, 256)
GRID_STUDIES = ("attention", "decode")      # studies whose grid entries carry heads_q / heads_kv


def check(config: dict) -> None:
    """Raise ValueError naming the first key path that breaks a cross-field rule."""
    for study in STUDY_IMPLS:
        section = config.get(study)
        if not isinstance(section, dict):
            continue
        _check_impls(f"{study}.impls", section.get("impls", []), STUDY_IMPLS[study])
        if study in GRID_STUDIES:
            for profile, entries in (section.get("grid") or {}).items():
                _check_heads(f"{study}.grid.{profile}", entries)
    for study, section in (config.get("verify") or {}).items():
        if study not in VERIFY_IMPLS:
            raise ValueError(f"verify.{study}: no such study; expected one of {', '.join(VERIFY_IMPLS)}")
        _check_impls(f"verify.{study}.impls", section.get("impls", []), VERIFY_IMPLS[study])
        if study in GRID_STUDIES:
            _check_heads(f"verify.{study}.grid", section.get("grid", []))
    if "e2e" in config:
        _check_e2e(config["e2e"])


def _check_impls(path: str, impls, known: tuple[str, ...]) -> None:
    for i, name in enumerate(impls):
        if name not in known:
            raise ValueError(f"{path}[{i}]: {name!r} is not an implementation of this study; "
                             f"expected one of {', '.join(known)}")


def _check_heads(path: str, entries) -> None:
    """Every heads_q of a grid entry a multiple of every heads_kv it is crossed with."""
    for i, entry in enumerate(entries or []):
        for hq in entry.get("heads_q", []):
            for hkv in entry.get("heads_kv", []):
                if hq % hkv:
                    raise ValueError(f"{path}[{i}]: heads_q {hq} is not a multiple of heads_kv {hkv}")


def _check_e2e(e2e: dict) -> None:
    width, heads, kv_heads = e2e.get("width"), e2e.get("heads"), e2e.get("kv_heads")
    if heads and kv_heads and heads % kv_heads:
        raise ValueError(f"e2e: heads {heads} is not a multiple of kv_heads {kv_heads}")
    if width and heads:
        if width % heads:
            raise ValueError(f"e2e: width {width} is not a multiple of heads {heads}")
        lo, hi = ATTENTION_HEAD_DIM
        if not lo <= width // heads <= hi:
            raise ValueError(f"e2e: head dim width / heads = {width // heads} is outside the "
                             f"attention kernel's range {lo}..{hi}")
