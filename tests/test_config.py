"""The config schema: the shipped config passes; bad keys and values fail, naming the key."""
import copy
from pathlib import Path

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from rooflab.grid import expand

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = str(ROOT / "workflow" / "schemas" / "config.schema.yaml")


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_shipped_config_is_valid(config):
    validate(copy.deepcopy(config), SCHEMA)


@pytest.mark.parametrize("mutate, named", [
    (lambda c: c.update(studies=["softmax", "fft"]), "fft"),
    (lambda c: c["softmax"].update(dtypes=["float64"]), "float64"),
    (lambda c: c["softmax"].update(impls=["ours", "cublas"]), "cublas"),
    (lambda c: c["attention"]["grid"]["full"][0].update(batch=[-4]), "-4"),
    (lambda c: c["decode"]["grid"]["quick"][0].update(cache_len=[0]), "0"),
    (lambda c: c.update(profile="huge"), "huge"),
    (lambda c: c["softmax"].update(colour="red"), "colour"),
    (lambda c: c.update(unknown_top_level=1), "unknown_top_level"),
    (lambda c: c["bench"]["full"].update(rep_ms=-1), "-1"),
    (lambda c: c["attention"]["grid"]["full"][0].update(head_dim=[512]), "512"),
    (lambda c: c.update(allow_flags="yes"), "yes"),
    (lambda c: c.update(allow_flags=1), "allow_flags"),
    (lambda c: c.update(allow_flags="on"), "on"),
    (lambda c: c["qa"].update(ours_vs_strategy=-0.1), "-0.1"),
    (lambda c: c["qa"].update(above_ceiling=0.9), "0.9"),
    (lambda c: c["qa"].update(min_reps=2.5), "2.5"),
    (lambda c: c["qa"].update(amdahl_slack="3%"), "3%"),
    (lambda c: c["qa"].update(max_ratio=2), "max_ratio"),
    (lambda c: c["qa"].pop("min_trials"), "min_trials"),
])
def test_bad_config_fails_naming_the_key(config, mutate, named):
    bad = copy.deepcopy(config)
    mutate(bad)
    with pytest.raises(WorkflowError) as info:
        validate(bad, SCHEMA)
    assert named in str(info.value)


def test_every_impl_in_the_config_is_a_known_implementation(config):
    from rooflab import studies
    for name in ("softmax", "attention", "decode"):
        try:
            known = set(studies.load(name).impls())
        except ImportError as exc:  # a kernel module the study needs is missing
            pytest.fail(f"{name}: {exc}")
        assert set(config[name]["impls"]) <= known, name


def test_grid_expands_as_a_cartesian_product():
    shapes = expand([{"rows": [1, 2], "cols": [7]}, {"rows": [3], "cols": [5, 6]}, {"rows": [1], "cols": [7]}])
    assert shapes == [{"rows": 1, "cols": 7}, {"rows": 2, "cols": 7}, {"rows": 3, "cols": 5}, {"rows": 3, "cols": 6}]


def test_qa_section_matches_the_gate_defaults(config):
    from rooflab.qa import THRESHOLDS
    assert config["qa"] == THRESHOLDS
    assert config["allow_flags"] is False


@pytest.mark.parametrize("value", [True, False, "true", "false", "True"])
def test_allow_flags_takes_a_boolean_or_its_command_line_spelling(config, value):
    good = copy.deepcopy(config)
    good["allow_flags"] = value
    validate(good, SCHEMA)
