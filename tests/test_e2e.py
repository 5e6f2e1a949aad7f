"""The end-to-end decoder block: every configuration computes the same function (CPU, float32)."""
import pytest
import torch

from rooflab.e2e import CONFIGS, DecoderBlock, PartTimer, flops


@pytest.fixture
def block():
    return DecoderBlock(width=64, heads=4, kv_heads=2, mlp_ratio=4, dtype=torch.float32, device="cpu")


def test_eager_matches_sdpa_in_prefill(block):
    x = torch.randn(2, 9, 64)
    eager = block.forward(x, "eager", PartTimer(False))
    sdpa = block.forward(x, "sdpa", PartTimer(False))
    torch.testing.assert_close(eager, sdpa, rtol=1e-5, atol=1e-5)


def test_decode_step_equals_the_last_prefill_position(block):
    x = torch.randn(1, 7, 64)
    full = block.forward(x, "sdpa", PartTimer(False))
    # keys/values of the first six tokens, as a cache whose last slot the step fills
    h = torch.nn.functional.rms_norm(x, (64,), block.ln1)
    _, k, v = block._split(h @ block.w_qkv)
    cache = (k.clone(), v.clone())
    cache[0][:, :, -1].fill_(float("nan"))   # poison the slot the step must write
    cache[1][:, :, -1].fill_(float("nan"))
    for config in ("eager", "sdpa"):
        step = block.forward(x[:, -1:], config, PartTimer(False), tuple(c.clone() for c in cache))
        torch.testing.assert_close(step, full[:, -1:], rtol=1e-5, atol=1e-5)


def test_our_kernels_swap_in_without_changing_the_result(block):
    x = torch.randn(1, 5, 64)
    ref = block.forward(x, "eager", PartTimer(False))
    torch.testing.assert_close(block.forward(x, "ours_softmax", PartTimer(False)), ref, rtol=1e-4, atol=1e-4)
    half = block.to(torch.float16)            # the attention kernels take fp16/bf16
    ref16 = half.forward(x.half(), "sdpa", PartTimer(False)).float()
    ours16 = half.forward(x.half(), "ours_attention", PartTimer(False)).float()
    torch.testing.assert_close(ours16, ref16, rtol=1e-2, atol=1e-2)


def test_our_decode_kernel_swaps_in(block):
    half = block.to(torch.float16)
    x = torch.randn(1, 1, 64, dtype=torch.float16)
    shape = (1, 2, 9, 16)
    cache = (torch.randn(shape, dtype=torch.float16), torch.randn(shape, dtype=torch.float16))
    ref = half.forward(x, "sdpa", PartTimer(False), tuple(c.clone() for c in cache)).float()
    ours = half.forward(x, "ours_attention", PartTimer(False), tuple(c.clone() for c in cache)).float()
    torch.testing.assert_close(ours, ref, rtol=1e-2, atol=1e-2)


def test_flops_count_matmuls_and_halve_causal_prefill(block):
    dense = 2.0 * block.params() * 8
    assert flops(block, 1, 8, 0) == pytest.approx(dense + 4.0 * 4 * 8 * 8 * 16 / 2)
    assert flops(block, 1, 1, 100) == pytest.approx(2.0 * block.params() + 4.0 * 4 * 100 * 16)


def test_every_phase_measures_the_pytorch_default_and_our_swap():
    for phase in ("prefill", "decode"):
        assert {"eager", "ours_softmax", "ours_attention"} <= set(CONFIGS[phase])


def test_bad_head_split_is_refused():
    with pytest.raises(ValueError, match="do not divide"):
        DecoderBlock(width=64, heads=5, kv_heads=1, mlp_ratio=4, dtype=torch.float32, device="cpu")


def test_sustain_runs_for_its_time_and_at_least_min_calls():
    import time

    from rooflab.e2e import _sustain
    assert _sustain(lambda: None, 0.0, min_calls=3) == 3
    start = time.perf_counter()
    calls = _sustain(lambda: time.sleep(0.001), 30.0, min_calls=1)
    assert time.perf_counter() - start >= 0.03 and calls >= 2


class _Graph:
    """Stands in for a captured torch.cuda.CUDAGraph."""
    released = False

    def replay(self):
        pass

    def reset(self):
        self.released = True


def test_releasing_graphs_turns_their_rows_into_errors_and_drops_their_replays():
    from rooflab.e2e import _release_graphs

    graph = _Graph()
    ready = {"eager": ({"impl": "eager"}, graph), "sdpa": ({"impl": "sdpa"}, "graph capture: failed"),
             "ours_softmax": ({"impl": "ours_softmax"}, None)}
    replays = {"eager": [1.0, 2.0], "sdpa": [], "ours_softmax": []}
    assert _release_graphs(ready, replays, "graph released: out of memory") == 1
    assert graph.released and replays["eager"] == []
    assert ready["eager"] == ({"impl": "eager"}, "graph released: out of memory")
    assert ready["sdpa"][1] == "graph capture: failed" and ready["ours_softmax"][1] is None
    assert _release_graphs(ready, replays, "again") == 0


def test_out_of_memory_with_graphs_held_releases_them_and_calls_once_more():
    from rooflab.e2e import _freeing_graphs

    def failing(times, error):
        calls = []

        def call():
            calls.append(1)
            if len(calls) <= times:
                raise error
            return len(calls)
        return call, calls

    graph = _Graph()
    ready = {"eager": ({"impl": "eager"}, graph)}
    call, calls = failing(1, RuntimeError("CUDA out of memory. Tried to allocate 16.00 GiB"))
    assert _freeing_graphs(call, ready, {"eager": [1.0]}) == 2
    assert graph.released and ready["eager"][1].startswith("graph released: out of memory")

    call, calls = failing(2, RuntimeError("CUDA out of memory"))        # no graph left to give up
    with pytest.raises(RuntimeError, match="out of memory"):
        _freeing_graphs(call, ready, {})
    assert len(calls) == 1

    held = {"eager": ({"impl": "eager"}, _Graph())}
    call, calls = failing(1, ValueError("q is not 4-D"))                 # not memory: no retry
    with pytest.raises(ValueError):
        _freeing_graphs(call, held, {})
    assert len(calls) == 1 and not held["eager"][1].released


def test_a_configuration_that_fails_is_a_valid_row_and_the_others_are_measured(block, monkeypatch):
    """measure() with its GPU parts stood in for (no graphs, fixed samples): a configuration whose
    check runs out of memory is one `oom` row that the results schema accepts (timing included),
    and the case's other configurations are measured."""
    import pandas as pd

    from rooflab import e2e
    from rooflab.schema import columns, validate_frame

    def checked(block_, x, config, cache, ref):
        if config == "eager":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return 0.0, 0.0
    monkeypatch.setattr(e2e, "_checked_and_warm", checked)
    monkeypatch.setattr(e2e, "_capture", lambda *args: None)
    monkeypatch.setattr(e2e, "_one_round", lambda *args: ([{"total": 1.0, "attention": 0.4}] * 3, []))
    rows = [dict(r, gpu="g", study="e2e", dtype="float32", ceiling_name="matmul_fp16_tflops")
            for r in e2e.measure(block, "prefill", 16, 1, 6, 3, torch.float32, device="cpu")]
    frame = validate_frame(pd.DataFrame(rows, columns=list(columns("e2e"))), "e2e.csv")
    eager = frame[frame["impl"] == "eager"]
    assert list(eager["status"]) == ["oom"] and list(eager["timing"]) == ["events"]
    assert set(frame[frame["impl"] != "eager"]["status"]) == {"ok"}
    assert set(frame["impl"]) == set(CONFIGS["prefill"])
