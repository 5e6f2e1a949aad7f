"""Device facts and integer helpers the kernel wrappers share.

The SM count sizes persistent grids and KV splits; in Triton's CPU interpreter no device is
queried and INTERPRETER_SMS (an H100/H200) stands in. The integer helpers are plain Python:
triton.cdiv and triton.next_power_of_2 cost microseconds per call on the host path.
"""
from __future__ import annotations

import functools

import torch

from kernels._checks import interpreting

INTERPRETER_SMS = 132        # SM count assumed in the CPU interpreter, where no device is queried
INTERPRETER_PER_SM = {"smem": 233472, "regs": 65536}   # an H100/H200's SM, assumed there (228 KB, 64 K)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def pow2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    return 1 << (max(int(n), 1) - 1).bit_length()


@functools.lru_cache(maxsize=None)
def properties(index: int) -> dict:
    """SMs, registers, threads and shared memory per SM of CUDA device `index`."""
    props = torch.cuda.get_device_properties(index)
    return {"sms": props.multi_processor_count,
            "regs": getattr(props, "regs_per_multiprocessor", 65536),
            "threads": props.max_threads_per_multi_processor,
            "smem": props.shared_memory_per_multiprocessor}


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors of `device`; INTERPRETER_SMS in Triton's CPU interpreter."""
    if interpreting() or device.type != "cuda":
        return INTERPRETER_SMS
    return properties(device.index if device.index is not None else torch.cuda.current_device())["sms"]



def per_sm(device: torch.device, resource: str) -> int:
    """`resource` of one SM of `device`: "smem" (shared memory, bytes) or "regs" (32-bit registers);
    in Triton's CPU interpreter an H100/H200's (INTERPRETER_PER_SM)."""
    if interpreting() or device.type != "cuda":
        return INTERPRETER_PER_SM[resource]
    return properties(device.index if device.index is not None else torch.cuda.current_device())[resource]
