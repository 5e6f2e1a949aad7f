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

The C module is built once per machine with Triton's own build helper (a C compiler, which
Triton's launchers need too) and cached in Triton's cache; it finds the driver's entry points with
dlopen at its first launch, so it builds and loads on a machine without libcuda too, where a launch
fails naming what is missing. Its launch (`LAUNCH_CORE`) is also the one kernels._native_replay
compiles into its C++ repeat call. Where the module cannot be built, or a
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

# The launch itself, in C that also compiles as C++ (kernels._native_replay includes it): the blob's
# header, the driver's entry points found with dlopen (so that a module using it builds and loads on
# a machine without libcuda, where a launch then fails with an error that says so) and
# `launch_blob`, which writes a call's addresses into a copy of the parameters and launches.
LAUNCH_CORE = r"""
#include "cuda.h"
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_PARAMS %(params)d
#define MAX_SLOTS %(slots)d
#define MAX_DATA %(data)d

typedef struct {
  uint64_t function;
  uint32_t grid[3], block, shared, cooperative, pdl, device, n_params, n_slots, size, spare;
  uint32_t offsets[MAX_PARAMS];
  uint32_t slots[MAX_SLOTS];
} Header;

typedef struct {
  CUresult (*ctx_get_current)(CUcontext*);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice);
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            CUstream, void**, void**);
  CUresult (*launch_kernel_ex)(const CUlaunchConfig*, CUfunction, void**, void**);
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*);
  CUresult (*get_error_string)(CUresult, const char**);
} Driver;

/* The driver's entry points, or NULL (with *why set) where libcuda.so.1 or one of them is missing. */
static const Driver* driver_api(const char** why) {
  static Driver d;
  static int state = 0;                       /* 0: not tried, 1: loaded, -1: failed */
  if (state == 0) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    state = -1;
    if (lib) {
      d.ctx_get_current = (CUresult (*)(CUcontext*))dlsym(lib, "cuCtxGetCurrent");
      d.ctx_set_current = (CUresult (*)(CUcontext))dlsym(lib, "cuCtxSetCurrent");
      d.device_get = (CUresult (*)(CUdevice*, int))dlsym(lib, "cuDeviceGet");
      d.primary_ctx_retain = (CUresult (*)(CUcontext*, CUdevice))dlsym(lib, "cuDevicePrimaryCtxRetain");
      d.launch_kernel = (CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                      unsigned, CUstream, void**, void**))dlsym(lib, "cuLaunchKernel");
      d.launch_kernel_ex = (CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**))dlsym(lib, "cuLaunchKernelEx");
      d.stream_is_capturing = (CUresult (*)(CUstream, CUstreamCaptureStatus*))dlsym(lib, "cuStreamIsCapturing");
      d.get_error_string = (CUresult (*)(CUresult, const char**))dlsym(lib, "cuGetErrorString");
      if (d.ctx_get_current && d.ctx_set_current && d.device_get && d.primary_ctx_retain && d.launch_kernel
          && d.launch_kernel_ex && d.stream_is_capturing && d.get_error_string) state = 1;
    }
  }
  if (state < 0) { *why = "libcuda.so.1 (the CUDA driver) or one of its entry points is missing"; return NULL; }
  return &d;
}

/* Launch the blob's kernel on `stream` with `addresses` written into its slots. Returns NULL, or what
   failed: a malformed blob, a missing driver, or the driver call (its error in *code). */
static const char* launch_blob(const char* raw, size_t raw_size, uint64_t stream, const uint64_t* addresses,
                               size_t n_addresses, CUresult* code) {
  *code = CUDA_SUCCESS;
  Header h;
  if (raw_size < sizeof(Header)) return "blob shorter than its header";
  memcpy(&h, raw, sizeof(Header));
  if (n_addresses != h.n_slots || h.size > MAX_DATA || h.n_params > MAX_PARAMS || raw_size < sizeof(Header) + h.size)
    return "blob and addresses disagree (slots, parameters or data size)";
  const char* why = NULL;
  const Driver* cu = driver_api(&why);
  if (!cu) return why;
  char data[MAX_DATA] __attribute__((aligned(16)));
  memcpy(data, raw + sizeof(Header), h.size);
  for (uint32_t i = 0; i < h.n_slots; ++i) memcpy(data + h.slots[i], &addresses[i], sizeof(uint64_t));
  void* params[MAX_PARAMS];
  for (uint32_t i = 0; i < h.n_params; ++i) params[i] = data + h.offsets[i];
  CUcontext context = NULL;
  *code = cu->ctx_get_current(&context);
  if (*code == CUDA_SUCCESS && context == NULL) {      /* a thread with no current context: the device's primary one */
    CUdevice device;
    *code = cu->device_get(&device, (int)h.device);
    if (*code == CUDA_SUCCESS) *code = cu->primary_ctx_retain(&context, device);
    if (*code == CUDA_SUCCESS) *code = cu->ctx_set_current(context);
    if (*code != CUDA_SUCCESS) return "cuDevicePrimaryCtxRetain";
  }
  if (*code != CUDA_SUCCESS) return "cuCtxGetCurrent";
  if (!h.cooperative && !h.pdl) {
    *code = cu->launch_kernel((CUfunction)h.function, h.grid[0], h.grid[1], h.grid[2], h.block, 1, 1, h.shared,
                              (CUstream)stream, params, NULL);
    return *code == CUDA_SUCCESS ? NULL : "cuLaunchKernel";
  }
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
  *code = cu->launch_kernel_ex(&config, (CUfunction)h.function, params, NULL);
  return *code == CUDA_SUCCESS ? NULL : "cuLaunchKernelEx";
}

/* The error of a failed launch_blob as text: "what: the driver's message". */
static void launch_error(const char* what, CUresult code, char* text, size_t size) {
  const char* message = NULL;
  const char* why = NULL;
  const Driver* cu = code == CUDA_SUCCESS ? NULL : driver_api(&why);
  if (cu) cu->get_error_string(code, &message);
  if (code == CUDA_SUCCESS) snprintf(text, size, "%%s", what);
  else snprintf(text, size, "%%s: %%s", what, message ? message : "unknown CUDA error");
}
""" % dict(params=MAX_PARAMS, slots=MAX_SLOTS, data=MAX_DATA)

