"""Probe: do TMA loads (Triton tensor descriptors) stream the KV cache faster than pointer loads in
unsplit decode?

On some H200s cuDNN's decode (SDPA's cuDNN backend, one query token) reads the KV cache at ~99% of
the measured read ceiling at large shapes, while kernels.flash_decoding's split-KV kernel, whose K
and V tiles are pointer loads (tl.load, cp.async rings from Triton's software pipeliner), reads
~96.5%. This probe times a minimal unsplit decode kernel written here in two forms that differ in
the tile loads alone:
  ptr<N>x<W>x<S>  one program per (batch, KV head); the G = Hq / Hkv query heads of the group are
                  the M rows of tl.dot (padded to 16, masked); online softmax in exp2 (logits scaled
                  by sm_scale * log2(e)); BLOCK_N-token tiles of K and V loaded through pointers
                  (N = BLOCK_N, W = warps, S = the launch's num_stages); out (B, Hq, D) fp16
  tma<N>x<W>x<S>  the same kernel, K and V tiles loaded through host-side tensor descriptors
                  (TensorDescriptor.from_tensor over the cache viewed as (B * Hkv * L, D), block
                  [BLOCK_N, D], desc.load([row, 0]))
  dev<N>x<W>x<S>  the same with device-side descriptors (tl.make_tensor_descriptor over the same
                  (B * Hkv * L, D) view; global scratch from triton.set_allocator), at two configs:
                  the answer if host-side descriptors fail on the machine
beside `ours` (the study's decode_attention as shipped, (S) its split count), `cudnn` (the study's
SDPA cuDNN) and rooflab.ceilings' read kernel over the same bytes (read2048, read4096). Equal
lengths only (cache_len a multiple of BLOCK_N). Shapes (B, Hkv, L), Hq = 32, D = 128, fp16: the
512-program launches B=64 Hkv=8 and B=16 Hkv=32 at L=32768 and 4096, and the 128-program launches
B=16 Hkv=8 and B=4 Hkv=32 at L=16384, the long shapes first. Configs whose shared memory exceeds an
SM are error rows, not crashes.

Compiled for sm_90 without a GPU (DIAG=resources, triton 3.6, D=128 fp16; `group` is not specialised,
so G = 1 and G = 4 share one kernel a config): registers a thread / shared memory bytes a program, no
spills anywhere; ptr's SASS streams by LDGSTS (cp.async), tma's and dev's by UTMALDG with mbarrier
waits; num_stages S holds S - 1 K+V tiles (32 KB at BLOCK_N 64, 64 KB at 128) plus ~6 KB:
  config     ptr            tma            dev            programs an SM (registers, shared memory)
  64x4x2     73 / 38912     72 / 38936     -              6-7, 5
  64x4x3     72 / 71680     74 / 71712     77 / 71712     6-7, 3
  64x4x4     72 / 104448    74 / 104504    -              6-7, 2
  64x4x6     72 / 169984    74 / 170072    -              6-7, 1
  128x4x2    88 / 73728     84 / 73752     85 / 73752     5, 3
  128x8x3    61 / 139264    64 / 139296    -              4, 1
  64x8x4     60 / 104448    57 / 104504    -              4, 2
Measured at e134e14 (H200 GPU-7160a124, read ceiling class of GPU-1d1c5097, where the committed run
at 3f8592a lost 2-3% to cuDNN at the 512-program launches; us, kernel time, x over ours):
  B=64 Hkv=8 L=32768: ours 1936.6, cuDNN 1885.5 (0.974), ptr128x8x3 1881.3 (0.971), tma128x8x3
  1881.4 (0.972), ptr64x4x2 1939.5, tma64x4x2 1934.7, the read of the same bytes 1861.4-1871.2;
  B=16 Hkv=32 L=32768: ours 1937.8, cuDNN 1889.0, ptr128x8x3 1882.6, tma128x8x3 1876.5;
  B=64 Hkv=8 L=4096: ours 245.4, cuDNN 241.7, ptr128x8x3 240.2, tma128x8x3 241.3;
  B=16 Hkv=32 L=4096: ours 246.1, cuDNN 239.8, ptr128x8x3 240.2, tma128x8x3 240.1;
  128 programs (B=16 Hkv=8 and B=4 Hkv=32, L=16384): ours 243.5 and 245.3, cuDNN 242.7 and 241.9,
  the best of each kind 244.4-245.3.
The best TMA config over the best pointer config: geometric mean 0.999 (0.996-1.004) over the six
shapes; at equal tiling the two load paths stream alike, except shallow rings at one program an SM
(64x4x2 at 128 programs: ptr 1.74x ours, tma 1.53x). Device-side descriptors ran 1.03-1.18x ours.
What closes the gap to cuDNN at the 512-program launches is the tiling, fewer and deeper programs
(128-token tiles on 8 warps), not TMA: kernels.flash_decoding's DEEP_FILLED_CONFIG
(probes/decode_fullgrid_ring.py DIAG=onesm). Not kept.

Run from the repository root:  PYTHONUNBUFFERED=1 python3 probes/decode_tma.py
Writes $OUT/decode_tma.csv (decode_balance's helpers: every variant checked against the float64
reference before it is timed, a mismatch or error is a row, CUPTI kernel time with the L2 flushed;
PROBE_BUDGET_S, default 120 here: no new shape starts after it) and $OUT/decode_tma_kernels.csv
(registers, spills and shared memory of the probe's compiled kernels), and prints a table last: us
per variant and its ratio over `ours` per shape, then the best ptr and best tma config per shape.
PROBE_DRYRUN=1 runs it in Triton's CPU interpreter on tiny shapes (every variant, descriptors
included). `DIAG=resources python3 probes/decode_tma.py` needs no GPU: every variant and config
compiled for sm_90 (probes/sm90.py, descriptors typed tensordesc<fp16[BLOCK_N, 128]> as the JIT
types them), its registers, spills and shared memory printed (the table above).
"""
from __future__ import annotations

