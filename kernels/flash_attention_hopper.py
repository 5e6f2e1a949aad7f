"""Flash attention forward for Hopper (sm_90) in Gluon, Triton's low-level layer: warp-specialized,
FlashAttention-3 style. kernels.flash_attention.attention() launches it for the shapes `supports`
accepts; everything else runs the Triton kernel there.

Scope (`supports`): a GPU of compute capability 9.0 (CAPABILITY), outside Triton's interpreter;
fp16 / bf16 (DTYPES); head dim 128 or 64 (HEAD_DIMS; the HEAD_DIM constexpr, taken from the
tensors); Nq and Nk multiples of 128 (BLOCK_M, BLOCK_N; any such pair without a mask; Nq <= Nk
with the causal mask, aligned bottom-right as kernels.flash_attention's: query i sees keys
j <= i + (Nk - Nq)); grouped-query attention (Hq % Hkv == 0); B*Hq*Nq and B*Hkv*Nk at most
MAX_ROWS; contiguous q, k, v and o with 16-byte aligned data. sm_scale is any positive number;
softmax runs in fp32 with exp2, log2(e) folded into the scale. Work is counted by
kernels.flash_attention.attention_flops.

Kernel
- q, o contiguous (B, Hq, Nq, D) and k, v (B, Hkv, Nk, D), seen as (B*Hq*Nq, D) and
  (B*Hkv*Nk, D) matrices through TMA descriptors (blocks of 64 or 128 rows by D). Grid
  (Nq/128, B*Hq): one program per 128 query rows of one head; with a causal mask the heaviest
  query blocks of a head start first.
- Causal key range: Nk - Nq is a multiple of 128, so the program of query rows [m, m + 128)
  sees key blocks 0 .. (m + Nk - Nq) / 128, all of them unmasked except the last, whose mask is
  the square block's lower triangle (key offset <= query offset within the block); every row
  sees key 0, so no row is empty. Nq == Nk is the case Nk - Nq = 0.
- Three partitions (gl.warp_specialize), 12 warps, maxnreg 168 (MAXNREG):
    loader     1 warp (padded to a warpgroup), 24 registers: TMA-loads the two 64-row halves of the
               Q tile once, then K and V blocks of 128 keys into a ring of STAGES = 3 slots
               (k_ready / v_ready completed by TMA, kv_empty arrived on by both consumers).
    consumers  two 4-warp partitions, 240 registers each, one per 64-row half of the Q tile
               (wgmma M = 64); they share the K/V ring and otherwise run independently.
- Each consumer overlaps its two products (FlashAttention-3's intra-warpgroup overlap): it issues
  S_{j+1} = Q K_{j+1}^T and P_j V_j together, and runs the softmax of S_{j+1} while P_j V_j is in
  flight. An iteration holds two ring slots, hence three stages. Before waiting for P_j V_j it waits
  on V_j's already-completed barrier: that wait ends the basic block, so ptxas cannot hoist the
  wgmma wait above the softmax (which would undo the overlap).
- Key blocks every query of the program sees run without a mask; the causal diagonal block runs in
  a loop of its own, so no loop body holds a branch. The output leaves through the consumer's
  Q buffer (free by then) by a TMA store.
- Shared memory: Q 32 KB, K and V 3 x 2 x 32 KB: 224 KB of Hopper's 227 at D = 128; half of
  each (112 KB) at D = 64, with the same tiles (BLOCK_M = BLOCK_N = 128, STAGES = 3) and
  register split (the accumulator is 64 x 64 there instead of 64 x 128).
- Nq != Nk (chunked prefill, e.g. Nq = 1024 against Nk = 8192) runs the same code with the
  diagonal moved by Nk - Nq.

Launch: `forward` launches through Gluon's JIT and returns the compiled kernel; a repeat call
(kernels.flash_attention's plan cache) launches it directly with `launch_descriptors` and
`replay_args`. `compile_for_sm90` compiles the kernel offline (no GPU), the one check of it CI
can run.

Measurements behind each choice: docs/kernels/attention.md
"""
from __future__ import annotations

import functools

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernels._checks import LOG2E, interpreting
from kernels._plans import aligned

