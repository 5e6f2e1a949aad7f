"""A lean launcher for plans whose arguments are fixed but for a few addresses.

A plan's repeat call (kernels._plans) launches one compiled kernel with the same grid and the same
arguments each time, except the addresses of its output and input. Triton's launcher takes every
argument from Python on every call (the grid, the stream, the function, the launch flags, the
scratch and hook objects, then each argument, through one PyArg_ParseTuple), and the kernel's own
arguments are what change least. Here a plan packs everything fixed once (`pack`: the function,
grid, block, shared memory, launch attributes and each kernel parameter's bytes, laid out as the
kernel's C signature wants them), and a call passes that blob, the stream and the addresses that
change (`launch(blob, stream, *addresses)`, a METH_FASTCALL C function): the addresses are written
into a copy of the parameters on the C stack and the kernel is launched with cuLaunchKernel
(cuLaunchKernelEx where the launch is cooperative or programmatic-dependent), the GIL released
around it as Triton's launcher does.

The C module is built once per machine with Triton's own build helper (a C compiler and libcuda,
which Triton's launchers need too) and cached in Triton's cache. Where it cannot be built, or a
kernel has what the blob does not describe (tensor descriptors, tuple arguments, clusters, global
or profile scratch, fp16/bf16 scalars), `pack` returns None and the plan launches through Triton.
"""
from __future__ import annotations

import functools
import struct

MAX_PARAMS = 64              # kernel parameters a blob describes at most (Triton's two scratch pointers included)
MAX_SLOTS = 4                # addresses a call passes at most
MAX_DATA = 1024              # bytes of parameter values at most
_HEADER = struct.Struct(f"<Q12I{MAX_PARAMS}I{MAX_SLOTS}I")   # function; grid x y z, block, shared, cooperative,
# programmatic dependent launch, device, params, slots, data bytes, spare; each param's offset; each slot's offset

# C scalar of each signature type: (struct format, bytes)
_SCALARS = {"i1": "b", "i8": "b", "i16": "h", "i32": "i", "i64": "q", "u1": "B", "u8": "B", "u16": "H",
            "u32": "I", "u64": "Q", "fp32": "f", "f32": "f", "fp64": "d"}

SOURCE = r"""
#include "cuda.h"
#include <stdint.h>
#include <string.h>
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_PARAMS %(params)d
#define MAX_SLOTS %(slots)d
#define MAX_DATA %(data)d

typedef struct {
  uint64_t function;
  uint32_t grid[3], block, shared, cooperative, pdl, device, n_params, n_slots, size, spare;
  uint32_t offsets[MAX_PARAMS];
  uint32_t slots[MAX_SLOTS];
} Header;

static PyObject* fail(CUresult code, const char* what) {
  const char* text = NULL;
  cuGetErrorString(code, &text);
  PyErr_Format(PyExc_RuntimeError, "%%s: %%s", what, text ? text : "unknown CUDA error");
  return NULL;
}

static PyObject* launch(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 2 || !PyBytes_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "launch(blob: bytes, stream: int, *addresses: int)");
    return NULL;
  }
  const char* raw = PyBytes_AS_STRING(args[0]);
  if (PyBytes_GET_SIZE(args[0]) < (Py_ssize_t)sizeof(Header)) {
    PyErr_SetString(PyExc_ValueError, "blob shorter than its header");
    return NULL;
  }
  Header h;
  memcpy(&h, raw, sizeof(Header));
  if (nargs - 2 != (Py_ssize_t)h.n_slots || h.size > MAX_DATA || h.n_params > MAX_PARAMS
      || PyBytes_GET_SIZE(args[0]) < (Py_ssize_t)(sizeof(Header) + h.size)) {
    PyErr_Format(PyExc_ValueError, "blob of %%u addresses and %%u bytes, called with %%zd addresses",
                 h.n_slots, h.size, nargs - 2);
    return NULL;
  }
  _Alignas(16) char data[MAX_DATA];
  memcpy(data, raw + sizeof(Header), h.size);
  uint64_t stream = PyLong_AsUnsignedLongLong(args[1]);
  for (uint32_t i = 0; i < h.n_slots; ++i) {
    uint64_t address = PyLong_AsUnsignedLongLong(args[2 + i]);
    memcpy(data + h.slots[i], &address, sizeof(address));
  }
  if (PyErr_Occurred()) return NULL;
  void* params[MAX_PARAMS];
  for (uint32_t i = 0; i < h.n_params; ++i) params[i] = data + h.offsets[i];
  CUresult code;
  const char* what = "cuLaunchKernel";
  Py_BEGIN_ALLOW_THREADS;
  CUcontext context = NULL;
  code = cuCtxGetCurrent(&context);
  if (code == CUDA_SUCCESS && context == NULL) {      /* a thread with no current context: the device's primary one */
    what = "cuDevicePrimaryCtxRetain";
    CUdevice device;
    code = cuDeviceGet(&device, (int)h.device);
    if (code == CUDA_SUCCESS) code = cuDevicePrimaryCtxRetain(&context, device);
    if (code == CUDA_SUCCESS) code = cuCtxSetCurrent(context);
  }
  if (code == CUDA_SUCCESS) {
    what = "cuLaunchKernel";
    if (!h.cooperative && !h.pdl) {
      code = cuLaunchKernel((CUfunction)h.function, h.grid[0], h.grid[1], h.grid[2], h.block, 1, 1, h.shared,
                            (CUstream)stream, params, NULL);
    } else {
      CUlaunchAttribute attributes[2];
      unsigned n = 0;
      if (h.pdl) {
        attributes[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attributes[n].value.programmaticStreamSerializationAllowed = 1;
        ++n;
      }
      if (h.cooperative) {
        attributes[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attributes[n].value.cooperative = 1;
        ++n;
      }
      CUlaunchConfig config;
      memset(&config, 0, sizeof(config));
      config.gridDimX = h.grid[0]; config.gridDimY = h.grid[1]; config.gridDimZ = h.grid[2];
      config.blockDimX = h.block; config.blockDimY = 1; config.blockDimZ = 1;
      config.sharedMemBytes = h.shared;
      config.hStream = (CUstream)stream;
      config.attrs = attributes;
      config.numAttrs = n;
      what = "cuLaunchKernelEx";
      code = cuLaunchKernelEx(&config, (CUfunction)h.function, params, NULL);
    }
  }
  Py_END_ALLOW_THREADS;
  if (code != CUDA_SUCCESS) return fail(code, what);
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
  {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "launch(blob, stream, *addresses)"},
  {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rooflab_lean_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit_rooflab_lean_launch(void) { return PyModule_Create(&module); }
""" % dict(params=MAX_PARAMS, slots=MAX_SLOTS, data=MAX_DATA)


