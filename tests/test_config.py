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
    (lambda c: c["decode"]["grid"]["quick"][0].update(cache_len=[0]), "0 is less than the minimum of 1"),
    (lambda c: c.update(profile="huge"), "huge"),
    (lambda c: c["softmax"].update(colour="red"), "colour"),
    (lambda c: c.update(unknown_top_level=1), "unknown_top_level"),
    (lambda c: c["bench"]["full"].update(rep_ms=-1), "-1"),
    (lambda c: c["attention"]["grid"]["full"][0].update(head_dim=[512]), "512"),
    (lambda c: c.update(allow_flags="yes"), "yes"),
    (lambda c: c.update(allow_flags=1), "allow_flags"),
    (lambda c: c.update(allow_flags="on"), "'on' is not valid"),
    (lambda c: c["qa"].update(ours_vs_strategy=-0.1), "-0.1"),
    (lambda c: c["qa"].update(above_ceiling=0.9), "0.9"),
    (lambda c: c["qa"].update(min_reps=2.5), "2.5"),
    (lambda c: c["qa"].update(amdahl_slack="3%"), "3%"),
    (lambda c: c["qa"].update(max_ratio=2), "max_ratio"),
    (lambda c: c["qa"].pop("min_trials"), "min_trials"),
    # verify takes only the study's own kernels
    (lambda c: c["verify"]["softmax"].update(impls=["ours", "ours_bogus"]), "ours_bogus"),
    (lambda c: c["verify"]["attention"].update(impls=["ours_rows"]), "ours_rows"),
    (lambda c: c["verify"]["decode"].update(impls=["ours", "ours_split"]), "ours_split"),
    (lambda c: c["verify"]["softmax"].update(impls=["torch"]), "torch"),
    (lambda c: c["verify"]["softmax"].update(impls=["ours", "ours"]), "non-unique"),
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


# ---- cross-field rules (rooflab/config_checks.py), run by the Snakefile after the schema

from rooflab import config_checks  # noqa: E402


def test_shipped_config_passes_the_cross_field_checks(config):
    config_checks.check(copy.deepcopy(config))


@pytest.mark.parametrize("mutate, message", [
    (lambda c: c["attention"]["grid"]["full"][2].update(heads_q=[30]),
     "attention.grid.full[2]: heads_q 30 is not a multiple of heads_kv 8"),
    (lambda c: c["attention"]["grid"]["quick"][0].update(heads_q=[32, 48], heads_kv=[32]),
     "attention.grid.quick[0]: heads_q 48 is not a multiple of heads_kv 32"),
    (lambda c: c["decode"]["grid"]["full"][0].update(heads_kv=[32, 8, 3]),
     "decode.grid.full[0]: heads_q 32 is not a multiple of heads_kv 3"),
    (lambda c: c["verify"]["attention"]["grid"][2].update(heads_kv=[3]),
     "verify.attention.grid[2]: heads_q 4 is not a multiple of heads_kv 3"),
    (lambda c: c["verify"]["decode"]["grid"][0].update(heads_q=[5]),
     "verify.decode.grid[0]: heads_q 5 is not a multiple of heads_kv 2"),
    (lambda c: c["e2e"].update(kv_heads=5), "e2e: heads 32 is not a multiple of kv_heads 5"),
    (lambda c: c["e2e"].update(width=4100), "e2e: width 4100 is not a multiple of heads 32"),
    (lambda c: c["e2e"].update(width=256), "e2e: head dim width / heads = 8"),
    (lambda c: c["e2e"].update(width=32 * 512), "e2e: head dim width / heads = 512"),
    (lambda c: c["verify"]["decode"].update(impls=["ours", "ours_rows"]), "verify.decode.impls[1]: 'ours_rows'"),
    (lambda c: c["verify"]["softmax"].update(impls=["ours_warp"]), "verify.softmax.impls[0]: 'ours_warp'"),
    (lambda c: c["attention"].update(impls=["ours", "ours_nosplit"]), "attention.impls[1]: 'ours_nosplit'"),
    (lambda c: c["decode"].update(impls=["eager"]), "decode.impls[0]: 'eager'"),
    (lambda c: c["verify"].update(e2e={"dtypes": ["float16"], "impls": ["ours"], "grid": [{}]}), "verify.e2e"),
])
def test_cross_field_rules_name_the_key_path(config, mutate, message):
    bad = copy.deepcopy(config)
    mutate(bad)
    with pytest.raises(ValueError) as info:
        config_checks.check(bad)
    assert message in str(info.value)


def test_cross_field_rules_accept_other_valid_configs(config):
    good = copy.deepcopy(config)
    good["e2e"].update(width=2048, heads=16, kv_heads=16)         # head dim 128, no grouping
    good["attention"]["grid"]["full"][1].update(heads_q=[32, 64], heads_kv=[1, 8, 16])
    good["verify"] = {"decode": good["verify"]["decode"]}         # verify may name fewer studies
    config_checks.check(good)


def test_impl_tables_match_the_studies():
    """The checker keeps the studies' impl names as a table (no torch import at parse time)."""
    from kernels.fused_softmax import STRATEGIES
    from rooflab import studies
    for name, table in config_checks.STUDY_IMPLS.items():
        assert set(table) == set(studies.load(name).impls()), name
        assert set(config_checks.VERIFY_IMPLS[name]) <= set(table), name
    assert config_checks.SOFTMAX_STRATEGIES == tuple(STRATEGIES)
    assert set(config_checks.VERIFY_IMPLS["softmax"]) == {"ours"} | {f"ours_{s}" for s in STRATEGIES}
    assert config_checks.VERIFY_IMPLS["attention"] == ("ours",)
    assert set(config_checks.VERIFY_IMPLS["decode"]) == {"ours", "ours_nosplit", "ours_paged"}


def test_schema_verify_impls_match_the_checker_table():
    schema = yaml.safe_load(Path(SCHEMA).read_text())
    verify = schema["properties"]["verify"]["properties"]
    for name, table in config_checks.VERIFY_IMPLS.items():
        assert verify[name]["properties"]["impls"]["items"]["enum"] == list(table), name


def test_the_checker_imports_no_torch():
    import subprocess
    import sys
    code = "import sys; import rooflab.config_checks; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_attention_head_dim_range_matches_the_kernel():
    from kernels import flash_attention
    assert config_checks.ATTENTION_HEAD_DIM == (flash_attention.MIN_HEAD_DIM, flash_attention.MAX_HEAD_DIM)
