"""Running the kernels in Triton's CPU interpreter (TRITON_INTERPRET=1).

Triton 3.6's interpreter converts one-element arrays used as loop bounds with int(), which
NumPy 2.4 rejects ("only 0-dimensional arrays can be converted"; triton-lang/triton#9171,
fixed upstream after 3.6). Its tl.dot also multiplies bf16 tiles as their raw uint16 bits
(bf16 is stored as uint16 there). `enable()` sets the variable, gives the interpreter's
tensors an __index__ that squeezes first (on such NumPy versions) and widens bf16 dot
operands to fp32. Call it before importing kernels.
"""
from __future__ import annotations

import os

_patched = False


def enable() -> None:
    global _patched
    os.environ["TRITON_INTERPRET"] = "1"
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
