"""A repeat call in C++: the plan's key, the output's allocation and the launch, with no Python between.

A plan's repeat call in Python (kernels._plans, kernels._lean_launch) reads x's shape, strides,
dtype, device and address through Python attribute calls, hashes a tuple of them, looks the plan
up, asks torch for the current device and stream, allocates the output through torch.empty_like and
calls the lean launcher: about 1.3 us of Python on a 2-core CPU host besides the allocation and the
launch, where torch.softmax's own call does the same work in C++. Here one C++ function does it
(`replay(x, dim)`): it reads x's layout from its TensorImpl, looks the plan up in its own table
(`register` adds one, keyed as the Python plan cache keys it: shape, strides, dtype, device, dim
and the address modulo 16 bytes), allocates the output with at::empty_like (at::empty where x is not
contiguous) and launches the plan's blob (kernels._lean_launch.pack) through the same launch code
as the lean launcher (`LAUNCH_CORE`). It returns None, for the Python path to take the call, where
anything differs from a plain repeat: a key it does not hold, dim not an int, x requiring grad while
grad mode is on, a Triton launch hook registered, another current device, a stream-bound plan on
another stream or in a CUDA graph capture, or an output not 16-byte aligned.

The table holds at most `capacity` plans (the oldest dropped first) and a reference to each plan's
Python object, which keeps alive what the blob holds by address (split's workspace). Calls run under
the GIL, which also guards the table. The module is compiled once per machine and torch version with
the host's C++ compiler against torch's headers and libraries (`module()`, about 30 s on two cores)
and cached in Triton's cache; where it cannot be built, `module()` is None and plans replay from
Python as before.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading

from kernels._lean_launch import LAUNCH_CORE

NAME = "rooflab_native_replay"

SOURCE = LAUNCH_CORE + r"""
#include <torch/extension.h>
#include <torch/csrc/autograd/python_variable.h>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Key {
  std::vector<int64_t> v;
  bool operator==(const Key& other) const { return v == other.v; }
};

struct KeyHash {
  size_t operator()(const Key& key) const {
    size_t h = 1469598103934665603ull;                 // FNV-1a over the key's words
    for (int64_t word : key.v) { h ^= (size_t)word; h *= 1099511628211ull; }
    return h;
  }
};

struct Plan {
  std::string blob;          // kernels._lean_launch.pack's bytes, out and x in its two slots
  int64_t device;            // the CUDA device the kernel was loaded on
  uint64_t stream;           // the only stream a stream-bound plan replays on
  bool stream_bound;
  py::object keep;           // the Python plan: keeps alive what the blob holds by address
};

// The module's state, never destroyed: Python objects must not be released after the interpreter
// has finalised, when static destructors run.
struct State {
  std::unordered_map<Key, Plan, KeyHash> plans;
  std::deque<Key> order;     // oldest first
  size_t capacity = 512;
  py::object get_device, get_stream, enter_hook, exit_hook;   // set by configure()
};
State& state = *new State();

// x's key: rank, shape, strides, dtype, device type and index, dim, address modulo 16.
void make_key(const at::Tensor& x, int64_t dim, Key& key) {
  key.v.clear();
  key.v.push_back(x.dim());
  for (int64_t s : x.sizes()) key.v.push_back(s);
  for (int64_t s : x.strides()) key.v.push_back(s);
  key.v.push_back((int64_t)x.scalar_type());
  key.v.push_back((int64_t)x.device().type());
  key.v.push_back((int64_t)x.device().index());
  key.v.push_back(dim);
  key.v.push_back((int64_t)(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16));
}

bool hooked() {
  for (const py::object& hook : {state.enter_hook, state.exit_hook}) {
    if (hook && py::len(hook.attr("calls")) > 0) return true;
  }
  return false;
}

// The tensor inside `obj`, or nullptr when obj is not a plain tensor with storage.
const at::Tensor* as_tensor(PyObject* obj) {
  if (!THPVariable_Check(obj)) return nullptr;
  const at::Tensor& t = THPVariable_Unpack(obj);
  if (!t.defined() || !t.has_storage() || t.is_nested() || t.layout() != at::kStrided) return nullptr;
  return &t;
}

}  // namespace

// Settings from Python: torch's current-device and current-stream getters, Triton's two launch-hook
// knobs (objects with a `calls` list) and how many plans the table holds.
void configure(py::object device_getter, py::object stream_getter, py::object enter, py::object exit,
               size_t plans_held) {
  state.get_device = device_getter; state.get_stream = stream_getter;
  state.enter_hook = enter; state.exit_hook = exit;
  state.capacity = plans_held ? plans_held : 1;
}

void register_plan(py::handle x, int64_t dim, py::bytes blob, int64_t device, uint64_t stream, bool stream_bound,
                   py::object keep) {
  const at::Tensor* t = as_tensor(x.ptr());
  if (!t) throw std::invalid_argument("register: x must be a strided tensor with storage");
  Key key;
  make_key(*t, dim, key);
  if (state.plans.find(key) == state.plans.end()) {
    while (state.plans.size() >= state.capacity && !state.order.empty()) {
      state.plans.erase(state.order.front());
      state.order.pop_front();
    }
    state.order.push_back(key);
  }
  state.plans[key] = Plan{std::string(blob), device, stream, stream_bound, keep};
}

