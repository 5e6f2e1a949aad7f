"""The native repeat call (kernels._native_replay): which calls it takes and which it leaves to Python,
its table's bound, and on a GPU softmax's repeat calls through it.

Without a GPU the module is built all the same (a C++ compiler and torch's headers; skipped where
there is no compiler, failed where one cannot build it): a call it takes allocates the output and
reaches the launch, which then fails naming the missing driver; a call it leaves returns None before that. Those tests launch a stand-in blob,
so they run only where there is no driver; on a GPU the last test replays real plans.
"""
import types

import pytest
import torch

from kernels import _lean_launch as lean
from kernels import _native_replay as native
from tests.test_lean_launch import ARGS, compiled


@pytest.fixture(scope="module")
def mod():
    if native.cxx() is None:
        pytest.skip("no C++ compiler here (g++, clang++ or $CXX): the native replay is not built")
    built = native.build()          # with a compiler, a failed build is a failure, not a skip
    yield built
    built.clear()


@pytest.fixture
def table(mod):
    """The module with a clean table, device 0 current, stream 7, no launch hook; `hooks` holds the
    two hook stand-ins (objects with a `calls` list, as Triton's knobs)."""
    if torch.cuda.is_available():
        pytest.skip("a driver would launch the stand-in blob's made-up function; the GPU test covers this machine")
    hooks = types.SimpleNamespace(enter=types.SimpleNamespace(calls=[]), exit=types.SimpleNamespace(calls=[]))
    state = types.SimpleNamespace(device=0, stream=7)
    mod.clear()
    mod.configure(lambda: state.device, lambda device: state.stream, hooks.enter, hooks.exit, 4)
    yield types.SimpleNamespace(mod=mod, hooks=hooks, state=state)
    mod.clear()


BLOB = lean.pack(compiled(), (5,), ARGS, (0, 1), device=0)


def taken(mod, x, dim=-1) -> bool:
    """True when replay(x, dim) takes the call: it gets as far as the launch, which fails here
    without a driver."""
    try:
        return mod.replay(x, dim) is not None
    except RuntimeError as error:
        assert "libcuda" in str(error)
        return True


def test_a_registered_layout_is_taken_and_every_other_left_to_python(table):
    mod = table.mod
    x = torch.randn(6, 40)
    mod.register(x, -1, BLOB, 0, 0, False, None)
    assert taken(mod, x) and taken(mod, torch.randn(6, 40))          # same layout, another tensor
    assert not taken(mod, x, 1)                                        # dim spelled otherwise: another plan
    assert not taken(mod, x, True) and not taken(mod, x, 1.0)          # not an int
    assert not taken(mod, torch.randn(6, 41))                          # shape
    assert not taken(mod, torch.randn(40, 6).t())                      # strides
    assert not taken(mod, x.to(torch.float64))                         # dtype
    assert not taken(mod, torch.randn(6 * 40 + 1)[1:].view(6, 40))     # address modulo 16 bytes
    assert not taken(mod, "not a tensor") and not taken(mod, None)


def test_grad_hooks_device_and_stream_leave_the_call_to_python(table):
    mod, hooks, state = table.mod, table.hooks, table.state
    x = torch.randn(3, 8)
    mod.register(x, -1, BLOB, 0, 0, False, None)
    w = x.clone().requires_grad_()
    assert not taken(mod, w)
    with torch.no_grad():
        assert taken(mod, w)                                           # no graph to record
    hooks.enter.calls.append(print)
    assert not taken(mod, x)
    hooks.enter.calls.clear()
    state.device = 1
    assert not taken(mod, x)
    state.device = 0
    mod.register(x, -1, BLOB, 0, 9, True, None)                       # stream-bound to stream 9
    assert not taken(mod, x)                                           # current stream 7
    state.stream = 9                # its stream, but no driver here: the capture check cannot say
    assert not taken(mod, x)        # that it is not capturing, so Python takes the call


def test_the_table_drops_its_oldest_plan_beyond_its_bound(table):
    mod = table.mod
    xs = [torch.randn(2, n) for n in range(1, 7)]
    for x in xs:
        mod.register(x, -1, BLOB, 0, 0, False, None)
    assert mod.held() == 4
    assert [taken(mod, x) for x in xs] == [False, False, True, True, True, True]
    mod.register(xs[2], -1, BLOB, 0, 0, False, None)                  # held already: nothing dropped
    assert mod.held() == 4 and taken(mod, xs[3])


def test_a_plan_keeps_its_python_object_alive(table):
    import gc
    import weakref

    class Plan:
        pass
    plan = Plan()
    alive = weakref.ref(plan)
    table.mod.register(torch.randn(2, 2), -1, BLOB, 0, 0, False, plan)
    del plan
    gc.collect()
    assert alive() is not None
    table.mod.clear()
    gc.collect()
    assert alive() is None


def test_register_refuses_what_is_not_a_strided_tensor(table):
    with pytest.raises(ValueError, match="strided tensor"):
        table.mod.register("x", -1, BLOB, 0, 0, False, None)


def test_a_plan_waits_for_the_build_registers_once_built_and_stops_where_it_cannot_be(monkeypatch):
    """softmax's plans (fused_softmax._Plan.go_native): while the module builds (ready() None) a
    plan keeps asking; once built it registers and the module's replay serves softmax; where it
    cannot be built (False) the plan stops asking."""
    from kernels import fused_softmax as fs
    registered = []
    built = types.SimpleNamespace(register=lambda *args: registered.append(args), replay=object())
    plan = fs._Plan(None, None, None, 1, 1)
    plan.fast, plan.lean = (types.SimpleNamespace(device=0), ()), (None, b"blob")
    monkeypatch.setattr(fs, "_native_replay", None)
    x = torch.randn(2, 3)
    for state, asking, count in ((None, True, 0), (built, False, 1)):
        monkeypatch.setattr(fs, "native_ready", lambda: state)
        plan.to_native = True
        plan.go_native(x, -1)
        assert plan.to_native is asking and len(registered) == count
    assert registered[0][0] is x and registered[0][2] == b"blob" and registered[0][-1] is plan
    assert fs._native_replay is built.replay
    monkeypatch.setattr(fs, "native_ready", lambda: False)
    plan.to_native = True
    plan.go_native(x, -1)
    assert plan.to_native is False and len(registered) == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape,dtype", [((256, 256), torch.float32), ((4096, 1), torch.float16),
                                         ((64, 5000), torch.bfloat16), ((8, 262144), torch.float16)])
def test_gpu_softmax_repeat_calls_go_through_the_native_replay(shape, dtype):
    """On a GPU outside the interpreter (run this file with --noconftest there), repeat calls are
    taken by the native replay once its module is built, and match the first call."""
    from kernels import fused_softmax as fs
    from kernels._checks import interpreting
    if interpreting():
        pytest.skip("Triton's interpreter launches no plans directly")
    assert native.module() is not None
    x = (torch.randn(*shape, device="cuda") * 3).to(dtype)
    x[0, ::3] = float("-inf")
    first = fs.softmax(x)
    fs.softmax(x)                                                     # registered by now
    out = native.module().replay(x, -1)
    assert out is not None
    torch.testing.assert_close(out, first, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(fs.softmax(x).double(), fs.reference(x), rtol=2e-2, atol=1e-4, equal_nan=True)
