"""A split softmax for Hopper (sm_90) in Gluon, measured and not kept: few long rows read from HBM
once, each program's segment held in shared memory (loaded by TMA) across its row's exchange.
probes/softmax_tma.py times it against the shipped split (kernels/fused_softmax.py); nothing in
the study launches it.

The question. The Triton split kernel streams the few-long-row shapes at 0.60-0.70 of the copy
bandwidth; Nsight Compute put most of the loss on bytes not in flight, with 1.19-1.23x the ideal
DRAM bytes from segments re-read out of L2 (docs/kernels/softmax.md). Holding a
segment in shared memory answers both: TMA keeps up to a ring of 16 KB boxes in flight per
program without registers, and HBM is read once and written once.

Kernel (one partition, a cooperative launch so that every segment of a round is resident):
- x (rows, cols), cols a multiple of 128 bytes of elements, is a 3-D TMA descriptor (rows,
  cols / LINE, LINE) read in (1, BOX_LINES, LINE) boxes of 16 KB with 128-byte swizzle; a box past
  a row's end is clipped by TMA (masked in registers), so no byte is read twice.
- A row's boxes are cut into n_segs balanced segments of whole boxes, one program a segment, rows
  in rounds of programs // n_segs (`segments` picks n_segs: fewest rounds * (boxes + 1)).
- Shared memory is a ring of box slots, one mbarrier each; slot c % RING takes the program's
  load c and is refilled with load c + RING once the box it holds is written out, so a segment of
  at most half the ring is loaded a round ahead. Boxes a segment does not have are only arrived on.
- A round: the segment's max and sum of exp from shared memory (STATS 0: an elementwise max pass
  then a sum pass; 1: one read, a box's max and sum merged into the running pair; 2: as 0 with
  the max in the input's 16 bits), published by plain stores, a barrier and a release add on the
  row's counter; a load spin, one acquire; the row's max and sum from its partials in one read;
  y = exp2((x - max) log2 e - log2 sum) written by 16-byte stores. The last program to leave a row
  zeroes its counters. (exp2 of x * log2 e minus a rounded max * log2 e, one FMA, lost rows
  holding 1e30: the difference is taken first.)

Measured on an H200 (probes/softmax_tma.py; CUPTI kernel time, L2 flushed; share of the time of
out.copy_(x) at the same bytes; the shipped split in brackets), every variant checked first
against float64 (rows holding -inf, an all -inf row, 3e4 / 1e30 entries):
- One program an SM, 8 warps, a 12-box ring (192 KB), STATS 0, segments chosen by `segments`:
  16x4194304 fp16 130.7 us, 0.49 of the copy (split 104.8, 0.61); 64x1048576 fp16 132.7, 0.48
  (102.7); 256x262144 fp16 128.3, 0.50 (100.6); 1024x131072 fp16 233.9, 0.55 (193.7, 0.66);
  1024x131072 fp32 382.9, 0.67 (364.9, 0.70). More segments (more, shorter rounds) were slower at
  every shape (64x1048576 fp16, 1-box segments: 356 us): a round costs several us.
- The same with no exchange at all (no counter, no wait; wrong results, timing only): 16-bit
  94.5-117.4 us (0.54-0.67), fp32 64x1048576 159.7 (0.79), 1024x131072 291.0 (0.88). The design's
  own ceiling at one program an SM is below the copy in 16 bits, where two exp2, three
  shared-memory reads and three conversions an element leave it bound by per-element work on 8
  warps; fp32, half the elements a byte, gets within reach.
- A read-modify-write spin instead of the load spin: 126.8 against 130.5 us (16x4194304 fp16),
  400.8 against 388.0 (1024x131072 fp32); 4 or 16 warps: no better (127.9-137.3 at 16x4194304).
- STATS 1 (one read, two reductions a box) at one program an SM, stats a round ahead: slower
  (16x4194304 fp16 149.6 us; 1024x131072 fp32 533.3): a box's reductions are barriers that idle
  the SM's only 8 warps.
- Programs an SM sharing the ring (2: 6 boxes each, 3: 4, 4: 3; registers capped to fit): three
  is best, 16x4194304 fp16 124.8 us (0.51), 256x262144 fp16 113.8 (0.56), 1024x131072 fp16 191.4
  (0.67; split 193.1), 64x1048576 fp32 214.5 (0.59; split 190.1), 1024x131072 fp32 354.7 (0.72;
  split 366.1), STATS 1 best in 16 bits there. The max in 16 bits (HMNMX2, STATS 2): within 1% of
  STATS 0 (137.3 against 136.9 us, 16x4194304 fp16, 2 an SM). Stats a round ahead on segments of
  half the ring: 256x262144 fp16 2 an SM 110.2 us (0.58), the best there, and slower elsewhere
  (16x4194304 fp16 157.0-168.8).
So it beats the shipped split by 3% at 1024x131072 fp32, ties it at 1024x131072 fp16 and loses
9-18% at the other shapes. Holding
the row in shared memory removes the re-read, but a round's exchange and the per-element work
sit on the critical path of the same few warps. What it would take: warp specialization (a TMA
producer warp, consumer warpgroups running round r + 1's stats while round r's exchange is in
flight) and fewer exp2 an element (the write pass reusing the stats pass's exponentials).

Scope (`supports`): fp32 / fp16 / bf16 on sm_90, x and out (rows, cols) with the last dimension
contiguous, cols a multiple of 128 bytes of elements, 16-byte aligned row strides and pointers,
and rows that n_segs <= SMs segments of at most a ring of boxes cover.
"""
from __future__ import annotations

