"""The ceilings take the best of their candidates: the matmul over sizes and operand distributions
(do_bench), the bandwidth ceilings on kernel time (CUPTI), each size its own ranking."""
import pytest
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


@pytest.fixture
def ranked(monkeypatch):
    """ceilings._fastest stubbed: it records the candidates of each ranking and names "fast" the winner."""
    rankings = []

    def fake_fastest(candidates):
        rankings.append(candidates)
        return "fast"
    monkeypatch.setattr(ceilings, "_fastest", fake_fastest)
    return rankings


def test_sized_reads_time_each_smaller_prefix_and_the_whole_buffer_on_kernel_time(monkeypatch, ranked):
    timed = []
    monkeypatch.setattr(ceilings, "read_candidates",
                        lambda src: {"fast": ("fast", src.numel()), "slow": ("slow", src.numel())})

    def kernel_ms(fn):
        timed.append(fn)
        return fn[1] * 4 / 1e9                               # 1 TB/s whatever the size

    src = torch.empty(8 * 2**20 // 4)                        # an 8 MiB fp32 buffer
    rows = ceilings.sized_reads(src, "slow", ("slow", src.numel()), [2, 4, 8, 16, 2], kernel_ms=kernel_ms)
    assert [r[0] for r in rows] == ["read_tbps_2mib", "read_tbps_4mib", "read_tbps_8mib"]
    # the candidates over each smaller prefix (elements); the whole buffer keeps read_tbps's winner
    assert [c["fast"][1] for c in ranked] == [2**19, 2**20]
    assert timed == [("fast", 2**19), ("fast", 2**20), ("slow", 2**21)]
    assert all(r[1] == pytest.approx(1.0) and r[2] == "TB/s" for r in rows)
    assert rows[0][3] == "fast, first 2 MiB, kernel time (CUPTI), best of 3 bursts of 15"
    assert rows[-1][3] == "slow, whole buffer, kernel time (CUPTI), best of 3 bursts of 15"


def test_sized_copies_time_each_size_that_fits_on_kernel_time(monkeypatch, ranked):
    timed = []
    monkeypatch.setattr(ceilings, "copy_candidates",
                        lambda dst, src: {"fast": ("fast", dst.numel(), src.numel()), "slow": ("slow", 0, 0)})

    def kernel_ms(fn):
        timed.append(fn)
        return 2 * fn[2] * 4 / 1e9                           # 1 TB/s of bytes read + written

    src, dst = torch.empty(8 * 2**20 // 4), torch.empty(8 * 2**20 // 4)    # 8 MiB buffers: copies up to 16 MiB
    rows = ceilings.sized_copies(dst, src, [4, 2, 16, 32, 4], kernel_ms=kernel_ms)
    assert [r[0] for r in rows] == ["copy_tbps_2mib", "copy_tbps_4mib", "copy_tbps_16mib"]
    # copies of n / 2 MiB each way: n MiB moved, read + written
    assert [2 * c["fast"][2] * 4 for c in ranked] == [2 * 2**20, 4 * 2**20, 16 * 2**20]
    assert timed == [("fast", 2**18, 2**18), ("fast", 2**19, 2**19), ("fast", 2**21, 2**21)]
    assert all(r[1] == pytest.approx(1.0) and r[2] == "TB/s" for r in rows)
    assert rows[0][3] == "fast, 1 MiB read and written, kernel time (CUPTI), best of 3 bursts of 15"


def test_fastest_ranks_on_median_kernel_time_in_shuffled_rounds(monkeypatch):
    """_fastest warms every candidate up once, then times RANK_ROUNDS rounds of RANK_CALLS calls of
    each, in shuffled order in one session, and names the lowest median, not the lowest sample."""
    calls = []
    candidates = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    times = {"a": [1.0, 9.0, 9.0], "b": [2.0, 2.0, 2.0], "c": [3.0, 3.0, 0.1]}   # per round

    class Timer:
        def cupti_calls(self, fns):
            seen = {name: 0 for name in candidates}
            out = []
            for fn in fns:
                fn()
                name = calls[-1]
                out.append(times[name][seen[name] // ceilings.RANK_CALLS])
                seen[name] += 1
            return out
    monkeypatch.setattr(ceilings, "_timer", lambda: Timer())
    assert ceilings._fastest(candidates) == "b"
    warm, timed = calls[:3], calls[3:]
    assert sorted(warm) == ["a", "b", "c"]
    assert all(timed.count(n) == ceilings.RANK_ROUNDS * ceilings.RANK_CALLS for n in candidates)
    rounds = [timed[i:i + 3 * ceilings.RANK_CALLS] for i in range(0, len(timed), 3 * ceilings.RANK_CALLS)]
    assert all(sorted(set(r)) == ["a", "b", "c"] for r in rounds)       # every round holds each candidate


def test_kernel_ms_takes_the_fastest_bursts_median(monkeypatch):
    """A winner is warmed up once, then timed in RETIME_BURSTS bursts of RETIME_CALLS calls; its
    value is the lowest burst median (not the lowest sample, nor the pooled median)."""
    bursts = iter([[2.0, 2.0, 0.1], [1.5, 1.5, 9.0], [3.0, 3.0, 3.0]])
    asked, calls = [], []

    class Timer:
        def cupti(self, fn, n):
            asked.append(n)
            return next(bursts)
    monkeypatch.setattr(ceilings, "_timer", lambda: Timer())
    assert ceilings._kernel_ms(samples=3, bursts=3)(lambda: calls.append(1)) == 1.5
    assert asked == [3, 3, 3] and calls == [1]
