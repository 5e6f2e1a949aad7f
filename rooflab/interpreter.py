"""Running the kernels in Triton's CPU interpreter (TRITON_INTERPRET=1).

Triton 3.6's interpreter converts one-element arrays used as loop bounds with int(), which
NumPy 2.4 rejects ("only 0-dimensional arrays can be converted"; triton-lang/triton#9171,
fixed upstream after 3.6). `enable()` sets the variable and, on such NumPy versions, gives
the interpreter's tensors an __index__ that squeezes first. Call it before importing kernels.
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
    _patched = True
