"""Test set-up: kernels run in Triton's CPU interpreter; the repository root is importable."""
from rooflab import interpreter

interpreter.enable()  # TRITON_INTERPRET=1 before anything imports the kernels

import pytest  # noqa: E402
import torch  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


POISONS = {"nan": float("nan"), "finite": 7.0}


@pytest.fixture(params=list(POISONS))
def poison(request, monkeypatch):
    """Every torch.empty and torch.empty_like (outputs, partials) starts filled, so any element a
    kernel fails to write shows; each test runs twice, once on NaN and once on 7.0. NaN shows an
    unwritten element whose answer is finite; 7.0 one whose answer is NaN (an all -inf softmax row,
    a decode row whose keys are all -inf), which NaN would pass unseen, and no softmax can give 7."""
    value = POISONS[request.param]

    def filled(make):
        def made(*args, **kwargs):
            t = make(*args, **kwargs)
            return t.fill_(value) if t.is_floating_point() else t
        return made

    monkeypatch.setattr(torch, "empty", filled(torch.empty))
    monkeypatch.setattr(torch, "empty_like", filled(torch.empty_like))
    return value


@pytest.fixture
def replay(monkeypatch):
    """A stand-in for kernels._plans.Launch, which needs a GPU.

    `replay.launcher(run)` is a Launch-like class: each replay's arguments are appended to
    `replay.calls` and run in the interpreter as run(grid, args); with `replay.lean` set its
    `lean` gives a lean launcher whose replays go to `replay.lean_calls` instead. A wrapper may pass a tensor
    as its address (data_ptr(), an int), as Triton's launcher takes it; the stand-in maps the
    addresses of tensors it knows back to them before recording: those given to `track` and the
    outputs of `track_outputs(module)`'s module (its new_output, wrapped).
    """
    class Recorder:
        calls: list = []
        tensors: dict = {}

        @staticmethod
        def track(*tensors):
            for t in tensors:
                Recorder.tensors[t.data_ptr()] = t

        @staticmethod
        def resolve(args) -> tuple:
            """args with the addresses of tracked tensors replaced by the tensors."""
            return tuple(Recorder.tensors.get(a, a) if type(a) is int else a for a in args)

        @staticmethod
        def track_outputs(module):
            new_output = module.new_output

            def tracked(*args, **kwargs):
                out = new_output(*args, **kwargs)
                Recorder.track(out)
                return out
            monkeypatch.setattr(module, "new_output", tracked)

        @staticmethod
        def launcher(run):
            class Replay:
                def __init__(self, compiled, grid):
                    self.grid = grid

                def stream(self):
                    return 0

                def __call__(self, stream, *args):
                    args = Recorder.resolve(args)
                    Recorder.calls.append(args)
                    run(self.grid, args)

                def lean(self, args, slots):
                    """None (no lean launcher) unless `replay.lean`: then a stand-in of
                    kernels._lean_launch's (launch, blob) that records in `replay.lean_calls`."""
                    if not Recorder.lean:
                        return None

                    def launch(blob, stream, *addresses):
                        full = list(blob)
                        for index, address in zip(slots, addresses):
                            full[index] = address
                        full = Recorder.resolve(tuple(full))
                        Recorder.lean_calls.append(full)
                        run(self.grid, full)
                    return launch, tuple(args)
            return Replay

    Recorder.calls, Recorder.tensors, Recorder.lean, Recorder.lean_calls = [], {}, False, []
    return Recorder
