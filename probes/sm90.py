"""Kernels compiled for sm_90 without a GPU: Triton's compiler, then the wheel's cuobjdump
(triton/backends/nvidia/bin) on the cubin. The probes' `resources` modes use it to read registers,
stack, spills and instructions of a launch before any device time is spent on it.
"""
from __future__ import annotations

import os
import subprocess
import tempfile

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

POINTER = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32", torch.int32: "*i32"}
BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")


def compile_for_sm90(fn, args, options: dict):
    """fn compiled for sm_90 with args (signature order, constexprs included) specialised as the
    JIT specialises them: tensors as 16-byte divisible pointers, ints equal to 1 as constants and
    multiples of 16 as divisible (except do_not_specialize ones), floats as fp32."""
    signature, constants, attrs = {}, {}, {}
    for i, (param, value) in enumerate(zip(fn.params, args)):
        if param.is_constexpr or (type(value) is int and value == 1 and not param.do_not_specialize):
            signature[param.name], constants[(i,)] = "constexpr", value
        elif isinstance(value, torch.Tensor):
            signature[param.name], attrs[(i,)] = POINTER[value.dtype], [["tt.divisibility", 16]]
        elif isinstance(value, bool):
            signature[param.name] = "i1"
        elif isinstance(value, int):
            signature[param.name] = "i32" if abs(value) < 2 ** 31 else "i64"
            if value % 16 == 0 and not param.do_not_specialize:
                attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[param.name] = "fp32"
    return triton.compile(ASTSource(fn, signature, constants, attrs), target=GPUTarget("cuda", 90, 32),
                          options=options)


def cuobjdump(kernel, flag: str) -> str:
    """cuobjdump's output (flag: -res-usage, -sass) for a compiled kernel's cubin."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(kernel.asm["cubin"])
        cubin.flush()
        return subprocess.run([os.path.join(BIN, "cuobjdump"), flag, cubin.name],
                              capture_output=True, text=True, check=True).stdout
