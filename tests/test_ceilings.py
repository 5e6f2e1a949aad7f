"""The matmul ceiling takes the best of its candidates (sizes and operand distributions)."""
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
    """ceilings._best stubbed: it records the bytes each ranking was for and names "fast" the winner."""
    works = []

    def fake_best(candidates, work):
        works.append(work)
        return 1.0, "fast"
    monkeypatch.setattr(ceilings, "_best", fake_best)
    return works


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
    assert ranked == [2 * 2**20, 4 * 2**20]                  # the whole buffer keeps read_tbps's winner
    assert timed == [("fast", 2**19), ("fast", 2**20), ("slow", 2**21)]
    assert all(r[1] == pytest.approx(1.0) and r[2] == "TB/s" for r in rows)
    assert rows[0][3] == "fast, first 2 MiB, kernel time (CUPTI)"
    assert rows[-1][3] == "slow, whole buffer, kernel time (CUPTI)"


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
    assert ranked == [2 * 2**20, 4 * 2**20, 16 * 2**20]     # bytes moved, read + written
    assert timed == [("fast", 2**18, 2**18), ("fast", 2**19, 2**19), ("fast", 2**21, 2**21)]
    assert all(r[1] == pytest.approx(1.0) and r[2] == "TB/s" for r in rows)
    assert rows[0][3] == "fast, 1 MiB read and written, kernel time (CUPTI)"
