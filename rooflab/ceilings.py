"""The GPU's own ceilings, measured: what no kernel of a study should beat.

- read_tbps: a tuned read-only Triton kernel (each program sums a stretch of a buffer many times
  the L2 into one partial per program), the best of several block sizes, warp counts and grid
  shapes, and of torch.sum; bytes = the buffer read once.
- read_tbps_<n>mib: the same read over the first n MiB of the buffer, for each size of
  `read_sizes_mib` below the buffer's (and the whole buffer under its own size): a kernel that
  moves a few hundred MB has a ramp and a tail the 2 GiB read hides, so a study can set a row
  beside a read of its own size, timed as such rows are (kernel time from CUPTI, L2 flushed by a
  read: rooflab.timing). On an H200 (probes/timing_flush.py; one program a 4096-element block):
  3.14 TB/s at 16 MiB, 4.16 at 64, 4.40 at 128, 4.43 at 256, 4.56 at 512 MiB. An overwrite flush
  (triton.testing.do_bench's) leaves dirty lines whose write-back the read pays: 2.36, 3.06, 3.48,
  3.91 and 4.26 TB/s at the same sizes.
- copy_tbps / write_tbps: tuned Triton copy and fill kernels against torch's copy_ / fill_,
  the best of each; bytes = read + written (copy), written (fill).
- copy_tbps_<n>mib: the copy moving n MiB (the first n / 2 MiB of the buffer read, as many
  written), for each size of `copy_sizes_mib` up to the two buffers'. A kernel's time ends before
  the L2 has written its last stores back to HBM (up to the L2's size of them), so a copy of a few
  hundred MB reads as faster than the 2 GiB one (H200, probes/timing_flush.py: torch's copy_ of
  64 MiB, 128 MiB moved, 4.40 TB/s; of 256 MiB 4.34; the 2 GiB copy 4.30); a study sets such a row
  beside a copy of its own size.
- matmul_{fp16,bf16}_tflops: cuBLAS through torch, the best of n x n x n products at n = matmul_n
  and matmul_n / 2, on standard-normal and on uniform [0, 1) operands (never zeros). Operands
  whose bits toggle less draw less power and run at higher clocks, and attention multiplies
  probabilities in [0, 1]: on an H200 (fp16, do_bench medians) 8192^3 ran at 673 TFLOP/s on
  normal and 699 on uniform operands, 4096^3 at 688 and 729, while cuDNN's attention forward
  reached 672 TFLOP/s in a sweep (B=4 H=32 N=8192 D=128), above the normal-operand 8192^3 alone.
- launch_us: an empty Triton kernel launched back to back from Python (host launch rate);
  launch_graph_us: the same empty kernel as nodes of one CUDA graph, per node on replay.

The bandwidth ceilings' candidates are ranked on the timing of the studies' kernel rows: CUPTI
kernel time with the L2 flushed by a read (rooflab.timing), every candidate's calls in shuffled
rounds in one profiler session (`_fastest`); the winner is then timed again, and its value is the
fastest of RETIME_BURSTS bursts' medians of fresh samples (`_kernel_ms`), so the ranking's luck is
not in the value, and a burst of the copies' slower mode is not either. Ranked by do_bench
medians instead (the d789a27 run), the sized copies picked candidates that CUPTI then timed at
4.06-4.33 TB/s, below the softmax kernels moving 67-134 MB (20 above_ceiling flags), while at
those shapes, CUPTI-ranked, the best copy ran 4.35-4.47 TB/s and the softmax kernels (ours, Liger)
4.16-4.38 (H200, probes/copy_ceiling.py). The matmul rates are do_bench medians. `how` names
what won.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _read_kernel(x_ptr, partial_ptr, n, iters, BLOCK: tl.constexpr):
    # program p sums blocks p, p + P, p + 2P, ... (iters of them) into one fp32 partial
    pid = tl.program_id(0)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for _ in range(iters):
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        offs += step
    tl.store(partial_ptr + pid, tl.sum(acc, 0))


@triton.jit
def _copy_kernel(dst_ptr, src_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _fill_kernel(dst_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.full([BLOCK], value, tl.float32), mask=offs < n)


@triton.jit
def _empty_kernel(x_ptr):
    pass


def _median_ms(fn, warmup_ms: float = 25, rep_ms: float = 100) -> float:
    import triton.testing
    return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))


RANK_ROUNDS, RANK_CALLS = 3, 5   # bandwidth candidates: shuffled rounds of this many calls each
RETIME_BURSTS, RETIME_CALLS = 3, 15   # a winner's value: the fastest of this many bursts' medians (_kernel_ms)
TIMED = f"kernel time (CUPTI), best of {RETIME_BURSTS} bursts of {RETIME_CALLS}"   # how the value was timed


def _fastest(candidates: dict) -> str:
    """Name of the candidate {name: callable} with the lowest median kernel time (CUPTI, L2 flushed
    by a read), its calls in RANK_ROUNDS shuffled rounds of RANK_CALLS in one profiler session."""
    import random
    import statistics
    for fn in candidates.values():                   # compile and warm up outside the ranking
        fn()
    order = []
    for _ in range(RANK_ROUNDS):
        names = list(candidates)
        random.shuffle(names)
        order += [name for name in names for _ in range(RANK_CALLS)]
    times = {name: [] for name in candidates}
    for name, ms in zip(order, _timer().cupti_calls([candidates[name] for name in order])):
        times[name].append(ms)
    return min(times, key=lambda name: statistics.median(times[name]))


def _best(candidates: dict, work: float) -> tuple[float, str]:
    """(rate, name) of the fastest of {name: callable} doing `work` each call: bytes moved give
    TB/s, FLOPs TFLOP/s."""
    results = {name: work / _median_ms(fn) / 1e9 for name, fn in candidates.items()}
    name = max(results, key=results.get)
    return results[name], name


def read_candidates(src: torch.Tensor) -> dict:
    n, sms = src.numel(), torch.cuda.get_device_properties(src.device).multi_processor_count
    out = {"torch.sum": lambda: torch.sum(src)}
    for block in (2048, 4096, 8192):
        for warps in (4, 8):
            for per_sm in (4, 8, 16, 0):        # 0: one program per block (no loop)
                programs = sms * per_sm if per_sm else triton.cdiv(n, block)
                iters = triton.cdiv(n, programs * block)
                partial = torch.empty(programs, device=src.device, dtype=torch.float32)
                out[f"triton read BLOCK={block} warps={warps} programs={programs}"] = (
                    lambda p=partial, b=block, w=warps, g=programs, i=iters:
                    _read_kernel[(g,)](src, p, n, i, BLOCK=b, num_warps=w))
    return out


def copy_candidates(dst: torch.Tensor, src: torch.Tensor) -> dict:
    n = src.numel()
    out = {"torch copy_": lambda: dst.copy_(src)}
    for block in (1024, 2048, 4096, 8192):
        for warps in (4, 8):
            out[f"triton copy BLOCK={block} warps={warps}"] = (
                lambda b=block, w=warps: _copy_kernel[(triton.cdiv(n, b),)](dst, src, n, BLOCK=b, num_warps=w))
    return out


def fill_candidates(dst: torch.Tensor) -> dict:
    n = dst.numel()
    out = {"torch fill_": lambda: dst.fill_(1.0)}
    for block in (1024, 2048, 4096, 8192):
        for warps in (4, 8):
            out[f"triton fill BLOCK={block} warps={warps}"] = (
                lambda b=block, w=warps: _fill_kernel[(triton.cdiv(n, b),)](dst, n, 1.0, BLOCK=b, num_warps=w))
    return out


MATMUL_OPERANDS = {"normal": torch.randn, "uniform [0, 1)": torch.rand}


def matmul_best(dtype: torch.dtype, matmul_n: int, device: str = "cuda") -> tuple[float, str]:
    """(TFLOP/s, how) of the fastest torch.matmul of n x n x n, n in (matmul_n // 2, matmul_n), over
    the operand distributions of MATMUL_OPERANDS."""
    best = (0.0, "")
    for n in sorted({max(16, matmul_n // 2), matmul_n}):
        operands = {f"torch.matmul {n}^3, {name} operands": (draw(n, n, device=device, dtype=dtype),
                                                              draw(n, n, device=device, dtype=dtype))
                    for name, draw in MATMUL_OPERANDS.items()}
        best = max(best, _best({how: (lambda a=a, b=b: a @ b) for how, (a, b) in operands.items()}, 2.0 * n ** 3))
        del operands
    return best


def launch_floor_us(launches: int = 2000) -> tuple[float, float]:
    """Per launch of an empty Triton kernel: back to back from Python, then as CUDA-graph nodes."""
    import time
    x = torch.empty(1, device="cuda")
    for _ in range(100):
        _empty_kernel[(1,)](x)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(launches):
        _empty_kernel[(1,)](x)
    torch.cuda.synchronize()
    plain = (time.perf_counter() - start) * 1e6 / launches
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        for _ in range(launches):
            _empty_kernel[(1,)](x)
    graph.replay()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    replays = []
    for _ in range(5):
        begin.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        replays.append(begin.elapsed_time(end) * 1e3 / launches)
    return plain, sorted(replays)[len(replays) // 2]


def sized_reads(src: torch.Tensor, full_how: str, full_read, sizes_mib,
                kernel_ms=None) -> list[tuple[str, float, str, str]]:
    """read_tbps_<n>mib rows: the read over the first n MiB of src for each n of sizes_mib below
    src's size, and over src whole. Each size's fastest candidate (`_fastest`, as for read_tbps; the
    whole buffer's is read_tbps's own, full_read named full_how) is timed again on kernel time
    (CUPTI, L2 flushed: `kernel_ms`), the timing the studies judge kernels of a few hundred MB on."""
    if kernel_ms is None:
        kernel_ms = _kernel_ms()
    nbytes = src.numel() * src.element_size()
    chosen = []   # (MiB, bytes, how, read)
    for mib in sorted({int(m) for m in sizes_mib if int(m) * 2**20 < nbytes}):
        candidates = read_candidates(src[: mib * 2**20 // src.element_size()])
        how = _fastest(candidates)
        chosen.append((mib, mib * 2**20, f"{how}, first {mib} MiB", candidates[how]))
    chosen.append((nbytes // 2**20, nbytes, f"{full_how}, whole buffer", full_read))
    return [(f"read_tbps_{mib}mib", moved / kernel_ms(read) / 1e9, "TB/s", f"{how}, {TIMED}")
            for mib, moved, how, read in chosen]


def sized_copies(dst: torch.Tensor, src: torch.Tensor, sizes_mib, kernel_ms=None) -> list[tuple[str, float, str, str]]:
    """copy_tbps_<n>mib rows: the copy of the first n / 2 MiB of src into dst for each n of sizes_mib
    that the buffers hold (n MiB moved, read + written), the fastest of copy_candidates (`_fastest`)
    timed again on kernel time (CUPTI, L2 flushed: `kernel_ms`), as sized_reads does."""
    if kernel_ms is None:
        kernel_ms = _kernel_ms()
    rows = []
    for mib in sorted({int(m) for m in sizes_mib if int(m) * 2**19 <= src.numel() * src.element_size()}):
        n = mib * 2**19 // src.element_size()
        candidates = copy_candidates(dst[:n], src[:n])
        how = _fastest(candidates)
        rows.append((f"copy_tbps_{mib}mib", mib * 2**20 / kernel_ms(candidates[how]) / 1e9, "TB/s",
                     f"{how}, {mib // 2} MiB read and written, {TIMED}"))
    return rows


@functools.lru_cache(maxsize=1)
def _timer():
    """The process's rooflab.timing.CudaTimer (its 256 MiB flush buffer made once)."""
    from rooflab.timing import CudaTimer
    return CudaTimer()


def _kernel_ms(samples: int = RETIME_CALLS, bursts: int = RETIME_BURSTS):
    """fn -> kernel time (ms, CUPTI, the L2 flushed before each call) of fn: the lowest of `bursts`
    bursts' medians of `samples` calls each. A copy's bursts are bimodal on an H200: the calibrate
    job's copy of 128 MiB moved took 4.41-4.42 TB/s in 7 of 10 bursts of 15 and 4.18-4.25 in the
    rest, and torch's copy_ alike, while softmax at the same bytes (ours, Liger) ran 4.12-4.31 in
    every burst (probes/ceiling_bursts.py); one burst's median put that copy at 4.46 TB/s in one run
    and 4.21 in the next. A ceiling is what the GPU can do, so it takes the best burst: three
    processes in a row then put it at 4.486-4.491 TB/s (probes/ceilings_rank.py)."""
    import statistics
    timer = _timer()

    def kernel_ms(fn) -> float:
        fn()
        return min(statistics.median(timer.cupti(fn, samples)) for _ in range(bursts))
    return kernel_ms


def measure(buffer_gib: float = 2.0, matmul_n: int = 8192,
            read_sizes_mib=(), copy_sizes_mib=()) -> list[tuple[str, float, str, str]]:
    """(name, value, unit, how) rows for ceilings.csv, measured on CUDA device 0."""
    # The launch rate first: after the CUPTI sessions below, CUPTI stays attached to the process
    # and slows every launch (rooflab.bench's module docstring).
    plain, graphed = launch_floor_us()
    n = int(buffer_gib * 2**30) // 4
    src = torch.rand(n, device="cuda")   # fp32, buffer_gib GiB: many times any L2
    dst = torch.empty_like(src)
    nbytes = src.numel() * src.element_size()
    rows, winners = [], {}
    kernel_ms = _kernel_ms()
    reads = read_candidates(src)
    for name, candidates, moved in (("read_tbps", reads, nbytes),
                                    ("copy_tbps", copy_candidates(dst, src), 2 * nbytes),
                                    ("write_tbps", fill_candidates(dst), nbytes)):
        winners[name] = how = _fastest(candidates)
        value = moved / kernel_ms(candidates[how]) / 1e9
        rows.append((name, value, "TB/s", f"{how}, {TIMED}"))
        print(f"{name}: {value:.3f} TB/s ({how})", flush=True)
    rows += sized_reads(src, winners["read_tbps"], reads[winners["read_tbps"]], read_sizes_mib, kernel_ms)
    rows += sized_copies(dst, src, copy_sizes_mib, kernel_ms)
    del src, dst
    torch.cuda.empty_cache()
    for dtype, label in ((torch.float16, "fp16"), (torch.bfloat16, "bf16")):
        value, how = matmul_best(dtype, matmul_n)
        rows.append((f"matmul_{label}_tflops", value, "TFLOP/s", how))
        print(f"matmul_{label}_tflops: {value:.1f} TFLOP/s ({how})", flush=True)
    rows += [("launch_us", plain, "us", "empty Triton kernel, back-to-back Python launches"),
             ("launch_graph_us", graphed, "us", "empty Triton kernel as CUDA-graph nodes, per node")]
    return rows


def write_csv(path, rows) -> None:
    """(name, value, unit, how) rows -> ceilings.csv, printing each."""
    import csv
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "value", "unit", "how"])
        for name, value, unit, how in rows:
            writer.writerow([name, f"{value:.6g}", unit, how])
            print(f"{name:28} {value:10.4g} {unit:8} {how}")


def measure_csv(path, buffer_gib: float, matmul_n: int, read_sizes_mib=(), copy_sizes_mib=()) -> None:
    """Measure this process's CUDA device 0 and write its ceilings.csv (datasheet values included)."""
    from rooflab.gpus import datasheet_rows
    write_csv(path, measure(buffer_gib, matmul_n, read_sizes_mib, copy_sizes_mib)
              + datasheet_rows(torch.cuda.get_device_name(0)))
