"""Test set-up: kernels run in Triton's CPU interpreter; the repository root is importable."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first `import triton`

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
