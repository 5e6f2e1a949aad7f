"""Probe: what torch.compile's softmax kernel does at narrow fp32 rows that ours's rows tile does not.

The question. probes/heldout.py (H100 GPU-53e1c65c, 6e68086) lost 65536x350 fp32 to torch.compile,
57.0 us against 54.4 (the copy 54.3), and probes/softmax_fill.py DIAG=short found no rows tile of
1-8 rows on 1-4 warps that closes the gap (0.95-0.99 of the copy). This probe writes Inductor's
kernel for each shape and the config its autotuner kept into $OUT/inductor/ (read them there), and
times, beside ours, torch.compile and the copy, a copy of the rows tile with the knobs in which the
two kernels can differ:
  - `cs`: the streaming store (.cs) ours uses, or a plain one;
  - `i64`: 64-bit row offsets as ours, or 32-bit (Inductor indexes in int32 where the tensor fits);
  - `div`: x / sum per element as Inductor's code does, or ours's one reciprocal and a multiply;
  - the tile (rows x warps), 8 warps included;
  - `static`: the shape and row strides as compile-time constants and no row mask where the tile
    divides the rows, as Inductor's kernel has them (_rows_static), with ours's store and reciprocal
    or Inductor's plain store and division.
Every variant is checked against float64 on a hostile input with its output poisoned, then timed
(CUPTI, L2 flushed, shuffled rounds): probes/softmax_small.long_row_probe.

    SHAPES=65536x350:float32,32768x1000:float16 python3 probes/softmax_inductor.py

Inductor (torch 2.13's torch/_inductor/runtime/triton_heuristics.py, _persistent_reduction_configs;
the GPU image's 2.11 shows its own in the kernel written out) launches an inner persistent reduction
of 256-1024 columns (as a power of two) over at least 1024 rows with one config, no autotuning:
min(1024 // that power, 8) rows a program on one warp; 2 rows of a 512 block at 350 columns, the
tile ROWS_NARROW_TILE_ROWS gives ours there. Rows of 350 fp32 are 1400 bytes, off the 32-byte
sector: a streaming store (.cs, evict-first) may send a line's first part to HBM before the next
row's program writes the rest.

Measured on an H100 (GPU-ee34477c, eb57b77, before `static`): none of the knobs is the gap. At
65536x350 fp32, us (copy time / variant time): torch.compile 56.96 (1.01), copy 57.27, the knob copy
58.6-59.5 (0.96-0.98: plain store 58.69, int32 59.36, div 59.54, all three 58.88, ours-like 59.01),
ours 59.12 (0.97). 65536x258 fp32: torch.compile 0.98, ours 0.95, knobs 0.94-0.96, 4x4 0.96.
65536x447 fp32: 1x2 0.98, torch.compile 0.97, ours 0.96. 32768x1000 fp16: ours 0.99, torch.compile
0.94. Inductor's kernel has the shape compiled in (`r0_numel = 258`, offsets `r0 + 258 * x0`) and
no row mask where its tile divides the rows: the `static` variants time that. On GPU-f8e31591
(c7023ae, us, copy time / variant time): `static inductor-like` 2x1 (plain store, division) 65536x350
fp32 56.58 (1.00; torch.compile 56.50, ours 58.13), 65536x258 fp32 40.66 (1.00; 40.88, 42.61),
65536x447 fp32 73.81 (1.00; 75.28, 76.02), 65536x350 bf16 26.98 (0.98; 31.62, 30.13), 32768x1000 fp16
40.00 (0.98; 41.95, 39.60); `static` 2x1 (.cs, reciprocal) 57.14, 41.10, 74.50, 27.58, 40.42. The
shipped rows kernel now compiles the length in (kernels/fused_softmax.py, ROWS_STATIC_MAX_BLOCK).
"""
from __future__ import annotations

import glob
import os
import shutil
import sys

OUT = os.environ.get("OUT", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "probe_out"))
# before torch, which reads it on import; device_setup.sh sets it to the compile cache it seeds
CACHE = os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/inductor-probe")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from softmax_small import compiled_softmax, fs, long_row_probe  # noqa: E402

BUDGET_S = float(os.environ.get("PROBE_BUDGET_S", "200"))
SHAPES = [(*(int(v) for v in dims.split("x")), getattr(torch, dtype))          # ROWSxCOLS:dtype
          for dims, dtype in (s.split(":") for s in os.environ.get(
              "SHAPES", "65536x350:float32,32768x1000:float16,65536x447:float32,65536x258:float32").split(","))]
TILES = tuple(tuple(int(v) for v in t.split("x")) for t in       # rows a tile x warps; the knobs on the first
              os.environ.get("TILES", "2x1,1x1,4x4,8x4,8x8,1x2,1x4").split(","))
KNOBS = {"ours-like": (True, True, False), "plain store": (False, True, False),
         "int32": (True, False, False), "div": (True, True, True), "inductor-like": (False, False, True)}
STATIC_KNOBS = {"static": (True, False), "static inductor-like": (False, True)}   # _rows_static's (CS, DIV)