SOURCE = LAUNCH_CORE + r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject* launch(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 2 || !PyBytes_Check(args[0]) || nargs - 2 > MAX_SLOTS) {
    PyErr_SetString(PyExc_TypeError, "launch(blob: bytes, stream: int, *addresses: int)");
    return NULL;
  }
  uint64_t stream = PyLong_AsUnsignedLongLong(args[1]);
  uint64_t addresses[MAX_SLOTS];
  for (Py_ssize_t i = 0; i < nargs - 2; ++i) addresses[i] = PyLong_AsUnsignedLongLong(args[2 + i]);
  if (PyErr_Occurred()) return NULL;
  CUresult code;
  const char* what;
  Py_BEGIN_ALLOW_THREADS;
  what = launch_blob(PyBytes_AS_STRING(args[0]), (size_t)PyBytes_GET_SIZE(args[0]), stream, addresses,
                     (size_t)(nargs - 2), &code);
  Py_END_ALLOW_THREADS;
  if (what != NULL) {
    char text[256];
    launch_error(what, code, text, sizeof(text));
    PyErr_SetString(PyExc_RuntimeError, text);
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
  {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL, "launch(blob, stream, *addresses)"},
  {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "rooflab_lean_launch", NULL, -1, methods};

PyMODINIT_FUNC PyInit_rooflab_lean_launch(void) { return PyModule_Create(&module); }
"""


@functools.lru_cache(maxsize=1)
def module():
    """The built C module, or None where it cannot be built (no C compiler, no Triton NVIDIA backend)."""
    try:
        from triton.backends.nvidia import driver
        from triton.runtime.build import compile_module_from_src
        return compile_module_from_src(src=SOURCE, name="rooflab_lean_launch", include_dirs=driver.include_dirs,
                                       libraries=["dl"])
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