import math
import os
import statistics
import sys
from unittest import mock

os.environ.setdefault("PROBE_BUDGET_S", "120")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_balance as db  # noqa: E402  (sets up the interpreter for PROBE_DRYRUN=1)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from probe_csv import write_csv  # noqa: E402

fd, study = db.fd, db.study
SHAPES = [(64, 8, 32768, False), (16, 32, 32768, False), (16, 8, 16384, False), (4, 32, 16384, False),
          (64, 8, 4096, False), (16, 32, 4096, False)]
CONFIGS = [(64, 4, 2), (64, 4, 3), (64, 4, 4), (64, 4, 6), (128, 4, 2), (128, 8, 3),
           (64, 8, 4)]   # (BLOCK_N, warps, stages)
DEV_CONFIGS = [(64, 4, 3), (128, 4, 2)]          # device-side descriptors: a fallback, two configs
if db.DRY:
    SHAPES = [(2, 2, 64, False), (1, 8, 96, False)]        # Hq=8 D=32 there: G = 4 and G = 1
    CONFIGS, DEV_CONFIGS = [(16, 2, 2), (32, 4, 3)], [(16, 2, 2)]
KINDS = {"ptr": 0, "tma": 1, "dev": 2}          # DESC: pointer loads, host-side, device-side descriptors
KERNELS: dict = {}                              # name -> the compiled kernel of its first launch


@triton.jit
def _tile(src, row, offs, HEAD_DIM: tl.constexpr, DESC: tl.constexpr):
    """Rows row..row+BLOCK_N of the (B * Hkv * L, HEAD_DIM) cache: pointer loads (DESC 0, offs the
    tile's (BLOCK_N, HEAD_DIM) element offsets) or a tensor descriptor's load (DESC 1, 2)."""
    if DESC == 0:
        tile = tl.load(src + row.to(tl.int64) * HEAD_DIM + offs)
    else:
        tile = src.load([row, 0])
    return tile