@functools.lru_cache(maxsize=1)
def module():
    """The built C module, or None where it cannot be built (no compiler, no libcuda, no CUDA backend)."""
    try:
        from triton.backends.nvidia import driver
        from triton.runtime.build import compile_module_from_src
        return compile_module_from_src(src=SOURCE, name="rooflab_lean_launch", library_dirs=driver.library_dirs(),
                                       include_dirs=driver.include_dirs, libraries=driver.libraries)
    except Exception:   # noqa: BLE001  any failure to build: the plans launch through Triton
        return None


def parameters(compiled) -> list[str] | None:
    """The kernel's signature types in argument order (constexprs as "constexpr"), or None when
    the compiled kernel does not say (it was not compiled from a Triton function in this process)."""
    src = getattr(compiled, "src", None)
    signature = getattr(src, "signature", None)
    names = getattr(getattr(src, "fn", None), "arg_names", None)
    if not isinstance(signature, dict) or names is None:
        return None
    return [signature.get(name, "constexpr") for name in names]


def pack(compiled, grid: tuple, args: tuple, slots: tuple[int, ...], device: int) -> bytes | None:
    """The blob of one launch: `compiled` (what kernel[grid](...) returned) over `grid` with `args`
    (every argument in signature order, constexprs included), the arguments at the indices in
    `slots` (pointers) given per call. None where the kernel has what the blob does not describe."""
    types = parameters(compiled)
    meta = compiled.metadata
    if (types is None or device is None or len(types) != len(args) or len(slots) > MAX_SLOTS
            or getattr(meta, "num_ctas", 1) != 1 or getattr(meta, "global_scratch_size", 0)
            or getattr(meta, "profile_scratch_size", 0) or getattr(meta, "tensordesc_meta", None)):
        return None
    data, offsets, slot_offsets = bytearray(), [], {}
    for index, (ty, value) in enumerate(zip(types, args)):
        if ty == "constexpr":
            continue
        if not isinstance(ty, str):
            return None                                   # tuples and other composite arguments
        if ty.startswith("*"):                            # an address: 0 in a slot (written per call)
            if index in slots or value is None:
                number = 0
            elif isinstance(value, int):
                number = value
            elif hasattr(value, "data_ptr"):
                number = value.data_ptr()
            else:
                return None
            fmt = "Q"
        elif ty in _SCALARS:
            fmt, number = _SCALARS[ty], value
        else:
            return None                                   # fp16/bf16 scalars, tensor descriptors
        size = struct.calcsize(fmt)
        data += bytes(-len(data) % size)                  # each value at its own alignment
        if ty.startswith("*") and index in slots:
            slot_offsets[index] = len(data)
        offsets.append(len(data))
        try:
            data += struct.pack("<" + fmt, float(number) if fmt in "fd" else int(number))
        except (struct.error, TypeError, ValueError, OverflowError):
            return None                                   # a value the parameter's type cannot hold
    for _ in range(2):                                    # Triton's global and profile scratch: none
        data += bytes(-len(data) % 8)
        offsets.append(len(data))
        data += bytes(8)
    if len(offsets) > MAX_PARAMS or len(data) > MAX_DATA or set(slot_offsets) != set(slots):
        return None
    grid = tuple(grid) + (1,) * (3 - len(grid))
    header = _HEADER.pack(compiled.function, *grid, 32 * meta.num_warps, meta.shared,
                          int(bool(getattr(meta, "launch_cooperative_grid", False))),
                          int(bool(getattr(meta, "launch_pdl", False))), device,
                          len(offsets), len(slots), len(data), 0,
                          *offsets, *[0] * (MAX_PARAMS - len(offsets)),
                          *[slot_offsets[i] for i in slots], *[0] * (MAX_SLOTS - len(slots)))
    return header + bytes(data)