@triton.jit
def _rows_knobs(out_ptr, x_ptr, x_row_stride, out_row_stride, n_rows, n_cols, ROWS: tl.constexpr,
                BLOCK: tl.constexpr, VEC: tl.constexpr, CS: tl.constexpr, I64: tl.constexpr, DIV: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    col_mask = tl.max_constancy(cols < n_cols, VEC)
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    if I64:
        x_off = tl.multiple_of(tl.cast(rows, tl.int64) * x_row_stride, VEC)
        o_off = tl.multiple_of(tl.cast(rows, tl.int64) * out_row_stride, VEC)
    else:
        x_off = tl.multiple_of(rows * x_row_stride, VEC)
        o_off = tl.multiple_of(rows * out_row_stride, VEC)
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + x_off[:, None] + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    y = _softmax_rows(x, DIV)
    _store_tile(out_ptr + o_off[:, None] + cols[None, :], y, mask, CS)


@triton.jit
def _softmax_rows(x, DIV: tl.constexpr):
    """Softmax of the (ROWS, BLOCK) tile x along its rows: with DIV each element divided by its row's
    sum, else multiplied by one reciprocal a row."""
    e = tl.exp2((x - tl.max(x, axis=1)[:, None]) * 1.4426950408889634)
    if DIV:
        return e / tl.sum(e, axis=1)[:, None]
    return e * (1.0 / tl.sum(e, axis=1))[:, None]


@triton.jit
def _store_tile(o_ptrs, y, mask, CS: tl.constexpr):
    """y stored through o_ptrs in their element type: streaming (.cs) with CS, else plainly."""
    if CS:
        tl.store(o_ptrs, y.to(o_ptrs.dtype.element_ty), mask=mask, cache_modifier=".cs")
    else:
        tl.store(o_ptrs, y.to(o_ptrs.dtype.element_ty), mask=mask)


@triton.jit
def _rows_static(out_ptr, x_ptr, X_STRIDE: tl.constexpr, O_STRIDE: tl.constexpr, N_ROWS: tl.constexpr,
                 N_COLS: tl.constexpr, ROWS: tl.constexpr, BLOCK: tl.constexpr, CS: tl.constexpr, DIV: tl.constexpr):
    """The rows tile as Inductor writes it: the shape and row strides compiled in, 32-bit offsets, and
    no row mask where ROWS divides the rows (what the compiler then knows of each access's alignment
    and bounds it works out itself: no multiple_of or max_constancy hints)."""
    cols = tl.arange(0, BLOCK)
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    if N_ROWS % ROWS == 0:
        mask = tl.full((ROWS, BLOCK), True, tl.int1) & (cols < N_COLS)[None, :]
    else:
        mask = (rows < N_ROWS)[:, None] & (cols < N_COLS)[None, :]
    x = tl.load(x_ptr + rows[:, None] * X_STRIDE + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    y = _softmax_rows(x, DIV)
    _store_tile(out_ptr + rows[:, None] * O_STRIDE + cols[None, :], y, mask, CS)


def inductor_code(x: torch.Tensor):
    """torch.compile's softmax of x, compiled and autotuned once; its code goes to $OUT/inductor/."""
    from torch._inductor.utils import run_and_get_code
    compiled = compiled_softmax()
    _, code = run_and_get_code(compiled, x)
    rows, cols = x.shape
    dest = os.path.join(OUT, "inductor")
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, f"softmax_{rows}x{cols}_{str(x.dtype)[6:]}.py"), "w") as f:
        f.write("\n\n# ----\n\n".join(code))
    return compiled


def variants(x: torch.Tensor, out: torch.Tensor, sms: int) -> dict:
    rows, cols = x.shape
    compiled = inductor_code(x)
    fns = {"ours": lambda: fs.softmax(x, -1), "torch_compile": lambda: compiled(x)}
    block, vec = fs.pow2(cols), fs._vec(x, out)
    for r, w in TILES:
        for name, (cs, i64, div) in KNOBS.items():
            if name != "ours-like" and (r, w) != TILES[0]:
                continue   # the knobs on the first tile; the tiles as ours
            def run(r=r, w=w, cs=cs, i64=i64, div=div):
                _rows_knobs[(triton.cdiv(rows, r),)](out, x, x.stride(0), out.stride(0), rows, cols, r, block, vec,
                                                     cs, i64, div, num_warps=w, num_stages=1)
                return out
            fns[f"{name} {r}x{w}"] = run
    r, w = TILES[0]
    for name, (cs, div) in STATIC_KNOBS.items():
        def run(r=r, w=w, cs=cs, div=div):
            _rows_static[(triton.cdiv(rows, r),)](out, x, x.stride(0), out.stride(0), rows, cols, r, block, cs, div,
                                                  num_warps=w, num_stages=1)
            return out
        fns[f"{name} {r}x{w}"] = run
    return fns


def save_best_configs() -> None:
    """Inductor's autotuned choices (.best_config) and its kernels' sources, beside the code."""
    dest = os.path.join(OUT, "inductor")
    os.makedirs(dest, exist_ok=True)
    for path in glob.glob(os.path.join(CACHE, "**", "*.best_config"), recursive=True):
        shutil.copy(path, dest)
        with open(path) as f:
            print("best_config", os.path.basename(path), f.read().strip())


if __name__ == "__main__":
    long_row_probe(SHAPES, variants, "softmax_inductor.csv", BUDGET_S)
    save_best_configs()
