"""The softmax designs of seeds 000 and 001, implemented from their descriptions.

seed_rowwise    one program per row; the block is the next power of two >= cols, so the whole
                row is loaded once, reduced in registers and written once (seed 001's kernel and
                seed 000's fused kernel). Launched with Triton's default num_warps (4), as both
                articles' launches are.
seed_multipass  seed 000's naive kernel: four launches, each a round trip through memory:
                row max -> (rows,), exp(x - max) -> out, row sum -> (rows,), out / sum -> out,
                with out pre-initialised by torch.zeros_like (a fifth kernel).

Traffic: rowwise moves 2 * rows * cols * elem bytes; multipass moves about 4x that in the
(rows, cols) array (read x twice, write out twice, read out twice) plus the zero fill.
Both take a 2-D (rows, cols) tensor and softmax each row; math in fp32, output in x's dtype.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._checks import check_tensor

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Longest row a whole-row block handles: 4 warps hold 65536 columns as 512 values a thread,
# already spilled to local memory; longer blocks take minutes to compile and spill more.
MAX_COLS = 65536


@triton.jit
def _rowwise_kernel(out_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    e = tl.where(mask, e, 0.0)
    tl.store(out_ptr + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _row_max_kernel(max_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(max_ptr + row, tl.max(x.to(tl.float32), axis=0))


@triton.jit
def _exp_kernel(out_ptr, x_ptr, max_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.load(max_ptr + row))
    tl.store(out_ptr + row * n_cols + cols, e.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _row_sum_kernel(sum_ptr, e_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    e = tl.load(e_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(sum_ptr + row, tl.sum(e.to(tl.float32), axis=0))


@triton.jit
def _divide_kernel(out_ptr, sum_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    e = tl.load(out_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    y = e / tl.load(sum_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def supports(name: str, cols: int) -> bool:
    """Whether seed design `name` handles rows of `cols` columns (one block holds a whole row)."""
    if name not in ("seed_rowwise", "seed_multipass"):
        raise ValueError(f"unknown seed design {name!r}")
    return 1 <= cols <= MAX_COLS


def _prepare(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    check_tensor("x", x, DTYPES, ndim=2)
    if not supports("seed_rowwise", x.shape[1]) and x.numel():
        raise ValueError(f"the seeds' whole-row block holds at most {MAX_COLS} columns, got {x.shape[1]}")
    return x.contiguous(), triton.next_power_of_2(max(x.shape[1], 1))


def seed_rowwise(x: torch.Tensor) -> torch.Tensor:
    """Softmax of each row of a 2-D tensor, one program per row."""
    x, block = _prepare(x)
    out = torch.empty_like(x)
    if x.numel():
        _rowwise_kernel[(x.shape[0],)](out, x, x.shape[1], BLOCK=block)
    return out


def seed_multipass(x: torch.Tensor) -> torch.Tensor:
    """Softmax of each row of a 2-D tensor in four launches through memory, output zeroed first."""
    x, block = _prepare(x)
    rows, cols = x.shape
    out = torch.zeros_like(x)
    if x.numel():
        row_max = torch.empty(rows, dtype=torch.float32, device=x.device)
        row_sum = torch.empty(rows, dtype=torch.float32, device=x.device)
        _row_max_kernel[(rows,)](row_max, x, cols, BLOCK=block)
        _exp_kernel[(rows,)](out, x, row_max, cols, BLOCK=block)
        _row_sum_kernel[(rows,)](row_sum, out, cols, BLOCK=block)
        _divide_kernel[(rows,)](out, row_sum, cols, BLOCK=block)
    return out
