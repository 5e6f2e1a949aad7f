"""Test set-up: kernels run in Triton's CPU interpreter; the repository root is importable."""
from rooflab import interpreter

interpreter.enable()  # TRITON_INTERPRET=1 before anything imports the kernels

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def poison(monkeypatch):
    """Every torch.empty (outputs, partials) starts as NaN, so any element a kernel fails to write shows."""
    empty = torch.empty

    def nan_empty(*args, **kwargs):
        t = empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", nan_empty)