@triton.jit(do_not_specialize=["group"])
def _decode_probe(Q, K, V, Out, group, cache_len, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_G: tl.constexpr,
                  BLOCK_N: tl.constexpr, DESC: tl.constexpr):
    # Q, Out (B, Hq, D) and K, V (B, Hkv, L, D) contiguous, Hq = Hkv * group; L a multiple of BLOCK_N.
    # DESC 0: K, V pointers; 1: host-side descriptors over (B * Hkv * L, D), block [BLOCK_N, D];
    # 2: K, V pointers, device-side descriptors built here over the same view.
    bh = tl.program_id(0)                                  # b * Hkv + h: one program a (batch, KV head)
    offs_g = tl.arange(0, BLOCK_G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = (bh * group + offs_g).to(tl.int64)              # the group's query rows of (B * Hq, D)
    mask = (offs_g < group)[:, None]
    q = tl.load(Q + rows[:, None] * HEAD_DIM + offs_d[None, :], mask=mask, other=0.0)   # (BLOCK_G, D)
    if DESC == 2:
        n_rows = tl.num_programs(0) * cache_len
        k_src = tl.make_tensor_descriptor(K, [n_rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
        v_src = tl.make_tensor_descriptor(V, [n_rows, HEAD_DIM], [HEAD_DIM, 1], [BLOCK_N, HEAD_DIM])
    else:
        k_src = K
        v_src = V
    offs = offs_n[:, None] * HEAD_DIM + offs_d[None, :]    # (BLOCK_N, D), pointer loads only
    row0 = bh * cache_len                                  # this (b, h)'s first row of (B * Hkv * L, D)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)    # running max of the logits (log2 units)
    l_i = tl.zeros([BLOCK_G], tl.float32)                  # running sum of exp2(logit - m_i)
    acc = tl.zeros([BLOCK_G, HEAD_DIM], tl.float32)
    for n0 in range(0, cache_len, BLOCK_N):                # the launch's num_stages pipelines the loads
        k = _tile(k_src, row0 + n0, offs, HEAD_DIM, DESC)                  # (BLOCK_N, D)
        s = tl.dot(q, tl.trans(k)) * qk_scale                             # (BLOCK_G, BLOCK_N)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _tile(v_src, row0 + n0, offs, HEAD_DIM, DESC)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)             # (BLOCK_G, D)
        m_i = m_new
    tl.store(Out + rows[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(Out.dtype.element_ty),
             mask=mask)


def _scratch(size: int, alignment: int, stream):
    """Global scratch for device-side descriptors (triton.set_allocator)."""
    return torch.empty(size, dtype=torch.int8, device=db.DEVICE)


def launch_args(q, k, v, out, kind: str, block_n: int):
    """(grid, positional arguments, constexprs) of _decode_probe for q (B, Hq, D), k, v (B, Hkv, L, D)."""
    batch, heads_kv, cache_len, head_dim = k.shape
    group = q.shape[1] // heads_kv
    assert cache_len % block_n == 0, f"cache_len {cache_len} is not a multiple of BLOCK_N {block_n}"
    assert q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
    if kind == "tma":
        flat = (batch * heads_kv * cache_len, head_dim)
        k_src = TensorDescriptor.from_tensor(k.view(flat), [block_n, head_dim])
        v_src = TensorDescriptor.from_tensor(v.view(flat), [block_n, head_dim])
    else:
        k_src, v_src = k, v
    qk_scale = 1.0 / math.sqrt(head_dim) * math.log2(math.e)
    consts = dict(HEAD_DIM=head_dim, BLOCK_G=max(16, triton.next_power_of_2(group)), BLOCK_N=block_n,
                  DESC=KINDS[kind])
    return (batch * heads_kv,), (q, k_src, v_src, out, group, cache_len, qk_scale), consts


def variant(q, k, v, kind: str, cfg: tuple, name: str):
    """A factory: the probe kernel's call for `kind` at cfg = (BLOCK_N, warps, stages); its first launch's
    compiled kernel is kept in KERNELS[name]."""
    def make():
        block_n, warps, stages = cfg
        out = torch.empty_like(q)
        grid, args, consts = launch_args(q, k, v, out, kind, block_n)
        if kind == "dev":
            triton.set_allocator(_scratch)

        def call():
            compiled = _decode_probe[grid](*args, **consts, num_warps=warps, num_stages=stages)
            KERNELS.setdefault(name, compiled)
            return out
        return call
    return make


def name_of(kind: str, cfg: tuple) -> str:
    return f"{kind}{cfg[0]}x{cfg[1]}x{cfg[2]}"


def variant_names() -> list[str]:
    return ([name_of("ptr", c) for c in CONFIGS] + [name_of("tma", c) for c in CONFIGS]
            + [name_of("dev", c) for c in DEV_CONFIGS])


def candidates(inputs, num_sms):
    q, k, v = inputs["q"], inputs["k_cache"], inputs["v_cache"]
    impls = study.impls()
    cands = {"ours": lambda: impls["ours"](inputs), "cudnn": lambda: impls["sdpa_cudnn"](inputs)}
    splits = {"ours": fd.planned_splits(k.shape[0], k.shape[1], k.shape[2], db.D, 2, num_sms,
                                        db.HQ // k.shape[1]), "cudnn": "", "read2048": "", "read4096": ""}
    for kind, configs in (("ptr", CONFIGS), ("tma", CONFIGS), ("dev", DEV_CONFIGS)):
        for cfg in configs:
            name = name_of(kind, cfg)
            cands[name], splits[name] = variant(q, k, v, kind, cfg, name), 1
    return cands, splits


def kernel_rows(path: str) -> None:
    """Registers, spills and shared memory of the probe kernels the sweep compiled."""
    rows = []
    for name, compiled in KERNELS.items():
        if compiled is None or not hasattr(compiled, "metadata"):      # the interpreter returns none
            continue
        rows.append({"impl": name, "regs": getattr(compiled, "n_regs", ""), "spills": getattr(compiled, "n_spills", ""),
                     "shared": compiled.metadata.shared})
    if rows:
        write_csv(path, rows)


def print_table(table: list, names: list[str]) -> None:
    """Variants as rows, shapes as columns: us and the ratio over ours; then the best ptr, tma and dev config
    per shape and their ratios."""
    heads = [f"{b}x{h}x{n}" for (b, h, n, _), _, _ in table]
    print(f"\nus, CUPTI kernel time, fp16, Hq={db.HQ}, D={db.D}; shapes BxHkvxL, equal lengths; x: over ours "
          "(ours(S): its split count); rd: the read's time over the variant's")
    print(f"{'variant':>12} | " + " ".join(f"{x:>16}" for x in heads))
    for name in names:
        cells = []
        for _, res, sp in table:
            us, base = res.get(name), res.get("ours")
            if not us:
                cells.append("-")
                continue
            label = f"({sp.get(name)})" if name == "ours" else ""
            cells.append(f"{us:.1f}{label}" + (f" x{us / base:.3f}" if base and name != "ours" else ""))
        print(f"{name:>12} | " + " ".join(f"{c:>16}" for c in cells))
    print("best per kind (us, x over ours, rd = read us / us):")
    for (b, h, n, _), res, _ in table:
        reads = [res[x] for x in ("read2048", "read4096") if res.get(x)]
        parts = []
        for kind in ("ptr", "tma", "dev", "ours", "cudnn"):
            got = {x: us for x, us in res.items() if us and (x.startswith(kind) if kind in KINDS else x == kind)}
            if not got:
                continue
            best = min(got, key=got.get)
            us = got[best]
            parts.append(f"{best} {us:.1f}" + (f" x{us / res['ours']:.3f}" if res.get("ours") else "")
                         + (f" rd {min(reads) / us:.3f}" if reads else ""))
        print(f"  {b}x{h}x{n}: " + "; ".join(parts))
    pairs = []
    for _, res, _ in table:
        ptr = [us for x, us in res.items() if x.startswith("ptr") and us]
        tma = [us for x, us in res.items() if x.startswith("tma") and us]
        if ptr and tma:
            pairs.append(min(tma) / min(ptr))
    if pairs:
        print(f"best tma / best ptr: geo-mean {math.exp(sum(map(math.log, pairs)) / len(pairs)):.3f}, "
              f"min {min(pairs):.3f}, max {max(pairs):.3f} over {len(pairs)} shapes")


def resources() -> None:
    """Every variant and config compiled for sm_90 without a GPU: registers, spills, shared memory."""
    import sm90
    from triton.runtime.jit import mangle_type

    batch, heads_kv, cache_len = 16, 8, 4096
    q = torch.empty(batch, db.HQ, db.D, dtype=torch.float16)
    k = torch.empty(batch, heads_kv, cache_len, db.D, dtype=torch.float16)
    compile_ = triton.compile
    print(f"sm_90, Hq={db.HQ} D={db.D} fp16, G={db.HQ // heads_kv}; regs a thread, spill loads/stores, "
          "shared bytes, programs an SM by registers and by shared memory (228 KB)")
    for kind, configs in (("ptr", CONFIGS), ("tma", CONFIGS), ("dev", DEV_CONFIGS)):
        for cfg in configs:
            block_n, warps, stages = cfg
            grid, args, consts = launch_args(q, k, k, q, kind, block_n)
            full = (*args, *consts.values())
            # sm90 types arguments it does not know as fp32: descriptors get the JIT's tensordesc<...> type.
            descs = {p.name: mangle_type(a) for p, a in zip(_decode_probe.params, full) if isinstance(a, TensorDescriptor)}

            def typed(src, target=None, options=None, descs=descs):
                src.signature.update(descs)
                return compile_(src, target=target, options=options)

            try:
                with mock.patch.object(sm90.triton, "compile", typed):
                    kernel = sm90.compile_for_sm90(_decode_probe, full, dict(num_warps=warps, num_stages=stages))
                u = sm90.usage(kernel)
            except Exception as exc:
                print(f"{name_of(kind, cfg):>12}: {type(exc).__name__}: {str(exc)[:200]}")
                continue
            by_smem = 233472 // max(u["shared"] + 1024, 1)        # 1 KB a program reserved by the driver
            print(f"{name_of(kind, cfg):>12}: regs {u['regs']:>3} spills {u['ldl']}/{u['stl']} shared {u['shared']:>6} "
                  f"programs/SM regs {sm90.programs_per_sm(u['regs'], warps)} smem {by_smem}")


def main():
    table, path = db.sweep_to_csv(SHAPES, "tma", candidates, "decode_tma", with_read=True)
    kernel_rows(os.path.join(db.OUT, "decode_tma_kernels.csv"))
    names = ["ours", "cudnn", *variant_names(), "read2048", "read4096"]
    print_table(table, names)
    xs = [res[n] / res["ours"] for _, res, _ in table for n in variant_names() if res.get(n) and res.get("ours")]
    if xs:
        print(f"probe variants over ours: median {statistics.median(xs):.3f}, min {min(xs):.3f}")
    db.print_bad(path)


if __name__ == "__main__":
    if db.DIAG == "resources":
        resources()
        sys.exit(0)
    if not (db.DRY or torch.cuda.is_available()):
        sys.exit("decode_tma needs a CUDA GPU")
    main()
