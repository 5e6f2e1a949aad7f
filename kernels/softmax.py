"""Fused softmax: `softmax(x, dim)` over any dimension, and the four Triton strategies behind it.

Traffic model. Softmax is memory-bound: an ideal kernel reads every input element once and
writes every output element once, so a (rows, cols) problem moves

    bytes = 2 * rows * cols * element_size

and achieved bandwidth is that count over the time (`traffic_bytes` below is the one place it is
computed). Every strategy here reads the input from HBM once, except `looped` and the two-launch
form of `split`, which read a tile a second time (from L2 when it is still resident there).
All arithmetic is in fp32; the output has the input's dtype.

Strategies (each is a separate kernel; `STRATEGIES[name].run(x2d)` runs one on a 2-D tensor
whose last dimension is contiguous):

    rows    several rows per program: a (ROWS, BLOCK) tile, BLOCK = next_pow2(cols), for short rows
    row     one row per program, the whole row held in registers (BLOCK = next_pow2(cols))
    looped  one row per program streamed in tiles: pass 1 keeps a running max and a rescaled
            sum of exponentials, pass 2 re-reads the row (in reverse, so the tiles read last,
            most likely still in L2, come first), normalises and writes
    split   each row cut into segments of BLOCK columns, one program a segment: phase 1 writes
            each segment's (max, sum of exp), phase 2 combines the row's partials and writes the
            segment normalised. On a GPU both phases run in one persistent cooperative launch:
            a program keeps its segment in registers while it waits for the other segments of
            its row, so the input crosses HBM once; rows are handled in rounds of
            (programs // segments) rows, the next round's segment loaded before the wait.
            Where the row's segments cannot all be resident at once, and in Triton's CPU
            interpreter (which runs programs one after another), the phases are two launches.

Dispatch rule (`choose`), from measurements on an H200 (132 SMs; see the study's results):

    cols <= 1024                                   -> rows
    cols <= 16384 (fp32) / 32768 (fp16, bf16),
        and rows >= 2 * SMs                        -> row
    otherwise (long rows, or few rows)             -> split, persistent when resident
    CPU interpreter, rows too few to matter         -> as above; split runs as two launches

Launch parameters per strategy come from `config(strategy, cols, dtype)`, a table measured on
the H200 (no autotuning at run time, so nothing is compiled beyond one kernel per shape class).
"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Callable

import torch
import triton
import triton.language as tl

from kernels._checks import check_tensor, interpreting

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# ---- defaults (all measured on one H200; see the module docstring) ----
INTERPRETER_SMS = 132        # SM count assumed in the CPU interpreter, where no device is queried
ROWS_MAX_COLS = 1024         # rows per program up to here ...
ROW_MAX_COLS = {4: 16384, 2: 32768}   # ... one row per program (by element size) up to here ...
ROW_MIN_ROWS_PER_SM = 2      # ... when there are at least this many rows per SM; else split
SPLIT_MAX_PER_SM = 4         # cap on persistent split programs per SM (before occupancy)
VECTOR_BYTES = 16            # widest global access (ld.global.v4.b32)
PARTIALS_BLOCK = 128         # partials combined this many at a time by split's phase 2

_PARTIALS, _FINISH, _FUSED = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)   # split kernel modes


def traffic_bytes(rows: int, cols: int, dtype: torch.dtype) -> int:
    """Bytes an ideal softmax moves: one read and one write of every element."""
    return 2 * rows * cols * torch.tensor([], dtype=dtype).element_size()


def reference(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """The float64 answer `softmax` is checked against."""
    return torch.softmax(x.to(torch.float64), dim=dim)


# --------------------------------------------------------------------------------------------
# Kernels. x and out are (n_rows, n_cols) with unit column stride; the row strides may differ.
# VEC is a power of two dividing n_cols and both row strides (and the base addresses, in
# elements), so the compiler may use VEC-wide accesses without checking it.
# --------------------------------------------------------------------------------------------

@triton.jit
def _rows_kernel(out_ptr, x_ptr,
                 x_row_stride, out_row_stride,
                 n_rows, n_cols,
                 ROWS: tl.constexpr, BLOCK: tl.constexpr, VEC: tl.constexpr):
    """Several short rows per program: tiles of (ROWS, BLOCK), programs stride over the tiles."""
    cols = tl.arange(0, BLOCK)
    col_mask = tl.max_constancy(cols < n_cols, VEC)
    n_tiles = tl.cdiv(n_rows, ROWS)
    for tile in range(tl.program_id(0), n_tiles, tl.num_programs(0)):
        rows = tile * ROWS + tl.arange(0, ROWS)                                    # (ROWS,)
        x_off = tl.multiple_of(tl.cast(rows, tl.int64) * x_row_stride, VEC)
        o_off = tl.multiple_of(tl.cast(rows, tl.int64) * out_row_stride, VEC)
        mask = (rows < n_rows)[:, None] & col_mask[None, :]                         # (ROWS, BLOCK)
        x = tl.load(x_ptr + x_off[:, None] + cols[None, :], mask=mask, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
        # A row of -inf gives max -inf and NaN throughout, as torch.softmax does.
        e = tl.exp(x - tl.max(x, axis=1)[:, None])
        y = e * (1.0 / tl.sum(e, axis=1))[:, None]
        tl.store(out_ptr + o_off[:, None] + cols[None, :], y.to(out_ptr.dtype.element_ty),
                 mask=mask, eviction_policy="evict_first")


@triton.jit
def _row_kernel(out_ptr, x_ptr,
                x_row_stride, out_row_stride,
                n_rows, n_cols,
                BLOCK: tl.constexpr, VEC: tl.constexpr):
    """One row per program, held in registers; programs stride over the rows."""
    cols = tl.arange(0, BLOCK)
    mask = tl.max_constancy(cols < n_cols, VEC)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_off = tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
        o_off = tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC)
        x = tl.load(x_ptr + x_off + cols, mask=mask, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)                  # (BLOCK,)
        e = tl.exp(x - tl.max(x, axis=0))
        y = e * (1.0 / tl.sum(e, axis=0))
        tl.store(out_ptr + o_off + cols, y.to(out_ptr.dtype.element_ty), mask=mask,
                 eviction_policy="evict_first")


@triton.jit
def _looped_kernel(out_ptr, x_ptr,
                   x_row_stride, out_row_stride,
                   n_rows, n_cols,
                   BLOCK: tl.constexpr, VEC: tl.constexpr):
    """One row per program in tiles of BLOCK: online max and sum, then a normalising pass."""
    cols = tl.arange(0, BLOCK)
    n_tiles = tl.cdiv(n_cols, BLOCK)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + tl.multiple_of(tl.cast(row, tl.int64) * x_row_stride, VEC)
        o_row = out_ptr + tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC)
        m = tl.full([], -float("inf"), tl.float32)    # running max
        s = tl.full([], 0.0, tl.float32)              # running sum of exp(x - m)
        for t in range(0, n_tiles):
            offs = t * BLOCK + cols
            mask = tl.max_constancy(offs < n_cols, VEC)
            x = tl.load(x_row + offs, mask=mask, other=-float("inf"),
                        eviction_policy="evict_last").to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)   # no -inf - -inf while all -inf
            s = s * tl.exp(m - m_safe) + tl.sum(tl.exp(x - m_safe), axis=0)
            m = m_new
        inv = 1.0 / s
        for t in range(0, n_tiles):
            offs = (n_tiles - 1 - t) * BLOCK + cols     # last tiles first: they are still in L2
            mask = tl.max_constancy(offs < n_cols, VEC)
            x = tl.load(x_row + offs, mask=mask, other=-float("inf"),
                        eviction_policy="evict_first").to(tl.float32)
            y = tl.exp(x - m) * inv                     # m == -inf (all -inf row) gives NaN
            tl.store(o_row + offs, y.to(out_ptr.dtype.element_ty), mask=mask,
                     eviction_policy="evict_first")


@triton.jit
def _split_kernel(out_ptr, x_ptr, part_max_ptr, part_sum_ptr, arrive_ptr, depart_ptr,
                  x_row_stride, out_row_stride,
                  n_rows, n_cols, n_segs,
                  BLOCK: tl.constexpr, VEC: tl.constexpr, PARTIALS_BLOCK: tl.constexpr,
                  MODE: tl.constexpr, PREFETCH: tl.constexpr):
    """Each row cut into n_segs segments of BLOCK columns, one program a segment.

    part_max, part_sum: (n_rows, n_segs) fp32; arrive, depart: (n_rows,) int32, zero on entry
    and left zero on exit. Program p handles segment p % n_segs of rows p // n_segs,
    p // n_segs + R, ... where R = num_programs // n_segs (one row when MODE is not _FUSED).
    """
    pid = tl.program_id(0)
    seg = pid % n_segs
    rows_per_round = tl.num_programs(0) // n_segs
    cols = seg * BLOCK + tl.arange(0, BLOCK)
    mask = tl.max_constancy(cols < n_cols, VEC)
    p_offs = tl.arange(0, PARTIALS_BLOCK)

    first = pid // n_segs
    x = tl.load(x_ptr + tl.multiple_of(tl.cast(first, tl.int64) * x_row_stride, VEC) + cols,
                mask=mask & (first < n_rows), other=-float("inf"), eviction_policy="evict_first")
    for row in range(first, n_rows, rows_per_round):
        part = tl.cast(row, tl.int64) * n_segs
        xf = x.to(tl.float32)                                                       # (BLOCK,)
        nxt = row + rows_per_round
        if MODE != _FINISH:
            m = tl.max(xf, axis=0)
            m_safe = tl.where(m == -float("inf"), 0.0, m)       # an all -inf segment sums to 0
            s = tl.sum(tl.exp(xf - m_safe), axis=0)
            if MODE == _PARTIALS:
                tl.store(part_max_ptr + part + seg, m)
                tl.store(part_sum_ptr + part + seg, s)
            else:
                # Publish this segment's partials, then wait for the row's other segments.
                tl.atomic_xchg(part_max_ptr + part + seg, m, sem="relaxed")
                tl.atomic_xchg(part_sum_ptr + part + seg, s, sem="relaxed")
                tl.debug_barrier()
                tl.atomic_add(arrive_ptr + row, 1, sem="release")
                if PREFETCH:   # the next round's segment streams in while this one waits
                    x_next = tl.load(x_ptr + tl.multiple_of(tl.cast(nxt, tl.int64) * x_row_stride, VEC)
                                     + cols, mask=mask & (nxt < n_rows), other=-float("inf"),
                                     eviction_policy="evict_first")
                arrived = tl.atomic_add(arrive_ptr + row, 0, sem="acquire")
                while arrived < n_segs:
                    arrived = tl.atomic_add(arrive_ptr + row, 0, sem="acquire")
        if MODE != _PARTIALS:
            # Combine the row's partials: M = max m_j, S = sum s_j * exp(m_j - M).
            row_max = tl.full([], -float("inf"), tl.float32)
            for j in range(0, n_segs, PARTIALS_BLOCK):
                pm = tl.load(part_max_ptr + part + j + p_offs, mask=j + p_offs < n_segs,
                             other=-float("inf"), volatile=True)
                row_max = tl.maximum(row_max, tl.max(pm, axis=0))
            row_sum = tl.full([], 0.0, tl.float32)
            for j in range(0, n_segs, PARTIALS_BLOCK):
                pm = tl.load(part_max_ptr + part + j + p_offs, mask=j + p_offs < n_segs,
                             other=-float("inf"), volatile=True)
                ps = tl.load(part_sum_ptr + part + j + p_offs, mask=j + p_offs < n_segs,
                             other=0.0, volatile=True)
                row_sum += tl.sum(ps * tl.exp(pm - row_max), axis=0)   # 0 for all -inf segments
            y = tl.exp(xf - row_max) * (1.0 / row_sum)   # row_max == -inf (all -inf row): NaN
            tl.store(out_ptr + tl.multiple_of(tl.cast(row, tl.int64) * out_row_stride, VEC) + cols,
                     y.to(out_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")
            if MODE == _FUSED:
                # The last program to leave a row re-arms its counters for the next launch.
                departed = tl.atomic_add(depart_ptr + row, 1, sem="acq_rel")
                if departed == n_segs - 1:
                    tl.atomic_xchg(arrive_ptr + row, 0, sem="relaxed")
                    tl.atomic_xchg(depart_ptr + row, 0, sem="relaxed")
        if MODE == _FUSED:
            if PREFETCH:
                x = x_next
            else:
                x = tl.load(x_ptr + tl.multiple_of(tl.cast(nxt, tl.int64) * x_row_stride, VEC) + cols,
                            mask=mask & (nxt < n_rows), other=-float("inf"),
                            eviction_policy="evict_first")


# --------------------------------------------------------------------------------------------
# Launch parameters, device facts, launchers
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """Launch parameters of one strategy at one row length and dtype."""
    block: int            # columns per tile (power of two)
    num_warps: int
    rows: int = 1         # rows per tile (strategy `rows`)
    per_sm: int = 0       # persistent grid of per_sm programs per SM; 0: one program per tile
    prefetch: bool = True  # split: load the next round's segment before waiting


def _pow2(n: int) -> int:
    return triton.next_power_of_2(max(int(n), 1))


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def config(strategy: str, cols: int, dtype: torch.dtype) -> Config:
    """The measured launch table: parameters for `strategy` on rows of `cols` elements."""
    elem = torch.tensor([], dtype=dtype).element_size()
    block = _pow2(cols)
    if strategy == "rows":
        rows = _clamp(16384 // (block * elem), 1, 128)          # ~16 KB of input per tile
        return Config(block=block, num_warps=4, rows=rows)
    if strategy == "row":
        warps = _clamp(block * elem // (32 * 32), 4, 32)        # ~32 B of input per thread
        return Config(block=block, num_warps=warps)
    if strategy == "looped":
        tile = min(block, 32768 // elem)                        # 32 KB tiles
        return Config(block=tile, num_warps=_clamp(tile * elem // (32 * 64), 4, 16))
    if strategy == "split":
        seg = min(block, 32768 // elem)                         # 32 KB segments
        return Config(block=seg, num_warps=_clamp(seg * elem // (32 * 64), 4, 16))
    raise ValueError(f"unknown strategy {strategy!r}; expected one of {tuple(STRATEGIES)}")


@functools.lru_cache(maxsize=None)
def _device(index: int) -> dict:
    props = torch.cuda.get_device_properties(index)
    return {"sms": props.multi_processor_count,
            "regs": getattr(props, "regs_per_multiprocessor", 65536),
            "threads": props.max_threads_per_multi_processor,
            "smem": props.shared_memory_per_multiprocessor}


def num_sms(device: torch.device) -> int:
    if interpreting() or device.type != "cuda":
        return INTERPRETER_SMS
    return _device(device.index if device.index is not None else torch.cuda.current_device())["sms"]


_OCCUPANCY: dict = {}


def _resident_per_sm(key: tuple, device: torch.device, warmup: Callable[[], object]) -> int:
    """Programs of a compiled kernel that fit on one SM at once.

    Asks the CUDA driver (cuOccupancyMaxActiveBlocksPerMultiprocessor); where that is not
    reachable, counts registers, threads and shared memory the way the driver does.
    """
    if key not in _OCCUPANCY:
        compiled = warmup()
        compiled._init_handles()
        threads = 32 * compiled.metadata.num_warps
        smem = compiled.metadata.shared
        try:
            blocks = ctypes.c_int(0)
            status = _libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(blocks), ctypes.c_void_p(compiled.function), threads, ctypes.c_size_t(smem))
            if status != 0:
                raise OSError(f"CUDA driver error {status}")
            fit = blocks.value
        except (OSError, AttributeError):
            info = _device(device.index)
            regs = -(-max(compiled.n_regs, 1) // 8) * 8 * threads    # allocated 8 registers at a time
            fit = min(info["regs"] // regs, info["threads"] // threads, 32)
            if smem:
                fit = min(fit, info["smem"] // (smem + 1024))          # 1 KB reserved per block
        _OCCUPANCY[key] = max(fit, 0)
    return _OCCUPANCY[key]


@functools.lru_cache(maxsize=1)
def _libcuda():
    return ctypes.CDLL("libcuda.so.1")


def _vec(x: torch.Tensor, out: torch.Tensor) -> int:
    """Widest power-of-two access width (elements, <= 16 bytes) valid for every row of x and out."""
    elem = x.element_size()
    rows, cols = x.shape
    vec = VECTOR_BYTES // elem
    ints = [cols]
    if rows > 1:
        ints += [x.stride(0), out.stride(0)]
    while vec > 1 and (any(i % vec for i in ints)
                       or x.data_ptr() % (vec * elem) or out.data_ptr() % (vec * elem)):
        vec //= 2
    return vec


def _grid(work: int, cfg: Config, device: torch.device) -> int:
    if cfg.per_sm:
        return max(1, min(work, cfg.per_sm * num_sms(device)))
    return max(1, work)


def _launch_rows(x: torch.Tensor, out: torch.Tensor, cfg: Config) -> None:
    rows, cols = x.shape
    grid = _grid(triton.cdiv(rows, cfg.rows), cfg, x.device)
    _rows_kernel[(grid,)](out, x, x.stride(0), out.stride(0), rows, cols,
                          ROWS=cfg.rows, BLOCK=cfg.block, VEC=_vec(x, out), num_warps=cfg.num_warps)


def _launch_row(x: torch.Tensor, out: torch.Tensor, cfg: Config) -> None:
    rows, cols = x.shape
    _row_kernel[(_grid(rows, cfg, x.device),)](out, x, x.stride(0), out.stride(0), rows, cols,
                                                BLOCK=cfg.block, VEC=_vec(x, out),
                                                num_warps=cfg.num_warps)


def _launch_looped(x: torch.Tensor, out: torch.Tensor, cfg: Config) -> None:
    rows, cols = x.shape
    _looped_kernel[(_grid(rows, cfg, x.device),)](out, x, x.stride(0), out.stride(0), rows, cols,
                                                   BLOCK=cfg.block, VEC=_vec(x, out),
                                                   num_warps=cfg.num_warps)


_COUNTERS: dict = {}


def _counters(device: torch.device, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row arrive/depart counters of the fused split, one zeroed buffer per device and stream.

    The kernel leaves them zero, so they are allocated (and zeroed) once, not on every call.
    """
    key = (device, torch.cuda.current_stream(device).stream_id)
    buf = _COUNTERS.get(key)
    if buf is None or buf.shape[1] < rows:
        buf = torch.zeros((2, max(rows, 1024)), dtype=torch.int32, device=device)
        _COUNTERS[key] = buf
    return buf[0], buf[1]


