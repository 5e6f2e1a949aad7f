"""One GPU model under two slugs: a results folder is named after the device (nvidia-h100-80gb-hbm3), a
published table after its data/gpus.yaml entry (nvidia-h100-sxm). A claim is judged on its own model where
that was measured, else on the lead GPU, and every note and caveat speaks of that one GPU."""
import pandas as pd
import pytest

from rooflab import datasheet
from rooflab.report.verdicts import (NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, gpu_order, judge, ratio_claims,
                                     verdict_table)
from rooflab.schema import columns, validate_frame

H100, H100_ENTRY, H200 = "nvidia-h100-80gb-hbm3", "nvidia-h100-sxm", "nvidia-h200"


def row(gpu, impl, ms, rows=8192, cols=4096, timing="events", dtype="float16", spread=0.01, **extra):
    r = dict.fromkeys(columns("softmax"))
    nbytes = 2 * rows * cols * 2
    r.update(gpu=gpu, study="softmax", impl=impl, dtype=dtype, timing=timing, status="ok", rows=rows, cols=cols,
             median_ms=ms, p20_ms=ms * (1 - spread), p80_ms=ms * (1 + spread), ci_low_ms=ms * (1 - spread),
             ci_high_ms=ms * (1 + spread), reps=10, bytes=nbytes, tbps=nbytes / (ms * 1e-3) / 1e12)
    r.update(extra)
    return r


def measured(*rows):
    return validate_frame(pd.DataFrame(list(rows), columns=list(columns("softmax"))), "rows")


def claim(impl, ms, rows=8192, cols=4096):
    r = row(H100_ENTRY, impl, ms, rows, cols, source="001_x.txt", section="Results")
    r.update(p20_ms=None, p80_ms=None, ci_low_ms=None, ci_high_ms=None, tbps=None)
    return pd.Series(r)


def test_a_device_folder_and_its_datasheet_entry_are_one_model():
    assert datasheet.same_model(H100, H100_ENTRY) and datasheet.same_model(H100_ENTRY, H100)
    assert datasheet.same_model(H200, H200)
    assert not datasheet.same_model(H200, H100_ENTRY)            # compute twins, not one model
    assert not datasheet.same_model("some-unknown-gpu", H100_ENTRY)
    assert gpu_order([H200, H100, "a-gpu"], H100_ENTRY, [H200]) == [H100, H200, "a-gpu"]
    assert gpu_order([H200, H100], "nvidia-rtx-3050", [H200]) == [H200, H100]


def test_a_memory_bound_claim_is_judged_on_its_own_model_not_the_lead():
    ours = measured(row(H200, "torch", 0.050), row(H100, "torch", 0.1331))
    v = judge(claim("torch", 0.133), ours, prefer=[H200])
    assert v.ours_gpu == H100 and v.verdict == REPRODUCED
    assert "the claim's GPU model (NVIDIA H100 SXM5 80 GB)" in v.note
    assert judge(claim("torch", 0.100), ours, prefer=[H200]).verdict == NOT_REPRODUCED
    # without the H100's rows the same claim is only set beside the lead GPU's
    alone = judge(claim("torch", 0.133), measured(row(H200, "torch", 0.050)), prefer=[H200])
    assert alone.ours_gpu == H200 and alone.verdict == NOT_COMPARABLE


def test_a_launch_caveat_gives_the_kernel_time_of_the_gpu_judged():
    small = dict(rows=256, cols=256)
    ours = measured(row(H100, "seed_rowwise", 0.040, **small), row(H100, "seed_multipass", 0.050, **small),
                    row(H100, "seed_rowwise", 0.00198, timing="cupti", **small),
                    row(H200, "seed_rowwise", 0.030, **small), row(H200, "seed_multipass", 0.045, **small),
                    row(H200, "seed_rowwise", 0.0015, timing="cupti", **small))
    published = pd.DataFrame([claim("seed_rowwise", 0.038, **small), claim("seed_multipass", 0.052, **small)])
    published["gpu"] = "nvidia-rtx-3050"                      # a GPU we did not measure: the lead judges
    (r,) = ratio_claims(published, ours, prefer=[H200])
    assert r.ours_gpu == H200 and r.ours == pytest.approx(0.045 / 0.030)
    assert "the kernel alone takes 1.5 us here" in r.note and "1.98" not in r.note
    v = judge(published.iloc[0], ours, prefer=[H200])
    assert v.ours_gpu == H200 and "the kernel alone takes 1.5 us here" in v.note


def test_worded_claims_are_judged_on_one_gpu():
    shapes = [(1024, 128), (4096, 512), (8192, 1024)]
    rows = []
    for r_, c_ in shapes:   # torch faster on the H100 at every shape, slower on the H200
        rows += [row(H100, "seed_rowwise", 0.020, r_, c_), row(H100, "torch", 0.010, r_, c_),
                 row(H200, "seed_rowwise", 0.010, r_, c_), row(H200, "torch", 0.020, r_, c_)]
    words = [dict(kind="slower_below", source="001_x.txt", section="s", claim="c", gpu=H100_ENTRY, study="softmax",
                  dtype="float16", slower="seed_rowwise", faster="torch", max_cols=1024)]
    table = verdict_table(pd.DataFrame(columns=list(columns("softmax"))), measured(*rows), [H200], claims=words)
    (v,) = table.to_dict("records")
    assert v["ours_gpu"] == H100 and (v["ours"], v["claimed"]) == (3, 3) and v["verdict"] == REPRODUCED
    assert "the claim's GPU model" in v["note"]
    words[0]["gpu"] = "nvidia-rtx-3050"                      # not measured: the lead GPU, where torch loses
    (v,) = verdict_table(pd.DataFrame(columns=list(columns("softmax"))), measured(*rows), [H200],
                         claims=words).to_dict("records")
    assert v["ours_gpu"] == H200 and v["ours"] == 0 and v["verdict"] == NOT_REPRODUCED
    assert v["note"].startswith(f"measured on {H200}:")


def test_the_amdahl_claim_takes_the_lead_gpu_when_its_own_is_not_measured():
    blocks = pd.DataFrame([dict(gpu=gpu, phase="prefill", seqlen=2048, cache_len=None, dtype="float16", share=share,
                                part_speedup=k, bound=1 / (1 - share), predicted=1 / ((1 - share) + share / k),
                                measured=m, measured_low=m * 0.98, measured_high=m * 1.02)
                           for gpu, share, k, m in ((H100, 0.14, 2.15, 1.09), (H200, 0.16, 2.97, 1.11))])
    words = [dict(kind="amdahl", source="000_x.txt", section="s", claim="c", gpu="nvidia-rtx-3050", phase="prefill",
                  seqlen=2048, share=0.21, part_speedup=1.49, measured=1.074, bound=1.266)]
    ours = measured(row(H200, "torch", 0.05))
    (v,) = verdict_table(pd.DataFrame(columns=list(columns("softmax"))), ours, [H200], blocks,
                         claims=words).to_dict("records")
    assert v["ours_gpu"] == H200 and v["ours"] == pytest.approx(1.11) and "softmax 16% of the eager block" in v["note"]