py::object replay(py::handle x, py::handle dim) {
  static thread_local Key key;
  const at::Tensor* t = as_tensor(x.ptr());
  if (!t || !PyLong_CheckExact(dim.ptr())) return py::none();
  int overflow = 0;
  long long d = PyLong_AsLongLongAndOverflow(dim.ptr(), &overflow);
  if (overflow || (d == -1 && PyErr_Occurred())) { PyErr_Clear(); return py::none(); }
  if (t->requires_grad() && at::GradMode::is_enabled()) return py::none();
  make_key(*t, (int64_t)d, key);
  auto found = state.plans.find(key);
  if (found == state.plans.end() || hooked()) return py::none();
  const Plan& plan = found->second;
  int64_t device = state.get_device().cast<int64_t>();
  if (device != plan.device) return py::none();
  uint64_t stream = state.get_stream(device).cast<uint64_t>();
  if (plan.stream_bound) {
    if (stream != plan.stream) return py::none();
    const char* why = nullptr;
    const Driver* cu = driver_api(&why);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!cu || cu->stream_is_capturing((CUstream)stream, &status) != CUDA_SUCCESS
        || status != CU_STREAM_CAPTURE_STATUS_NONE) return py::none();
  }
  at::Tensor out = t->is_contiguous() ? at::empty_like(*t) : at::empty(t->sizes(), t->options());
  uint64_t addresses[2] = {reinterpret_cast<uint64_t>(out.data_ptr()), reinterpret_cast<uint64_t>(t->data_ptr())};
  if (addresses[0] % 16) return py::none();
  CUresult code;
  const char* what = launch_blob(plan.blob.data(), plan.blob.size(), stream, addresses, 2, &code);
  if (what) {
    char text[256];
    launch_error(what, code, text, sizeof(text));
    throw std::runtime_error(text);
  }
  return py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(out)));
}

size_t held() { return state.plans.size(); }

void clear() { state.plans.clear(); state.order.clear(); }

PYBIND11_MODULE(rooflab_native_replay, m) {
  m.def("configure", &configure);
  m.def("register", &register_plan);
  m.def("replay", &replay, "replay(x, dim): the repeat call's output, or None for the Python path");
  m.def("held", &held);
  m.def("clear", &clear);
}
"""


def _flags() -> tuple[list[str], list[str]]:
    """Compiler and linker flags for an extension against this process's torch and Python."""
    import torch
    from torch.utils.cpp_extension import include_paths, library_paths
    from triton.backends.nvidia import driver
    includes = [*include_paths(), *driver.include_dirs, sysconfig.get_paths()["include"]]
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    compile_flags = ["-O2", "-std=c++17", "-fPIC", "-shared", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
                     f"-DTORCH_EXTENSION_NAME={NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H",
                     *[f"-I{path}" for path in includes]]
    libs = library_paths()
    link_flags = [*[f"-L{path}" for path in libs], *[f"-Wl,-rpath,{path}" for path in libs],
                  "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python", "-ldl"]
    return compile_flags, link_flags


def _load(path: str):
    spec = importlib.util.spec_from_file_location(NAME, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cxx() -> str | None:
    """The host's C++ compiler: $CXX, else g++, else clang++; None without one."""
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")


def build():
    """The compiled module, from Triton's cache or compiled now; raises where it cannot be built."""
    import torch
    from triton.runtime.cache import get_cache_manager
    compiler = cxx()
    if compiler is None:
        raise RuntimeError("no C++ compiler (g++ or clang++, or $CXX)")
    compile_flags, link_flags = _flags()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    key = hashlib.sha256("\n".join([SOURCE, torch.__version__, sys.version, compiler, *compile_flags,
                                    *link_flags]).encode()).hexdigest()
    cache = get_cache_manager(key)
    cached = cache.get_file(NAME + suffix)
    if cached is not None:
        return _load(cached)
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, NAME + ".cpp"), os.path.join(tmp, NAME + suffix)
        with open(src, "w") as f:
            f.write(SOURCE)
        done = subprocess.run([compiler, src, "-o", out, *compile_flags, *link_flags], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{compiler} failed:\n{done.stderr[-4000:]}")
        with open(out, "rb") as f:
            path = cache.put(f.read(), NAME + suffix, binary=True)
    return _load(path)


@functools.lru_cache(maxsize=1)
def module():
    """The compiled module, configured with torch's CUDA getters and Triton's launch hooks, or None
    where it cannot be built or torch has no CUDA getters (a CPU build)."""
    import torch
    from triton import knobs
    from kernels._plans import PLAN_CACHE_SIZE
    get_device = getattr(torch._C, "_cuda_getDevice", None)
    get_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if get_device is None or get_stream is None:
        return None
    try:
        mod = build()
    except Exception:   # noqa: BLE001  no compiler, no headers, a failed build: plans replay from Python
        return None
    mod.configure(get_device, get_stream, knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook,
                  PLAN_CACHE_SIZE)
    return mod


_build_started = threading.Event()


def ready():
    """The module once `module()` has returned it in this process; False once `module()` has found
    that it cannot be built (callers stop asking); None while the build runs. The first call starts
    `module()` in a daemon thread, so that no call waits for the build (the sweep calls `module()`
    itself before it times anything)."""
    if module.cache_info().currsize:
        return module() or False
    if not _build_started.is_set():
        _build_started.set()
        threading.Thread(target=module, name="rooflab-native-replay-build", daemon=True).start()
    return None
