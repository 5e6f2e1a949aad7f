"""Kernels compiled for sm_90 without a GPU: Triton's compiler, then the wheel's cuobjdump
(triton/backends/nvidia/bin) on the cubin. The probes' `resources` modes use it to read registers,
stack, spills and instructions of a launch before any device time is spent on it.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

POINTER = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32", torch.int32: "*i32", torch.int64: "*i64"}
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


def usage(kernel) -> dict:
    """What the SASS of a compiled kernel holds: registers a thread, stack bytes, shared memory,
    spill loads and stores (LDL / STL), MUFU.EX2 instructions, and ld.global.nc in its PTX."""
    res, sass = cuobjdump(kernel, "-res-usage"), cuobjdump(kernel, "-sass")
    regs, stack = re.search(r"REG:(\d+).*?STACK:(\d+)", res).groups()
    ins = re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]*);", sass)
    return dict(regs=int(regs), stack=int(stack), shared=kernel.metadata.shared,
                ldl=sum(" LDL" in f" {i}" for i in ins), stl=sum(" STL" in f" {i}" for i in ins),
                mufu_ex2=sum("MUFU.EX2" in i for i in ins), nc=kernel.asm["ptx"].count("ld.global.nc"))


def programs_per_sm(regs: int, num_warps: int) -> int:
    """Programs of num_warps warps an sm_90 SM holds by registers (allocated 8 at a time) and threads."""
    return min(65536 // (-(-regs // 8) * 8 * 32 * num_warps), 2048 // (32 * num_warps))