import functools

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernels._device import cdiv

LINE_BYTES = 128             # a line of the (rows, cols / LINE, LINE) view: 128 bytes (the TMA swizzle span)
BOX_LINES = 128              # lines per TMA box: 16 KB
RING_BOXES = 12              # shared-memory box slots an SM holds (192 KB), shared among its programs
ROUND_COST_BOXES = 1         # segment choice: a round's exchange costs about this many boxes of streaming
NUM_WARPS = 8                # warps a program
PARTIALS_BLOCK = 256         # partials read at once when combining a row's segments (n_segs <= SMs)
LOG2E = gl.constexpr(1.4426950408889634)
_GL_DTYPES = {torch.float32: gl.float32, torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}


def line_elems(dtype: torch.dtype) -> int:
    return LINE_BYTES // dtype.itemsize


def boxes_per_row(cols: int, dtype: torch.dtype) -> int:
    """TMA boxes that cover a row of `cols` elements (the last one clipped at the row's end)."""
    return cdiv(cdiv(cols, line_elems(dtype)), BOX_LINES)


@gluon.jit
def _issue(x_desc, smem, bars, c, first, rpr, box0, seg_boxes,
           SEGMENT: gl.constexpr, RING: gl.constexpr, BOX: gl.constexpr):
    """Load c of this program (round c // SEGMENT, box c % SEGMENT of its segment) into slot c % RING.
    Box slots past this segment's boxes are only arrived on (nothing to read)."""
    slot = c % RING
    k = c % SEGMENT
    row = first + (c // SEGMENT) * rpr
    needed = k < seg_boxes
    bar = bars.index(slot)
    mbarrier.expect(bar, x_desc.block_type.nbytes, pred=needed)
    tma.async_copy_global_to_shared(x_desc, [row, (box0 + k) * BOX, 0], bar, smem.index(slot), pred=needed)
    mbarrier.arrive(bar, pred=k >= seg_boxes)


@gluon.jit
def _valid(k, box0, seg_lines_end, BOX: gl.constexpr, LINE: gl.constexpr, layout: gl.constexpr):
    """(1, BOX, 1) mask of box k's lines that belong to this segment and its row."""
    lines = (box0 + k) * BOX + gl.arange(0, BOX, layout=gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    return gl.expand_dims(gl.expand_dims(lines < seg_lines_end, 0), 2)                 # (1, BOX, 1)


@gluon.jit
def _reduce_all(x, MAX: gl.constexpr):
    if MAX:
        return gl.max(gl.max(gl.max(x, 2), 1), 0)
    return gl.sum(gl.sum(gl.sum(x, 2), 1), 0)


@gluon.jit
def _box_stats(x):
    """(max, sum of exp(x - max)) of a box in registers; (-inf, 0) if it is all -inf."""
    m = _reduce_all(x, True)
    m_safe = gl.where(m == float("-inf"), 0.0, m)
    return m, _reduce_all(gl.exp2((x - m_safe) * LOG2E), False)


@gluon.jit
def _merge(m1, s1, m2, s2):
    m = gl.maximum(m1, m2)
    m_safe = gl.where(m == float("-inf"), 0.0, m)
    return m, s1 * gl.exp2((m1 - m_safe) * LOG2E) + s2 * gl.exp2((m2 - m_safe) * LOG2E)


@gluon.jit
def _segment_stats(smem, bars, base, box0, seg_boxes, seg_end, full_boxes,
                   SEGMENT: gl.constexpr, RING: gl.constexpr, BOX: gl.constexpr, LINE: gl.constexpr,
                   layout: gl.constexpr, STATS: gl.constexpr):
    """(max, sum of exp(x - max)) of this program's segment of one round (loads base .. base + SEGMENT
    - 1): one read of each box from shared memory, its stats merged into the running pair."""
    if STATS == 1:
        m = gl.full([], float("-inf"), gl.float32)
        s = gl.full([], 0.0, gl.float32)
        for k in range(SEGMENT):
            c = base + k
            mbarrier.wait(bars.index(c % RING), (c // RING) & 1)
            if k < seg_boxes:
                x = smem.index(c % RING).load(layout).to(gl.float32)
                if k >= full_boxes:                       # the row's last box, past its end
                    x = gl.where(_valid(k, box0, seg_end, BOX, LINE, layout), x, float("-inf"))
                bm, bs = _box_stats(x)
                m, s = _merge(m, s, bm, bs)
    else:
        # STATS == 2: the maximum in the input's dtype (exact; no conversion in this pass)
        MAX_DTYPE: gl.constexpr = smem.dtype if STATS == 2 else gl.float32
        mx = gl.full([1, BOX, LINE], float("-inf"), MAX_DTYPE, layout)
        for k in range(SEGMENT):
            c = base + k
            mbarrier.wait(bars.index(c % RING), (c // RING) & 1)
            if k < seg_boxes:
                x = smem.index(c % RING).load(layout).to(MAX_DTYPE)
                if k >= full_boxes:
                    x = gl.where(_valid(k, box0, seg_end, BOX, LINE, layout), x, float("-inf")).to(MAX_DTYPE)
                mx = gl.maximum(mx, x)
        m = gl.max(gl.max(gl.max(mx, 2), 1), 0).to(gl.float32)
        m_safe = gl.where(m == float("-inf"), 0.0, m)
        sx = gl.zeros([1, BOX, LINE], gl.float32, layout)
        for k in range(SEGMENT):
            c = base + k
            if k < seg_boxes:
                x = smem.index(c % RING).load(layout).to(gl.float32)
                if k >= full_boxes:
                    x = gl.where(_valid(k, box0, seg_end, BOX, LINE, layout), x, float("-inf"))
                sx += gl.exp2((x - m_safe) * LOG2E)
        s = _reduce_all(sx, False)
    return m, s


@gluon.jit
def _publish(part_max_ptr, part_sum_ptr, arrive_ptr, part, row, m, s, EXCHANGE: gl.constexpr):
    gl.store(part_max_ptr + part, m)
    gl.store(part_sum_ptr + part, s)
    gl.thread_barrier()
    if EXCHANGE:
        gl.atomic_add(arrive_ptr + row, 1, sem="release")


@gluon.jit
def _split_smem_kernel(x_desc, out_ptr, part_max_ptr, part_sum_ptr, arrive_ptr, depart_ptr,
                       out_row_stride, n_rows, n_lines, n_boxes_row, n_segs,
                       SEGMENT: gl.constexpr, RING: gl.constexpr, BOX: gl.constexpr, LINE: gl.constexpr,
                       VEC: gl.constexpr, PARTIALS: gl.constexpr, EXCHANGE: gl.constexpr = True,
                       AHEAD_OK: gl.constexpr = True, STATS: gl.constexpr = 0):
    NW: gl.constexpr = gl.num_warps()
    TPL: gl.constexpr = LINE // VEC                     # threads across a line (8: 16 bytes each)
    AHEAD: gl.constexpr = AHEAD_OK and 2 * SEGMENT <= RING          # next round's segment loaded during this one
    layout: gl.constexpr = gl.BlockedLayout([1, 1, VEC], [1, 32 // TPL, TPL], [1, NW, 1], [2, 1, 0])
    p_layout: gl.constexpr = gl.BlockedLayout([1], [32], [NW], [0])
    smem = gl.allocate_shared_memory(x_desc.dtype, [RING, 1, BOX, LINE], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(RING):
        mbarrier.init(bars.index(i), count=1)
    fence_async_shared()

    pid = gl.program_id(0)
    seg = pid % n_segs
    first = pid // n_segs
    rpr = gl.num_programs(0) // n_segs
    box0 = (seg * n_boxes_row) // n_segs                 # balanced whole boxes
    seg_boxes = ((seg + 1) * n_boxes_row) // n_segs - box0
    seg_end = gl.minimum((box0 + seg_boxes) * BOX, n_lines)
    full_boxes = (seg_end // BOX) - box0                 # boxes of the segment wholly inside the row
    n_my = gl.maximum(gl.cdiv(n_rows - first, rpr), 0)
    total = n_my * SEGMENT

    for c in range(0, gl.minimum(total, RING)):
        _issue(x_desc, smem, bars, c, first, rpr, box0, seg_boxes, SEGMENT, RING, BOX)

    offs_l = gl.arange(0, BOX, layout=gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    offs_e = gl.arange(0, LINE, layout=gl.SliceLayout(0, gl.SliceLayout(1, layout)))
    offs = (gl.expand_dims(gl.expand_dims(offs_l, 0), 2) * LINE
            + gl.expand_dims(gl.expand_dims(offs_e, 0), 1))                               # (1, BOX, LINE)
    offs_p = gl.arange(0, PARTIALS, layout=p_layout)
    if AHEAD:   # stats one round ahead: round i + 1's are published before waiting on round i's
        if n_my > 0:
            m, s = _segment_stats(smem, bars, 0, box0, seg_boxes, seg_end, full_boxes, SEGMENT, RING, BOX, LINE,
                                  layout, STATS)
            _publish(part_max_ptr, part_sum_ptr, arrive_ptr, first.to(gl.int64) * n_segs + seg, first, m, s,
                     EXCHANGE)
    for i in range(n_my):
        row = first + i * rpr
        base = i * SEGMENT
        part = row.to(gl.int64) * n_segs
        if AHEAD:
            if i + 1 < n_my:
                m, s = _segment_stats(smem, bars, base + SEGMENT, box0, seg_boxes, seg_end, full_boxes,
                                      SEGMENT, RING, BOX, LINE, layout, STATS)
                _publish(part_max_ptr, part_sum_ptr, arrive_ptr, part + rpr * n_segs + seg, row + rpr, m, s,
                         EXCHANGE)
        else:
            m, s = _segment_stats(smem, bars, base, box0, seg_boxes, seg_end, full_boxes, SEGMENT, RING, BOX, LINE,
                                  layout, STATS)
            _publish(part_max_ptr, part_sum_ptr, arrive_ptr, part + seg, row, m, s, EXCHANGE)
        # Wait for the row's other segments (a load spin, then one acquire), combine in one read.
        if EXCHANGE:
            arrived = gl.load(arrive_ptr + row, volatile=True)
            while arrived < n_segs:
                arrived = gl.load(arrive_ptr + row, volatile=True)
            gl.atomic_add(arrive_ptr + row, 0, sem="acquire")
        pmask = offs_p < n_segs
        pm = gl.load(part_max_ptr + part + offs_p, mask=pmask, other=float("-inf"), volatile=True)
        ps = gl.load(part_sum_ptr + part + offs_p, mask=pmask, other=0.0, volatile=True)
        big = gl.max(pm, 0)
        row_sum = gl.sum(ps * gl.exp2((pm - big) * LOG2E), 0)          # all -inf segments add 0
        shift = gl.log2(row_sum)                                         # y = exp2((x - max) log2 e - shift)
        # Normalise and write; each slot is refilled with its next load once read.
        o_row = out_ptr + row.to(gl.int64) * out_row_stride
        for k in range(SEGMENT):
            c = base + k
            if k < seg_boxes:
                x = smem.index(c % RING).load(layout).to(gl.float32)
                y = gl.exp2((x - big) * LOG2E - shift).to(out_ptr.dtype.element_ty)
                if k < full_boxes:
                    gl.store(o_row + (box0 + k) * (BOX * LINE) + offs, y)
                else:
                    gl.store(o_row + (box0 + k) * (BOX * LINE) + offs, y,
                             mask=_valid(k, box0, seg_end, BOX, LINE, layout))
            gl.thread_barrier()                                          # every thread has read the slot
            if c + RING < total:
                _issue(x_desc, smem, bars, c + RING, first, rpr, box0, seg_boxes, SEGMENT, RING, BOX)
        # The last program to leave the row re-arms its counters for the next launch.
        if EXCHANGE:
            departed = gl.atomic_add(depart_ptr + row, 1, sem="acq_rel")
            if departed == n_segs - 1:
                gl.atomic_xchg(arrive_ptr + row, 0, sem="relaxed")
                gl.atomic_xchg(depart_ptr + row, 0, sem="relaxed")


@functools.lru_cache(maxsize=None)
def _smem_layout(dtype: torch.dtype):
    return gl.NVMMASharedLayout.get_default_for([1, BOX_LINES, line_elems(dtype)], _GL_DTYPES[dtype])


def segments(rows: int, cols: int, dtype: torch.dtype, sms: int, per_sm: int = 1,
             ring: int = RING_BOXES) -> tuple[int, int] | None:
    """(n_segs, boxes per segment) of the launch, or None when no segmentation fits.

    The count that minimises rounds * (boxes per segment + ROUND_COST_BOXES): the time a program
    streams, counted in boxes, plus a round's exchange, with rounds = cdiv(rows, SMs // n_segs);
    among the counts whose segments take at most half the ring (loaded a round ahead) when any do.
    """
    n_boxes = boxes_per_row(cols, dtype)
    best = None
    programs = sms * per_sm
    for n_segs in range(cdiv(n_boxes, ring), min(n_boxes, programs, PARTIALS_BLOCK) + 1):
        boxes = cdiv(n_boxes, n_segs)
        cost = cdiv(rows, programs // n_segs) * (boxes + ROUND_COST_BOXES)
        if best is None or cost < best[0]:
            best = (cost, n_segs, boxes)
    return None if best is None else best[1:]


def supports(x: torch.Tensor, out: torch.Tensor, sms: int) -> bool:
    """True when the kernel takes this (rows, cols) input and output (see Scope)."""
    if x.device.type != "cuda" or x.dtype not in _GL_DTYPES or x.dim() != 2 or out.dtype != x.dtype:
        return False
    if torch.cuda.get_device_capability(x.device) != (9, 0):
        return False
    rows, cols = x.shape
    line = line_elems(x.dtype)
    if rows == 0 or cols % line or x.stride(1) != 1 or out.stride(1) != 1 or out.shape != x.shape:
        return False
    if (x.stride(0) * x.element_size()) % 16 or (out.stride(0) * out.element_size()) % 16:
        return False
    if x.data_ptr() % 16 or out.data_ptr() % 16:
        return False
    return segments(rows, cols, x.dtype, sms) is not None


def descriptor(x: torch.Tensor) -> TensorDescriptor:
    """x (rows, cols) as a (rows, cols / LINE, LINE) TMA descriptor read in (1, BOX_LINES, LINE) boxes."""
    rows, cols = x.shape
    line = line_elems(x.dtype)
    return TensorDescriptor(x, [rows, cols // line, line], [x.stride(0), line, 1], [1, BOX_LINES, line],
                            _smem_layout(x.dtype))


def launch(x: torch.Tensor, out: torch.Tensor, parts: torch.Tensor, arrive: torch.Tensor, depart: torch.Tensor,
           sms: int, n_segs: int | None = None, num_warps: int = NUM_WARPS, exchange: bool = True,
           per_sm: int = 1, ahead: bool = True, stats: int = 0):
    """softmax of x's rows into out (supports(x, out) holds); parts (2, rows, n_segs) fp32 scratch,
    arrive / depart (rows,) int32 zeros (left zero). The options are the probe's variants: per_sm
    programs an SM share the ring (registers capped to fit), `stats` is STATS, `ahead` allows stats
    a round ahead, exchange=False skips the exchange (timing only: wrong results). Returns
    (compiled kernel, grid, n_segs)."""
    rows, cols = x.shape
    line = line_elems(x.dtype)
    n_lines = cols // line
    n_boxes = boxes_per_row(cols, x.dtype)
    ring = RING_BOXES // per_sm
    if n_segs is None:
        n_segs, boxes = segments(rows, cols, x.dtype, sms, per_sm, ring)
    else:
        boxes = cdiv(n_boxes, n_segs)
    grid = (min(sms * per_sm // n_segs, rows) * n_segs,)
    compiled = _split_smem_kernel[grid](
        descriptor(x), out, parts[0], parts[1], arrive, depart, out.stride(0), rows, n_lines, n_boxes, n_segs,
        SEGMENT=boxes, RING=ring, BOX=BOX_LINES, LINE=line, VEC=16 // x.element_size(),
        PARTIALS=PARTIALS_BLOCK, EXCHANGE=exchange, AHEAD_OK=ahead, STATS=stats, num_warps=num_warps,
        maxnreg=min(255, 65536 // (per_sm * 32 * num_warps) // 8 * 8), launch_cooperative_grid=True)
    return compiled, grid, n_segs
