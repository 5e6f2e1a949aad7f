"""data/gpus.yaml: the GPUs the project compares, matched by the device names torch reports."""
import pytest

from rooflab import datasheet

REQUIRED = ("nvidia-h100-sxm", "nvidia-h200", "nvidia-a100-sxm4-80gb", "nvidia-l4", "nvidia-rtx-3050",
            "nvidia-rtx-4090", "amd-instinct-mi300x")


def test_required_gpus_present_with_sources():
    entries = datasheet.load()
    for slug in REQUIRED:
        entry = entries[slug]
        assert entry["source"].startswith("https://")
        assert all(entry[k] > 0 for k in datasheet.NUMBERS)
    assert entries["nvidia-rtx-3050"]["bandwidth_tbps"] == 0.192     # seed 000's 192 GB/s part


@pytest.mark.parametrize("name, slug", [
    ("NVIDIA H200", "nvidia-h200"), ("nvidia  h200", "nvidia-h200"),
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-sxm"), ("NVIDIA GeForce RTX 4090", "nvidia-rtx-4090"),
])
def test_lookup_by_device_name(name, slug):
    assert datasheet.lookup(name)["slug"] == slug


def test_unknown_device_is_none():
    assert datasheet.lookup("NVIDIA Imaginary X1") is None
    assert datasheet.for_slug("nvidia-imaginary-x1") is None


def test_for_slug_matches_key_or_device_name_slug():
    assert datasheet.for_slug("nvidia-h200")["bandwidth_tbps"] == 4.8
    assert datasheet.for_slug("nvidia-geforce-rtx-4090")["slug"] == "nvidia-rtx-4090"


def test_peak_by_study_and_dtype():
    assert datasheet.peak("nvidia-h200", "softmax", "float16") == ("tbps", 4.8)
    assert datasheet.peak("nvidia-h100-sxm", "attention", "bfloat16") == ("tflops", 989.5)
    assert datasheet.peak("nvidia-h200", "e2e", "bfloat16") is None


def test_malformed_entry_is_named(tmp_path):
    path = tmp_path / "gpus.yaml"
    path.write_text("good:\n  label: x\n  names: [X]\n  source: s\n  bandwidth_tbps: 1\n  fp16_tflops: 1\n"
                    "  bf16_tflops: 1\n  fp32_tflops: 1\n  memory_gb: 1\n  sm_count: 1\n"
                    "bad-gpu:\n  label: y\n  names: [Y]\n  source: s\n  bandwidth_tbps: fast\n")
    with pytest.raises(ValueError, match="bad-gpu"):
        datasheet.load(path)
