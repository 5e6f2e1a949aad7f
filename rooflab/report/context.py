"""The numbers, tables and lists both paper formats render: one builder over the section views
(rooflab.report.views), so the Markdown and the LaTeX paper can never disagree. Every value is formatted
in the views, as text; the templates only place it in sentences.
"""
from __future__ import annotations

import pandas as pd

from rooflab.report.analysis import TIE_WITHIN, primary_gpu
from rooflab.report.load import Aggregate
from rooflab.report.verdicts import TOLERANCE
from rooflab.report.views.claims import claims_view
from rooflab.report.views.e2e import e2e_view
from rooflab.report.views.environment import _ceiling_table, gpu_views
from rooflab.report.views.method import REPRODUCE_COMMANDS, harness, tolerances
from rooflab.report.views.quality import (REPRODUCTION_TOLERANCE, qa_view, reproduction_view, same_code_view,
                                          verify_view)
from rooflab.report.views.studies import cross_gpu_view, study_view

__all__ = ["build", "harness", "verify_view"]


def build(agg: Aggregate, tables: dict, figures: list[dict], verify: pd.DataFrame | None = None,
          fresh_slug: str | None = None, figure_base: str = "../figures", config: dict | None = None,
          lead: str | None = None) -> dict:
    """Everything the templates print; `config` is the workflow's (its `bench` settings where the results'
    env.json does not record them); `lead` the GPU the paper leads with (config `report: lead_gpu`, read
    from `config` when not given; see analysis.primary_gpu)."""
    if lead is None:
        report = (config or {}).get("report")
        lead = report.get("lead_gpu", "auto") if isinstance(report, dict) else "auto"
    gpu = primary_gpu(agg.results, fresh_slug, lead, agg.gpus)
    gpus = gpu_views(agg)
    gpus_by_slug = {g["slug"]: g for g in gpus}
    studies = {s: study_view(agg, tables, s, gpu) for s in ("softmax", "attention", "decode")}
    studies["e2e"] = e2e_view(agg, tables, gpu)
    figs = {f["name"]: f for f in figures}
    return {
        "title": "Roofline Lab: fused softmax, flash attention and split-KV decode in Triton, measured against the best peers",
        "primary": next((g for g in gpus if g["slug"] == gpu), None),
        "gpus": gpus,
        "studies": studies,
        "claims": claims_view(tables),
        "qa": qa_view(agg, gpu),
        "same_code": same_code_view(agg, tables, gpu),
        "reproductions": [reproduction_view(agg, g) for g in agg.lead_first(gpu) or [None]],
        "cross": cross_gpu_view(agg, tables, gpu),
        "verify": verify_view(verify),
        "ceilings": _ceiling_table(agg) if agg.gpus else None,
        "tolerances": tolerances(verify),
        "harness": harness(agg.envs.get(gpu, {}), agg.results[agg.results["gpu"] == gpu], config) if gpu
        else harness({}, None, config),
        "verdict_tolerance": f"{TOLERANCE:.0%}",
        "tie_within": f"{TIE_WITHIN:.0%}",
        "reproduction_tolerance": f"{REPRODUCTION_TOLERANCE:.0%}",
        "ci_level": "95%",
        "problems": list(agg.problems),
        "figures": figs,
        "figure_base": figure_base,
        "reproduce_commands": ([f"git checkout {gpus_by_slug[gpu]['commit']}   # the commit the results were measured at"]
                               if gpu and gpus_by_slug.get(gpu, {}).get("commit") else []) + list(REPRODUCE_COMMANDS),
    }
