"""The lean launcher's blob (kernels._lean_launch.pack): header, parameter layout, refusals; and, on a
GPU, softmax's repeat calls through it."""
import struct
import types

import pytest
import torch

from kernels import _lean_launch as lean

NAMES = ["out_ptr", "x_ptr", "stride", "n", "flag", "scale", "ONE", "BLOCK", "parts_ptr"]
TYPES = ["*fp16", "*fp16", "i32", "i64", "i1", "fp32", "constexpr", "constexpr", "*fp32"]


def compiled(types_=None, **meta):
    """A stand-in of what kernel[grid](...) returns: source signature, metadata, function handle."""
    types_ = types_ or TYPES
    metadata = dict(num_warps=4, shared=1024, num_ctas=1, global_scratch_size=0, profile_scratch_size=0,
                    launch_cooperative_grid=True, launch_pdl=False)
    metadata.update(meta)
    src = types.SimpleNamespace(signature=dict(zip(NAMES, types_)), fn=types.SimpleNamespace(arg_names=NAMES))
    return types.SimpleNamespace(src=src, metadata=types.SimpleNamespace(**metadata), function=0xDEADBEEF)


class Buffer:
    """A tensor-like argument: only its address is read."""
    def data_ptr(self):
        return 0x7F0000001000


ARGS = (0, 0, 7, 2**40, True, 0.5, 1, 64, Buffer())


def unpack(blob):
    header = lean._HEADER.unpack(blob[:lean._HEADER.size])
    function, (gx, gy, gz, block, shared, coop, pdl, device, n_params, n_slots, size, _) = header[0], header[1:13]
    offsets = header[13:13 + lean.MAX_PARAMS][:n_params]
    slots = header[13 + lean.MAX_PARAMS:][:n_slots]
    return dict(function=function, grid=(gx, gy, gz), block=block, shared=shared, coop=coop, pdl=pdl,
                device=device, offsets=offsets, slots=slots, data=blob[lean._HEADER.size:lean._HEADER.size + size])


def test_blob_holds_the_launch_and_each_parameter_at_its_alignment():
    got = unpack(lean.pack(compiled(), (5,), ARGS, (0, 1), device=3))
    assert got["function"] == 0xDEADBEEF and got["grid"] == (5, 1, 1) and got["block"] == 128
    assert (got["shared"], got["coop"], got["pdl"], got["device"]) == (1024, 1, 0, 3)
    # out, x, stride, n, flag, scale, parts (constexprs skipped), then Triton's two scratch pointers
    sizes = [8, 8, 4, 8, 1, 4, 8, 8, 8]
    assert len(got["offsets"]) == len(sizes)
    assert all(off % size == 0 for off, size in zip(got["offsets"], sizes))
    assert list(got["slots"]) == list(got["offsets"][:2])
    data, off = got["data"], got["offsets"]
    assert struct.unpack_from("<i", data, off[2])[0] == 7
    assert struct.unpack_from("<q", data, off[3])[0] == 2**40
    assert struct.unpack_from("<b", data, off[4])[0] == 1
    assert struct.unpack_from("<f", data, off[5])[0] == 0.5
    assert struct.unpack_from("<Q", data, off[6])[0] == Buffer().data_ptr()
    assert struct.unpack_from("<QQ", data, off[7])[0] == 0 and struct.unpack_from("<Q", data, off[8])[0] == 0


@pytest.mark.parametrize("change", [
    dict(types_=TYPES[:5] + ["fp16"] + TYPES[6:]),                                  # an fp16 scalar
    dict(types_=TYPES[:8] + ["tensordesc<fp16[64, 64]>"]),                          # a tensor descriptor
    dict(types_=TYPES[:8] + [("*fp32", "*fp32")]),                                  # a tuple argument
    dict(global_scratch_size=128), dict(profile_scratch_size=64), dict(num_ctas=2),
    dict(tensordesc_meta=[{}]),
])
def test_what_the_blob_cannot_describe_is_refused(change):
    assert lean.pack(compiled(**change), (5,), ARGS, (0, 1), device=0) is None


def test_slots_must_be_pointers_and_fit():
    assert lean.pack(compiled(), (5,), ARGS, (0, 2), device=0) is None            # stride is no pointer
    assert lean.pack(compiled(), (5,), ARGS, (0, 1, 8, 0, 1), device=0) is None   # more than MAX_SLOTS
    assert lean.pack(compiled(), (5,), ARGS[:-1], (0, 1), device=0) is None       # arguments missing


def test_values_the_parameter_types_cannot_hold_are_refused():
    assert lean.pack(compiled(), (5,), ARGS[:2] + (2**40,) + ARGS[3:], (0, 1), device=0) is None   # i32
    assert lean.pack(compiled(), (5,), ARGS[:5] + ("half",) + ARGS[6:], (0, 1), device=0) is None  # fp32
    assert lean.pack(compiled(), (5,), ARGS, (0, 1), device=None) is None                         # no device


def test_a_kernel_without_its_source_is_refused():
    kernel = compiled()
    kernel.src = None
    assert lean.pack(kernel, (5,), ARGS, (0, 1), device=0) is None


def test_the_module_builds_without_a_driver_and_its_launch_errors_name_the_problem():
    module = lean.module()
    if module is None:
        pytest.skip("no C compiler or Triton NVIDIA backend here")
    blob = lean.pack(compiled(), (5,), ARGS, (0, 1), device=0)
    with pytest.raises(RuntimeError, match="shorter than its header"):
        module.launch(blob[:10], 0, 1, 2)
    with pytest.raises(RuntimeError, match="blob and addresses disagree"):
        module.launch(blob, 0, 1)
    with pytest.raises(TypeError, match="launch"):
        module.launch("blob", 0)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="libcuda"):
            module.launch(blob, 0, 1, 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("shape,dtype", [((256, 256), torch.float32), ((4096, 1), torch.float16),
                                         ((64, 5000), torch.bfloat16), ((8, 262144), torch.float16)])
def test_gpu_softmax_repeat_calls_go_through_the_lean_launcher(shape, dtype):
    """On a GPU outside the interpreter (the suite's conftest turns it on: run this file with
    --noconftest there), a repeat call launches through the lean launcher and matches the first."""
    from kernels import fused_softmax as fs
    from kernels._checks import interpreting
    if interpreting():
        pytest.skip("Triton's interpreter launches no plans directly")
    x = (torch.randn(*shape, device="cuda") * 3).to(dtype)
    x[0, ::3] = float("-inf")
    first = fs.softmax(x)
    plan = fs._PLANS[(x.shape, x.stride(), x.dtype, x.device, -1, int, x.data_ptr() % 16)]
    assert lean.module() is not None and plan.lean is not None
    for _ in range(3):
        again = fs.softmax(x)
        torch.testing.assert_close(again, first, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(again.double(), fs.reference(x), rtol=2e-2, atol=1e-4, equal_nan=True)
