"""kernels._plans.Launch: which launcher a replay goes through (a stand-in compiled kernel records
the calls; no GPU needed)."""
import pytest
from triton import knobs

from kernels import _plans


class _Runner:
    """CompiledKernel.run as Triton 3.6's CUDA launcher exposes it: callable, with the C launch."""

    def __init__(self, calls, scratch=0):
        self.calls, self.global_scratch_size, self.profile_scratch_size = calls, scratch, 0
        self.launch_cooperative_grid, self.launch_pdl = True, False

    def __call__(self, *args):
        self.calls.append(("run", args))

    def launch(self, *args):
        self.calls.append(("c", args))


class _Compiled:
    def __init__(self, calls, scratch=0):
        self.run, self.function, self.packed_metadata = _Runner(calls, scratch), 1234, (4, 1, 0)

    def launch_metadata(self, grid, stream, *args):
        return "metadata"


@pytest.fixture
def calls(monkeypatch):
    """torch's device and stream getters stood in for (a CPU build of torch has neither): the
    current device is 0 and its current stream's handle 77."""
    monkeypatch.setattr(_plans, "_get_device", lambda: 0)
    monkeypatch.setattr(_plans, "_get_stream", lambda device: 77 if device == 0 else None)
    return []


def test_stream_is_the_current_streams_handle_on_the_kernels_device(calls, monkeypatch):
    launch = _plans.Launch(_Compiled(calls), (8,))
    assert launch.device == 0 and launch.stream() == 77 and _plans.current_stream() == 77
    monkeypatch.setattr(_plans, "_get_device", lambda: 1)   # another device is current: no direct launch
    assert launch.stream() is None


def test_a_kernel_without_scratch_goes_straight_to_the_c_launcher(calls):
    _plans.Launch(_Compiled(calls), (8, 2))(77, "out", "x", 5)
    (kind, args), = calls
    assert kind == "c"
    assert args == (8, 2, 1, 77, 1234, True, False, None, None, (4, 1, 0), None, None, None, "out", "x", 5)


def test_a_kernel_with_scratch_goes_through_its_runner(calls):
    _plans.Launch(_Compiled(calls, scratch=128), (8,))(77, "out")
    (kind, args), = calls
    assert kind == "run"
    assert args == (8, 1, 1, 77, 1234, (4, 1, 0), None, None, None, "out")     # no metadata, no hooks


def test_a_registered_launch_hook_is_honoured(calls):
    seen = []
    hook = seen.append
    knobs.runtime.launch_enter_hook.add(hook)
    try:
        _plans.Launch(_Compiled(calls), (8,))(77, "out")
    finally:
        knobs.runtime.launch_enter_hook.remove(hook)
    (kind, args), = calls
    rt = knobs.runtime
    assert kind == "run" and args[6:9] == ("metadata", rt.launch_enter_hook, rt.launch_exit_hook)


def test_new_output_matches_the_input_or_is_contiguous():
    import torch
    x = torch.randn(4, 6, dtype=torch.float16)
    like = _plans.new_output(x, True)
    assert (like.shape, like.stride(), like.dtype) == (x.shape, x.stride(), x.dtype)
    t = x.t()                                             # not contiguous: a contiguous output of its shape
    out = _plans.new_output(t, False)
    assert out.shape == t.shape and out.is_contiguous() and out.dtype == t.dtype