CAPABILITY = (9, 0)          # Hopper: wgmma, TMA, setmaxnreg
DTYPES = (torch.float16, torch.bfloat16)
HEAD_DIMS = (64, 128)        # head dims supports() accepts, the HEAD_DIM constexpr (D = 128 only: (128,))
BLOCK_M = 128                # query rows a program
BLOCK_N = 128                # keys a K/V block
QROWS = BLOCK_M // 2         # query rows a consumer partition
STAGES = 3                   # K/V ring slots
NUM_WARPS = 4                # the default (first consumer) partition; 12 warps in all
MAXNREG = 168                # registers a thread over all 12 warps: (2 * 4 * 240 + 4 * 24) / 12
LOADER_REGS = 24
CONSUMER_REGS = 240
MAX_ROWS = 2**31 - 1         # B * Hq * Nq and B * Hkv * Nk rows: TMA coordinates and row offsets are 32-bit


# ---------------------------------------------------------------- predicate

def device_capability(t: torch.Tensor) -> tuple[int, int] | None:
    """Compute capability of the CUDA device t is on, None off CUDA (a function of its own so
    that tests can stand in for a GPU)."""
    return torch.cuda.get_device_capability(t.device) if t.is_cuda else None


def _tma_ready(t: torch.Tensor) -> bool:
    """Contiguous, and 16-byte aligned as TMA's global addresses must be."""
    return t.is_contiguous() and aligned(t)


def supports(q, k, v, causal: bool) -> bool:
    """True when this kernel computes attention(q, k, v, causal) (the module docstring's scope) on
    a compute capability 9.0 GPU, outside Triton's interpreter. The output is allocated contiguous
    by the caller; `forward` needs it 16-byte aligned as well."""
    if interpreting():
        return False
    tensors = (q, k, v)
    if not all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in tensors):
        return False
    if k.device != q.device or v.device != q.device:
        return False
    if q.dtype not in DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        return False
    (batch, heads_q, seqlen_q, head_dim), (batch_kv, heads_kv, seqlen_k, head_dim_kv) = q.shape, k.shape
    if k.shape != v.shape or batch_kv != batch or head_dim not in HEAD_DIMS or head_dim_kv != head_dim:
        return False
    if heads_kv == 0 or heads_q % heads_kv != 0:
        return False
    if seqlen_q < BLOCK_M or seqlen_q % BLOCK_M != 0 or seqlen_k < BLOCK_N or seqlen_k % BLOCK_N != 0:
        return False
    if causal and seqlen_q > seqlen_k:      # rows that see no key: the Triton kernel writes their zeros
        return False
    if batch * heads_q * seqlen_q > MAX_ROWS or batch * heads_kv * seqlen_k > MAX_ROWS:
        return False
    if not all(_tma_ready(t) for t in tensors):
        return False
    return device_capability(q) == CAPABILITY


# ---------------------------------------------------------------- kernel

