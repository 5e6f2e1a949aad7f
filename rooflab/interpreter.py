"""Running the kernels in Triton's CPU interpreter (TRITON_INTERPRET=1).

Triton 3.6's interpreter converts one-element arrays used as loop bounds with int(), which
NumPy 2.4 rejects ("only 0-dimensional arrays can be converted"; triton-lang/triton#9171,
fixed upstream after 3.6). Its tl.dot also multiplies bf16 tiles as their raw uint16 bits
(bf16 is stored as uint16 there). `enable()` sets the variable, gives the interpreter's
tensors an __index__ that squeezes first (on such NumPy versions) and widens bf16 dot
operands to fp32. Call it before importing kernels.

The interpreter computes with NumPy, whose float32 exp2, exp and reductions take another SIMD code
path on CPUs with AVX-512 than on those with AVX2 only, so the same kernel gave fp32 errors 5-70%
apart on two machines (rows=3 cols=7: 4.3e-08 with AVX2, 4.6e-08 with AVX-512) and the rendered
paper changed with the machine. `enable()` therefore keeps NumPy to its AVX2 paths
(NPY_DISABLE_CPU_FEATURES, read when NumPy is imported: call it before anything imports NumPy)
unless the variable is already set: every x86-64 machine with AVX2 then checks with the same
arithmetic and renders the same table.
"""
from __future__ import annotations

import os
import sys

_patched = False
# NumPy's AVX-512 dispatch targets, by the names of NumPy 2.4 (X86_V4 and up) and of 1.26-2.3:
# a name a version does not know is ignored, as is a feature the CPU lacks.
AVX512_FEATURES = ("X86_V4 AVX512_ICL AVX512_SPR AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX "
                   "AVX512_CLX AVX512_CNL")


def enable() -> None:
    global _patched
    os.environ["TRITON_INTERPRET"] = "1"
    if "numpy" not in sys.modules:
        os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", AVX512_FEATURES)
    if _patched:
        return
    import numpy as np
    from triton.runtime import interpreter

    if np.lib.NumpyVersion(np.__version__) >= "2.4.0":
        original = interpreter._patch_lang_tensor

        def patched(tensor, scope):
            original(tensor, scope)
            scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

        interpreter._patch_lang_tensor = patched
    _widen_bf16_dot(interpreter)
    _patched = True


def _widen_bf16_dot(interpreter) -> None:
    import numpy as np
    import triton.language as tl

    def as_f32(handle):
        if handle.dtype.scalar != tl.bfloat16:
            return handle
        bits = handle.data.astype(np.uint32) << 16
        return interpreter.TensorHandle(bits.view(np.float32), tl.float32)

    create_dot = interpreter.InterpreterBuilder.create_dot

    def create_dot_widened(self, a, b, d, *args):
        return create_dot(self, as_f32(a), as_f32(b), d, *args)

    interpreter.InterpreterBuilder.create_dot = create_dot_widened
