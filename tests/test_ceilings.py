"""The matmul ceiling takes the best of its candidates (sizes and operand distributions)."""
import torch

from rooflab import ceilings


def test_matmul_best_takes_the_fastest_candidate(monkeypatch):
    seen = []

    def fake_median_ms(fn):
        product = fn()
        a_min = float(product.min())
        seen.append((product.shape[0], a_min >= 0))           # uniform [0, 1) operands: no negative product
        return {(64, False): 4.0, (64, True): 3.0, (32, False): 1.0, (32, True): 0.5}[seen[-1]]

    monkeypatch.setattr(ceilings, "_median_ms", fake_median_ms)
    rate, how = ceilings.matmul_best(torch.float32, 64, device="cpu")
    assert sorted(seen) == [(32, False), (32, True), (64, False), (64, True)]
    # 2 n^3 flops over the median: 64^3 at 3 ms against 32^3 at 0.5 ms
    assert rate == max(2 * 64 ** 3 / 3.0 / 1e9, 2 * 32 ** 3 / 0.5 / 1e9)
    assert how == "torch.matmul 64^3, uniform [0, 1) operands"
