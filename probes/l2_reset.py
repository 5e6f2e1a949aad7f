"""The L2's persisting lines reset from a probe: `cuCtxResetPersistingL2Cache` returns every line
held as persisting (loaded through an evict_last policy) to normal, so a read of other data can
evict it. Host-side and immediate, so the caller waits for the GPU first."""
from __future__ import annotations

import functools


@functools.cache
def _libcuda():
    import ctypes
    return ctypes.CDLL("libcuda.so.1")


def reset_persisting_l2() -> None:
    """cuCtxResetPersistingL2Cache on the current context; a CUresult other than 0 raises."""
    status = _libcuda().cuCtxResetPersistingL2Cache()
    if status != 0:
        raise RuntimeError(f"cuCtxResetPersistingL2Cache returned CUresult {status}")


def reset_before_flush(timer) -> None:
    """A rooflab.timing.CudaTimer whose flush first waits for the GPU and resets persisting lines, so
    no timed call finds lines a call before it left as evict_last (its own included)."""
    import torch
    read = timer.flush

    def flush() -> None:
        torch.cuda.synchronize()
        reset_persisting_l2()
        read()

    timer.flush = flush
