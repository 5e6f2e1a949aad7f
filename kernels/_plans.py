"""Plan caches: a repeat call of a kernel wrapper costs a dict lookup, an allocation and a launch.

A wrapper's first call with a given layout (shapes, strides, dtypes, devices, the data
pointers' offsets from 16 bytes and the options) validates its inputs, chooses the strategy and
launch parameters, and stores them as a plan under that key; later calls with the same key skip
the validation. The key holds everything a Triton launch specialises on: integer arguments equal
to 1 or divisible by 16 come from the shapes and strides, pointer alignment from the offsets
(buffers a wrapper allocates itself are checked at launch), so a plan never serves a tensor that
would compile differently. The caches hold PLAN_CACHE_SIZE plans each, the oldest dropped first.

On a GPU a plan also holds the compiled kernel (`Launch`), launched through Triton's own
launcher without `JITFunction.run`'s per-call argument binding and cache-key hashing; in
Triton's CPU interpreter the plan launches through the plain `kernel[grid](...)` path. A kernel
that needs no global scratch goes straight to the compiled C launcher while no launch hook is
registered (knobs.runtime.launch_enter_hook / launch_exit_hook, e.g. a profiler's): no launch
metadata is built and no empty hook chain is called. A kernel with scratch (tensor descriptors
made on the device) goes through its runner, which allocates it, with the same savings. H200
host, repeat softmax() call of a 256x256 fp32 tensor: 9.5 us through CompiledKernel.run, 5.5 us
through the C launcher. The launcher's C arguments around the stream are bound once per plan
(`Launch.tail`, after the grid), the current device and stream come from torch's C getters
(torch.cuda.current_device runs a lazy-initialisation check each call), and a wrapper may pass a
tensor as its address (an int): Triton's launcher then neither calls its data_ptr() nor asks the
driver about it (cuPointerGetAttribute). softmax() passes its out and x so, decode its nine
tensors (softmax, probes/softmax_host.py, another H200 host, us a call over 200 back to back: the
stream 0.26-0.49 against 0.46-0.78 from Triton's driver, the launch of two addresses 6.4-7.0
against 6.7-7.4 for the tensors; decode's addresses are not yet measured apart).

A plan whose later calls change only a few addresses (softmax: out and x) may launch through
kernels._lean_launch instead (`Launch.lean`): its fixed arguments are packed once, and a call
passes the blob, the stream and the addresses to one C function. H200, probes/softmax_host.py
DIAG=lean, host us a call over 200 back to back, Triton's C launcher / the lean one: the softmax
kernel's launch alone 5.3-7.8 / 4.3-5.8 at eight shapes (rows, row and split plans, the cooperative
one included), the empty kernel's 5.3-7.8 / 4.4-6.1; the whole repeat call 10.9-15.6 / 9.2-15.1
(torch.softmax 7.9-12.3 on that host). Triton's launch hooks, when registered, take the calls
back through Triton's launcher (`hooked`).

Where kernels._native_replay builds (a C++ compiler and torch's headers), softmax hands each such
plan to it as well, and a repeat call takes it before any Python runs: key, allocation and launch in
C++, the same blob launched (H200 host, the sweep's host timing at the 21 softmax cases under 8 MB:
a median 0.97x torch.softmax's host time, against 1.15x through the Python replay below).

A replay's output comes from `new_output`: torch.empty_like for a contiguous input (3.5 us of
host time on an H200 host against 7.7 for torch.empty(shape, dtype=, device=)).
"""
from __future__ import annotations

import contextlib

import torch
from triton import knobs

from kernels._lean_launch import module as lean_module
from kernels._lean_launch import pack as lean_pack

# torch's C getters of the current CUDA device and its current stream (the stream getter is the one
# Triton's driver uses; the device getter skips torch.cuda.current_device's lazy-initialisation
# check, and a plan exists only after a launch). None in a CPU build of torch, which launches nothing.
_get_device = getattr(torch._C, "_cuda_getDevice", None)
_get_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

_RUNTIME = knobs.runtime     # Triton's runtime knobs: the launch hooks a replay honours

PLAN_CACHE_SIZE = 512        # plans kept per wrapper; the oldest is dropped beyond this
ALIGN = 16                   # bytes: Triton specialises pointer arguments on this alignment


