"""The seeds' softmax designs (kernels.seeds.softmax) in Triton's CPU interpreter against float64.

Tolerances as in test_softmax.py: fp32 rtol 1e-5 / atol 1e-6, fp16 rtol 2e-3 / atol 1e-5,
bf16 rtol 1.6e-2 / atol 1e-4 (multipass rounds exp(x - max) to the output dtype before the sum
and the divide, so its fp16/bf16 error is about twice rowwise's; the tolerance covers both).
"""
import pytest
import torch

from kernels.seeds import softmax as seeds

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6),
       torch.float16: dict(rtol=2e-3, atol=1e-5),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-4)}
NAMES = ["seed_rowwise", "seed_multipass"]


@pytest.fixture
def poison_empty_like(monkeypatch):
    """Outputs the seeds allocate with empty_like start as NaN (multipass zero-fills by design)."""
    empty_like = torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda *a, **k: empty_like(*a, **k).fill_(float("nan")))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("cols", [1, 7, 128, 1000, 4097])
@pytest.mark.parametrize("name", NAMES)
def test_seed_matches_reference(poison_empty_like, name, cols, dtype):
    x = torch.randn(5, cols) * 3
    x[0, ::3] = float("-inf")
    x[2] = float("-inf")                 # an all -inf row: NaN, as torch.softmax gives
    x = x.to(dtype)
    out = getattr(seeds, name)(x)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out.double(), torch.softmax(x.double(), -1), equal_nan=True, **TOL[dtype])


@pytest.mark.parametrize("name", NAMES)
def test_seed_non_contiguous_and_empty(name):
    x = torch.randn(6, 40)[:, 3:30]
    torch.testing.assert_close(getattr(seeds, name)(x).double(), torch.softmax(x.double(), -1), **TOL[torch.float32])
    assert getattr(seeds, name)(torch.randn(0, 5)).shape == (0, 5)


def test_supports_limit():
    for name in NAMES:
        assert seeds.supports(name, 1) and seeds.supports(name, seeds.MAX_COLS)
        assert not seeds.supports(name, seeds.MAX_COLS + 1) and not seeds.supports(name, 0)
    with pytest.raises(ValueError, match="unknown seed design"):
        seeds.supports("seed_tiled", 10)


@pytest.mark.parametrize("name", NAMES)
def test_seed_bad_input(name):
    fn = getattr(seeds, name)
    with pytest.raises(ValueError, match="at most"):
        fn(torch.randn(1, seeds.MAX_COLS + 1))
    with pytest.raises(ValueError, match="2 dimensions"):
        fn(torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="dtype int32"):
        fn(torch.zeros(2, 3, dtype=torch.int32))