def _launch_split(x: torch.Tensor, out: torch.Tensor, cfg: Config) -> None:
    rows, cols = x.shape
    n_segs = triton.cdiv(cols, cfg.block)
    vec = _vec(x, out)
    part_max = torch.empty((rows, n_segs), dtype=torch.float32, device=x.device)
    part_sum = torch.empty((rows, n_segs), dtype=torch.float32, device=x.device)
    common = dict(BLOCK=cfg.block, VEC=vec, PARTIALS_BLOCK=PARTIALS_BLOCK,
                  PREFETCH=cfg.prefetch, num_warps=cfg.num_warps)
    if not interpreting():
        arrive, depart = _counters(x.device, rows)
        args = (out, x, part_max, part_sum, arrive, depart, x.stride(0), out.stride(0),
                rows, cols, n_segs)
        key = ("split", x.device, x.dtype, cfg.block, cfg.num_warps, cfg.prefetch, vec)
        resident = _resident_per_sm(key, x.device, lambda: _split_kernel.warmup(
            *args, MODE=_FUSED, launch_cooperative_grid=True, grid=(1,), **common))
        per_sm = min(resident, cfg.per_sm or SPLIT_MAX_PER_SM)
        rows_per_round = min(per_sm * num_sms(x.device) // n_segs, rows)
        if rows_per_round >= 1:   # every segment of a round's rows is resident at once
            _split_kernel[(rows_per_round * n_segs,)](*args, MODE=_FUSED,
                                                      launch_cooperative_grid=True, **common)
            return
    # Two launches: partials of every segment, then combine and write (input read twice).
    args = (out, x, part_max, part_sum, part_max, part_max, x.stride(0), out.stride(0),
            rows, cols, n_segs)
    _split_kernel[(rows * n_segs,)](*args, MODE=_PARTIALS, **common)
    _split_kernel[(rows * n_segs,)](*args, MODE=_FINISH, **common)


# --------------------------------------------------------------------------------------------
# Strategies and the public API
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Strategy:
    """One kernel and its launch table. `run(x2d)` softmaxes each row of a (rows, cols) tensor."""
    name: str
    max_cols: int | None          # longest row the kernel handles (None: any)
    launch: Callable[[torch.Tensor, torch.Tensor, Config], None]

    def supports(self, cols: int) -> bool:
        return cols >= 1 and (self.max_cols is None or cols <= self.max_cols)

    def run(self, x2d: torch.Tensor, out: torch.Tensor | None = None,
            cfg: Config | None = None) -> torch.Tensor:
        check_tensor("x2d", x2d, DTYPES, ndim=2)
        rows, cols = x2d.shape
        if cols > 1 and x2d.stride(1) != 1:
            raise ValueError(f"x2d must have a contiguous last dimension, got strides {x2d.stride()}")
        if not self.supports(cols) and rows:
            raise ValueError(f"strategy {self.name!r} handles rows of at most {self.max_cols} "
                             f"columns, got {cols}")
        if out is None:
            out = torch.empty((rows, cols), dtype=x2d.dtype, device=x2d.device)
        elif (out.shape != x2d.shape or out.dtype != x2d.dtype or out.device != x2d.device
              or (cols > 1 and out.stride(1) != 1)):
            raise ValueError(f"out must be a {tuple(x2d.shape)} {x2d.dtype} tensor on {x2d.device} "
                             "with a contiguous last dimension")
        if rows and cols:
            self.launch(x2d, out, cfg or config(self.name, cols, x2d.dtype))
        return out


STRATEGIES: dict[str, Strategy] = {
    "rows": Strategy("rows", 4096, _launch_rows),
    "row": Strategy("row", 65536, _launch_row),
    "looped": Strategy("looped", None, _launch_looped),
    "split": Strategy("split", None, _launch_split),
}


def choose(rows: int, cols: int, dtype: torch.dtype, sms: int) -> str:
    """The dispatch rule (see the module docstring)."""
    elem = torch.tensor([], dtype=dtype).element_size()
    if cols <= ROWS_MAX_COLS:
        return "rows"
    if cols <= ROW_MAX_COLS[elem] and rows >= ROW_MIN_ROWS_PER_SM * sms:
        return "row"
    return "split"


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.softmax(x, dim) for fp32/fp16/bf16 CUDA tensors of any shape and strides.

    Math is in fp32 and the result has x's dtype and shape. Rows that are entirely -inf give NaN,
    as torch.softmax does. When `dim` is not the innermost dimension, the input is made
    contiguous along it and the result is returned as a view laid out with `dim` innermost.
    """
    check_tensor("x", x, DTYPES)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ValueError(f"dim must be an int, got {type(dim).__name__}")
    ndim = max(x.dim(), 1)
    if not -ndim <= dim < ndim:
        raise ValueError(f"dim {dim} is out of range for a tensor of {x.dim()} dimensions")
    if x.dim() == 0:
        return softmax(x.reshape(1), 0).reshape(())
    dim %= ndim
    if x.numel() == 0:
        return torch.empty_like(x)
    xt = x.movedim(dim, -1)                                       # (..., cols)
    cols = xt.shape[-1]
    try:
        x2d = xt.view(-1, cols)                                   # (rows, cols), no copy
    except RuntimeError:
        x2d = xt.reshape(-1, cols)
    if cols > 1 and x2d.stride(1) != 1:
        x2d = x2d.contiguous()
    name = choose(x2d.shape[0], cols, x.dtype, num_sms(x.device))
    out = STRATEGIES[name].run(x2d)
    return out.view(xt.shape).movedim(-1, dim)