def on_device(t: torch.Tensor):
    """A context that makes t's CUDA device current while a kernel is launched on it (Triton launches
    on the current device), or nothing when it already is, or t is not on a GPU."""
    if t.is_cuda and t.device.index != _get_device():
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


def remember(plans: dict, key, plan, size: int | None = None) -> None:
    """Store `plan` under `key`, dropping the oldest entry once `size` (PLAN_CACHE_SIZE) are held."""
    if len(plans) >= (size or PLAN_CACHE_SIZE):
        del plans[next(iter(plans))]
    plans[key] = plan


def layout(t) -> tuple:
    """What a launch specialises on for tensor t: shape, strides, dtype, device, data pointer % ALIGN."""
    return t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % ALIGN


def new_output(t, like: bool):
    """An uninitialised tensor of t's shape, dtype and device: torch.empty_like(t) when `like` (t is
    contiguous, as every input of a plan whose key holds its strides), else a contiguous one."""
    return torch.empty_like(t) if like else torch.empty(t.shape, dtype=t.dtype, device=t.device)


def aligned(*tensors) -> bool:
    """True when every tensor's data pointer is a multiple of ALIGN bytes."""
    for t in tensors:
        if t.data_ptr() % ALIGN:
            return False
    return True


class Launch:
    """A compiled kernel and its grid, launched on the current stream the way JITFunction.run does.

    `compiled` is what `kernel[grid](...)` returned on the call that built the plan. `stream()`
    gives the current stream's handle, or None when the current CUDA device is not the one the
    kernel was loaded on (the caller then launches through Triton). `__call__(stream, *args)`
    takes that call's arguments in the kernel's signature order, constexprs included, with
    tensors of the same dtypes and alignment.
    """
    __slots__ = ("compiled", "grid", "device", "direct", "tail")

    def __init__(self, compiled, grid: tuple[int, ...]):
        self.compiled = compiled
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.device = _get_device()
        run = compiled.run
        # kernels without scratch: the C launcher and its arguments around the stream, bound once
        # (grid; function, cooperative, PDL, no scratch, packed metadata, no launch metadata or hooks)
        self.direct = None
        if (hasattr(run, "launch") and not getattr(run, "global_scratch_size", 1)
                and not getattr(run, "profile_scratch_size", 1)):
            self.direct = run.launch
            self.tail = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None,
                         compiled.packed_metadata, None, None, None)

    def stream(self) -> int | None:
        device = _get_device()
        return _get_stream(device) if device == self.device else None

    def lean(self, args: tuple, slots: tuple[int, ...]):
        """(C launcher, blob) that launch this kernel over its grid with `args` (signature order,
        constexprs included) but for the addresses at `slots`, given per call
        (`launcher(blob, stream, *addresses)`, kernels._lean_launch), or None where the lean
        launcher cannot be built or cannot describe the kernel. The caller keeps `args` alive
        (tensors among them are passed by address)."""
        module = lean_module()
        if module is None:
            return None
        blob = lean_pack(self.compiled, self.grid, args, slots, self.device)
        return None if blob is None else (module.launch, blob)

    def __call__(self, stream: int, *args) -> None:
        with_hooks = hooked()
        if self.direct is not None and not with_hooks:
            self.direct(*self.grid, stream, *self.tail, *args)
            return
        grid, k = self.grid, self.compiled
        if with_hooks:
            k.run(grid[0], grid[1], grid[2], stream, k.function, k.packed_metadata,
                  k.launch_metadata(grid, stream, *args), _RUNTIME.launch_enter_hook,
                  _RUNTIME.launch_exit_hook, *args)
        else:   # the runner allocates the kernel's scratch; no metadata or hooks to pass
            k.run(grid[0], grid[1], grid[2], stream, k.function, k.packed_metadata, None, None, None, *args)


def hooked() -> bool:
    """True while a Triton launch hook is registered (a profiler's): launches then go through
    Triton's launcher, which calls the hooks."""
    return bool(_RUNTIME.launch_enter_hook.calls or _RUNTIME.launch_exit_hook.calls)


def current_stream() -> int:
    """Handle of the stream Triton launches on now (the current device's current stream)."""
    return _get_stream(_get_device())