@gluon.jit
def _loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, bars, q_row, kv_row0, n_blocks,
            QROWS: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    q_bar, k_ready, v_ready, kv_empty = bars
    mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
    for i in gl.static_range(2):
        tma.async_copy_global_to_shared(q_desc, [q_row + i * QROWS, 0], q_bar, q_smem.index(i))
    for j in range(n_blocks):
        st = j % STAGES
        ph = (j // STAGES) & 1
        mbarrier.wait(kv_empty.index(st), ph ^ 1)          # a fresh barrier passes parity 1 at once
        mbarrier.expect(k_ready.index(st), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [kv_row0 + j * BLOCK_N, 0], k_ready.index(st), k_smem.index(st))
        mbarrier.expect(v_ready.index(st), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [kv_row0 + j * BLOCK_N, 0], v_ready.index(st), v_smem.index(st))


@gluon.jit
def _softmax_step(s, j, m_i, l_i, qk_scale, offs_m, MASK: gl.constexpr, BLOCK_N: gl.constexpr,
                  s_layout: gl.constexpr):
    """Probabilities of key block j (log2 domain, masked iff MASK), the new row max and sum, and
    the factor that rescales what was accumulated before."""
    if MASK:
        offs_n = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        s = gl.where(offs_n[None, :] <= offs_m[:, None], s * qk_scale, float("-inf"))
        m_new = gl.maximum(m_i, gl.max(s, 1))
        p = gl.exp2(s - m_new[:, None])
    else:
        # qk_scale > 0, so max(s) * scale == max(s * scale)
        m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
        p = gl.exp2(s * qk_scale - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    return p, m_new, l_i * alpha + gl.sum(p, 1), alpha


@gluon.jit
def _overlapped_step(j, q_tile, k_smem, v_smem, k_ready, v_ready, kv_empty, p, m_i, l_i, acc, zero_s, qk_scale,
                     offs_m, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, MASK: gl.constexpr,
                     s_layout: gl.constexpr, p_layout: gl.constexpr, row_o: gl.constexpr):
    """Issue S_{j+1} = Q K_{j+1}^T and P_j V_j; softmax S_{j+1} (masked iff MASK) while P_j V_j runs."""
    st = j % STAGES
    st1 = (j + 1) % STAGES
    mbarrier.wait(k_ready.index(st1), ((j + 1) // STAGES) & 1)
    mbarrier.wait(v_ready.index(st), (j // STAGES) & 1)
    s = warpgroup_mma(q_tile, k_smem.index(st1).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    acc = warpgroup_mma(gl.convert_layout(p.to(v_smem.dtype), p_layout), v_smem.index(st), acc, is_async=True)
    s = warpgroup_mma_wait(1, deps=(s,))
    p, m_i, l_i, alpha = _softmax_step(s, j + 1, m_i, l_i, qk_scale, offs_m, MASK, BLOCK_N, s_layout)
    # V_j's barrier has completed and cannot move on before this partition releases the slot, so
    # this wait returns at once; but its loop ends the basic block, and ptxas can no longer hoist
    # the wgmma wait below above the softmax.
    mbarrier.wait(v_ready.index(st), (j // STAGES) & 1)
    acc = warpgroup_mma_wait(0, deps=(acc,))
    mbarrier.arrive(kv_empty.index(st), count=1)
    acc = acc * gl.convert_layout(alpha, row_o)[:, None]
    return p, m_i, l_i, acc


@gluon.jit
def _consumer(o_desc, q_smem, k_smem, v_smem, bars, q_row, diag_m, n_blocks, full_blocks, qk_scale,
              HALF: gl.constexpr, QROWS: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
              STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    """Query rows HALF * QROWS + [0, QROWS) of the program against key blocks [0, n_blocks); blocks
    [0, full_blocks) need no mask. diag_m: the last key the program's first row sees (its row
    index start_m plus Nk - Nq), so that row r of the program sees keys j <= diag_m + r."""
    q_bar, k_ready, v_ready, kv_empty = bars
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    q_tile = q_smem.index(HALF)

    offs_m = diag_m + HALF * QROWS + gl.arange(0, QROWS, layout=row_s)   # each row's last visible key
    m_i = gl.full([QROWS], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.zeros([QROWS], gl.float32, layout=row_s)
    acc = gl.zeros([QROWS, HEAD_DIM], gl.float32, layout=o_layout)
    zero_s = gl.zeros([QROWS, BLOCK_N], gl.float32, layout=s_layout)
    mbarrier.wait(q_bar, 0)

    # S_0 and its softmax; then each step issues S_{j+1} with P_j V_j
    mbarrier.wait(k_ready.index(0), 0)
    s = warpgroup_mma(q_tile, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(0, deps=(s,))
    if CAUSAL and full_blocks == 0:
        p, m_i, l_i, alpha = _softmax_step(s, 0, m_i, l_i, qk_scale, offs_m, True, BLOCK_N, s_layout)
    else:
        p, m_i, l_i, alpha = _softmax_step(s, 0, m_i, l_i, qk_scale, offs_m, False, BLOCK_N, s_layout)
    # separate loops for the unmasked blocks and the diagonal one: no branch inside a loop body
    # (a branch with a wgmma in flight made the overlapped loop much slower)
    if CAUSAL:
        for j in range(0, full_blocks - 1):
            p, m_i, l_i, acc = _overlapped_step(j, q_tile, k_smem, v_smem, k_ready, v_ready, kv_empty, p, m_i, l_i,
                                                acc, zero_s, qk_scale, offs_m, BLOCK_N, STAGES, False,
                                                s_layout, p_layout, row_o)
        for j in range(gl.maximum(full_blocks - 1, 0), n_blocks - 1):
            p, m_i, l_i, acc = _overlapped_step(j, q_tile, k_smem, v_smem, k_ready, v_ready, kv_empty, p, m_i, l_i,
                                                acc, zero_s, qk_scale, offs_m, BLOCK_N, STAGES, True,
                                                s_layout, p_layout, row_o)
    else:
        for j in range(0, n_blocks - 1):
            p, m_i, l_i, acc = _overlapped_step(j, q_tile, k_smem, v_smem, k_ready, v_ready, kv_empty, p, m_i, l_i,
                                                acc, zero_s, qk_scale, offs_m, BLOCK_N, STAGES, False,
                                                s_layout, p_layout, row_o)
    last = (n_blocks - 1) % STAGES
    mbarrier.wait(v_ready.index(last), ((n_blocks - 1) // STAGES) & 1)
    acc = warpgroup_mma(gl.convert_layout(p.to(v_smem.dtype), p_layout), v_smem.index(last), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(acc,))
    mbarrier.arrive(kv_empty.index(last), count=1)

    # every row sees key 0 at least (no mask, or causal with Nq <= Nk), so l_i > 0
    inv = 1.0 / gl.convert_layout(l_i, row_o)
    out = (acc * inv[:, None]).to(o_desc.dtype)
    q_tile.store(out)                      # this partition's Q buffer is free now: the output leaves through it
    fence_async_shared()
    gl.thread_barrier()
    tma.async_copy_shared_to_global(o_desc, [q_row + HALF * QROWS, 0], q_tile)
    tma.store_wait(0)


@gluon.jit
def _attn_fwd(q_desc, k_desc, v_desc, o_desc, N_Q, N_K, H, GROUP, qk_scale,
              BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr,
              STAGES: gl.constexpr, LOADER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr):
    """grid (N_Q / BLOCK_M, B * H): q, o (B * H * N_Q, HEAD_DIM), k, v (B * (H / GROUP) * N_K, HEAD_DIM);
    with CAUSAL, N_Q <= N_K and N_K - N_Q a multiple of BLOCK_N."""
    dtype: gl.constexpr = q_desc.dtype
    QROWS: gl.constexpr = BLOCK_M // 2
    pid_m = gl.program_id(0)
    pid_bh = gl.program_id(1)
    if CAUSAL:
        pid_m = gl.num_programs(0) - 1 - pid_m            # heaviest query blocks of a head first
    bh_kv = (pid_bh // H) * (H // GROUP) + (pid_bh % H) // GROUP
    start_m = pid_m * BLOCK_M
    q_row = pid_bh * N_Q + start_m
    kv_row0 = bh_kv * N_K
    diag_m = start_m + (N_K - N_Q)                        # bottom-right: row start_m + r sees keys <= diag_m + r
    if CAUSAL:
        n_blocks = gl.cdiv(diag_m + BLOCK_M, BLOCK_N)
        full_blocks = (diag_m + 1) // BLOCK_N
    else:
        n_blocks = gl.cdiv(N_K, BLOCK_N)
        full_blocks = n_blocks

    q_smem = gl.allocate_shared_memory(dtype, [2, QROWS, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(kv_empty.index(i), count=2)         # both consumers release a slot
    bars = (q_bar, k_ready, v_ready, kv_empty)

    gl.warp_specialize([
        (_consumer, (o_desc, q_smem, k_smem, v_smem, bars, q_row, diag_m, n_blocks, full_blocks, qk_scale,
                     0, QROWS, BLOCK_N, HEAD_DIM, STAGES, CAUSAL)),
        (_consumer, (o_desc, q_smem, k_smem, v_smem, bars, q_row, diag_m, n_blocks, full_blocks, qk_scale,
                     1, QROWS, BLOCK_N, HEAD_DIM, STAGES, CAUSAL)),
        (_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, bars, q_row, kv_row0, n_blocks,
                   QROWS, BLOCK_N, STAGES)),
    ], [4, 1], [CONSUMER_REGS, LOADER_REGS])


# ---------------------------------------------------------------- launch

_GL_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}


@functools.lru_cache(maxsize=None)
def _smem_layout(dtype: torch.dtype, rows: int, head_dim: int):
    return gl.NVMMASharedLayout.get_default_for([rows, head_dim], _GL_DTYPES[dtype])


def _descriptor(t: torch.Tensor, rows: int) -> TensorDescriptor:
    """t (..., D) contiguous, D = t's last dim (one of HEAD_DIMS), as a (numel / D, D) matrix read
    in (rows, D) tiles."""
    head_dim = t.shape[-1]
    flat = t.view(-1, head_dim)
    return TensorDescriptor(flat, list(flat.shape), list(flat.stride()), [rows, head_dim],
                            _smem_layout(t.dtype, rows, head_dim))


def _constexprs(causal: bool, head_dim: int) -> dict:
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head dim {head_dim} is not one of the Gluon kernel's {HEAD_DIMS}")
    return dict(BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=head_dim, CAUSAL=causal, STAGES=STAGES,
                LOADER_REGS=LOADER_REGS, CONSUMER_REGS=CONSUMER_REGS)


def grid(q: torch.Tensor) -> tuple[int, int]:
    """(Nq / BLOCK_M, B * Hq): one program per 128 query rows of a head."""
    batch, heads_q, seqlen, _ = q.shape
    return (seqlen // BLOCK_M, batch * heads_q)


def _scalars(q: torch.Tensor, k: torch.Tensor, sm_scale: float) -> tuple:
    """The kernel's runtime arguments after the descriptors: N_Q, N_K, H, GROUP, qk_scale."""
    heads_q = q.shape[1]
    return (q.shape[2], k.shape[2], heads_q, heads_q // k.shape[1], float(sm_scale) * LOG2E)


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float,
            o: torch.Tensor):
    """o = attention(q, k, v, causal, sm_scale) for inputs `supports` accepts; o (B, Hq, Nq, D)
    contiguous and 16-byte aligned, in q's dtype. Launches through Gluon's JIT on the current CUDA
    device's stream and returns the compiled kernel that ran (for `replay_args`)."""
    if o.shape != q.shape or o.dtype != q.dtype or not _tma_ready(o):
        raise ValueError("o must be a contiguous, 16-byte aligned tensor of q's shape and dtype")
    return _attn_fwd[grid(q)](_descriptor(q, QROWS), _descriptor(k, BLOCK_N), _descriptor(v, BLOCK_N),
                              _descriptor(o, QROWS), *_scalars(q, k, sm_scale), **_constexprs(causal, q.shape[-1]),
                              num_warps=NUM_WARPS, maxnreg=MAXNREG)


# ---------------------------------------------------------------- repeat launches

class LaunchDescriptor:
    """A host tensor descriptor as Triton's launcher reads it (base, shape, strides, padding) for
    a contiguous (..., D) tensor, D its last dim. A repeat launch of the compiled kernel (kernels._plans.Launch)
    passes these: the block shapes and shared layouts are the compiled kernel's own (its
    tensordesc metadata), and TensorDescriptor's checks held on the first launch of the same
    layout, so only the base changes. Building four TensorDescriptors and binding them through
    Gluon's JIT cost 31-46 us of host time a call on an H200 host, more than the flush that
    event timing hides host work behind."""
    __slots__ = ("base", "shape", "strides", "padding")

    def __init__(self, t: torch.Tensor):
        self.base, self.padding = t, "zero"
        head_dim = t.shape[-1]
        self.shape, self.strides = [t.numel() // head_dim, head_dim], [head_dim, 1]


_CONSTEXPR_ORDER = tuple(_attn_fwd.arg_names[_attn_fwd.arg_names.index("qk_scale") + 1:])


def replay_args(q: torch.Tensor, k: torch.Tensor, causal: bool, sm_scale: float) -> tuple:
    """The arguments after the four descriptors of a direct launch of the compiled kernel, in
    signature order, constexprs included (Triton's launcher takes every parameter positionally)."""
    constexprs = _constexprs(causal, q.shape[-1])
    return (*_scalars(q, k, sm_scale), *(constexprs[name] for name in _CONSTEXPR_ORDER))


def launch_descriptors(q, k, v, o) -> tuple:
    """The four descriptor arguments of a direct launch, for tensors with the layout of the
    launch that compiled the kernel."""
    return LaunchDescriptor(q), LaunchDescriptor(k), LaunchDescriptor(v), LaunchDescriptor(o)


def compile_for_sm90(causal: bool, dtype: torch.dtype = torch.float16, head_dim: int = 128):
    """The kernel for head dim `head_dim` (one of HEAD_DIMS) compiled for sm_90 without a GPU
    (Triton's CompiledKernel: asm["ptx"], metadata.shared)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type

    rows = torch.empty(2 * BLOCK_M, head_dim, dtype=dtype)       # only the descriptors' types matter
    signature = {"q_desc": mangle_type(_descriptor(rows, QROWS)), "k_desc": mangle_type(_descriptor(rows, BLOCK_N)),
                 "v_desc": mangle_type(_descriptor(rows, BLOCK_N)), "o_desc": mangle_type(_descriptor(rows, QROWS)),
                 "N_Q": "i32", "N_K": "i32", "H": "i32", "GROUP": "i32", "qk_scale": "fp32"}
    constexprs = _constexprs(causal, head_dim)
    signature.update({name: "constexpr" for name in constexprs})
    return triton.compile(GluonASTSource(_attn_fwd, signature, constexprs), target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": NUM_WARPS, "maxnreg": MAXNREG})
