"""Test set-up: kernels run in Triton's CPU interpreter; the repository root is importable."""
from rooflab import interpreter

interpreter.enable()  # TRITON_INTERPRET=1 before anything imports the kernels

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
