"""The cross-GPU appendix names the code that measured each GPU's run (env.json's commit and measuring-code
id) and says when the runs' code differs, since a GPU-to-GPU difference can then be the code's."""
import pandas as pd

from rooflab.report.load import RESULT_COLUMNS, Aggregate
from rooflab.report.views.studies import _measuring_code


def aggregate(envs: dict) -> Aggregate:
    return Aggregate(results=pd.DataFrame(columns=list(RESULT_COLUMNS)), published=pd.DataFrame(),
                     ceilings=pd.DataFrame(columns=["gpu", "name", "value", "unit"]), envs=envs)


def test_same_measuring_code_on_every_gpu_is_said_and_a_full_commit_is_shortened():
    agg = aggregate({"gpu-a": {"git_commit": "aaaaaaa" + "0" * 33, "measuring_code": "0123456789ab"},
                     "gpu-b": {"git_commit": "bbbbbbb", "measuring_code": "0123456789ab"}})
    text = _measuring_code(agg, ["gpu-a", "gpu-b"])
    assert "gpu-a commit aaaaaaa, measuring code 0123456789ab" in text and "gpu-b commit bbbbbbb" in text
    assert "0" * 33 not in text
    assert "the same kernels, harness and studies measured every GPU" in text and "differ" not in text


def test_differing_measuring_code_is_a_caveat():
    agg = aggregate({"gpu-a": {"git_commit": "aaaaaaa", "measuring_code": "0123456789ab"},
                     "gpu-b": {"git_commit": "bbbbbbb", "measuring_code": "ba9876543210"}})
    text = _measuring_code(agg, ["gpu-a", "gpu-b"])
    assert "differ between the runs" in text and "through the code as well as the GPU" in text


def test_a_run_without_an_id_is_named_unrecorded_and_one_gpu_says_nothing():
    agg = aggregate({"gpu-a": {"git_commit": "aaaaaaa", "measuring_code": "0123456789ab"}, "gpu-b": {}})
    text = _measuring_code(agg, ["gpu-a", "gpu-b"])
    assert "gpu-b commit unrecorded, measuring code unrecorded" in text and "cannot be matched" in text
    assert _measuring_code(agg, ["gpu-a"]) is None
