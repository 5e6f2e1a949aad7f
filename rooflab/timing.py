"""How one implementation is timed: samples, their median and its confidence interval.

Three methods, all with a cold L2: a Triton kernel of its own name (so its launches can be told
apart from the timed ones) reads a 256 MiB buffer before every timed call. It reads where
triton.testing.do_bench overwrites: an overwrite leaves the L2 full of dirty lines, and
the timed kernel's own traffic then writes them back to HBM inside its time. Measured on an H200
(probes/timing_flush.py, CUPTI kernel time), an overwrite flush against this read: a 256 MiB read
68.6 against 60.6 us, 16 MiB 7.1 against 5.3 (3.3 with the L2 warm, so the read does evict),
decode at B=1 Hkv=32 L=16384 74.5 against 64.9, cuDNN there 75.8 against 65.8; a 512 MiB read
flush timed the same as this one. The read also writes back the previous call's dirty lines
before the next call's time starts.

- `events`: one call bracketed by CUDA events right after the flush is queued, as
  triton.testing.do_bench times: the kernels' time, plus the wrapper's host work and launch
  wherever they outlast the flush still running on the GPU (about 60 us on an H200).
- `cupti`: the kernel alone. The same calls run back to back under torch.profiler (CUPTI);
  each sample is the device time of the kernels, memsets and copies one call issued, found
  between two flush kernels in the device timeline.
- `host`: the call's own cost on the host, the wrapper's checks and launch: the wall-clock time
  from entering the callable to its return, with the GPU kept busy by the flush queued before
  it (so the call never waits for the device; a call that synchronises shows it). Not a kernel
  time: no throughput is derived from it.

Samples from every trial are pooled: `median_ms` is their median, `ci_low_ms`/`ci_high_ms` a
95 % distribution-free confidence interval of it from order statistics (the binomial
argument: the interval between the j-th and k-th smallest of n samples covers the median with
probability P(j <= Binomial(n, 1/2) < k)).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

FLUSH_KERNEL = "_flush_l2"


@dataclass
class Timing:
    median_ms: float
    ci_low_ms: float
    ci_high_ms: float
    p20_ms: float
    p80_ms: float
    reps: int
    trials: int


@lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the sorted samples that bound a `confidence` interval of the median.

    The narrowest symmetric pair with coverage >= confidence; for n < 6 no pair reaches 95 %,
    and the full range (min, max) is returned.
    """
    if n < 1:
        raise ValueError("no samples")
    # cumulative Binomial(n, 1/2) probabilities, exactly for small n, by the normal law beyond
    if n <= 2000:
        total = 2 ** n
        cdf, acc = [], 0
        for k in range(n + 1):
            acc += math.comb(n, k)
            cdf.append(acc / total)
        for lo in range((n - 1) // 2, -1, -1):
            hi = n - 1 - lo
            coverage = cdf[hi] - cdf[lo]     # P(lo < B <= hi) = P(x_(lo) <= median <= x_(hi))
            if coverage >= confidence:
                return lo, hi
        return 0, n - 1
    z = 1.959963984540054 if confidence == 0.95 else _z(confidence)
    half = z * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)) - 1)
    return lo, min(n - 1, n - 1 - lo)


def _z(confidence: float) -> float:
    from statistics import NormalDist
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def _quantile(ordered: list[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of sorted values."""
    pos = q * (len(ordered) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(samples: list[float], trials: int = 1) -> Timing:
    """Median, its 95 % interval, p20 and p80 (ms) of pooled samples, their count and trials."""
    ordered = sorted(float(s) for s in samples)
    lo, hi = median_ci_ranks(len(ordered))
    return Timing(_quantile(ordered, 0.5), ordered[lo], ordered[hi], _quantile(ordered, 0.2),
                  _quantile(ordered, 0.8), len(ordered), trials)


def calls_per_trial(estimate_ms: float, budget_ms: float, min_calls: int, max_calls: int) -> int:
    """Timed calls for one trial: the budget over the estimated call time, within [min, max]."""
    wanted = math.ceil(budget_ms / max(estimate_ms, 1e-4))
    return int(min(max(wanted, min_calls), max_calls))


class CudaTimer:
    """Times zero-argument callables on the current CUDA device (see the module docstring)."""

    def __init__(self, flush_mib: int = 256):
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def _flush_l2(ptr, partial_ptr, n, BLOCK: tl.constexpr):
            # reads BLOCK words; one partial sum a program keeps the loads (4 bytes a program written)
            offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            tl.store(partial_ptr + tl.program_id(0), tl.sum(tl.load(ptr + offs, mask=offs < n, other=0), 0))

        self._kernel = _flush_l2
        self._buffer = torch.zeros(flush_mib * 2**20 // 4, dtype=torch.int32, device="cuda")
        self._block = 8192
        self._grid = (triton.cdiv(self._buffer.numel(), self._block),)
        self._partial = torch.empty(self._grid[0], dtype=torch.int32, device="cuda")
        self.flush()
        torch.cuda.synchronize()

    def flush(self) -> None:
        self._kernel[self._grid](self._buffer, self._partial, self._buffer.numel(), BLOCK=self._block, num_warps=8)

    def estimate(self, fn, budget_ms: float) -> float:
        """Run fn (flushed) until budget_ms has passed, at least twice; ms per call of the last half."""
        import time

        import torch
        times, start = [], time.perf_counter()
        while len(times) < 2 or (time.perf_counter() - start) * 1e3 < budget_ms:
            times.extend(self.events(fn, 1))
            if len(times) >= 1000:
                break
        tail = sorted(times[len(times) // 2:])
        torch.cuda.synchronize()
        return tail[len(tail) // 2]

    def events(self, fn, n: int) -> list[float]:
        """n samples (ms) of one plain call each, with a cold L2."""
        import torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for start, end in zip(starts, ends):
            self.flush()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def host(self, fn, n: int) -> list[float]:
        """n samples (ms): host wall-clock time of one call each, the flush queued before it."""
        import time

        import torch
        samples = []
        for _ in range(n):
            self.flush()
            start = time.perf_counter_ns()
            fn()
            samples.append((time.perf_counter_ns() - start) / 1e6)
        torch.cuda.synchronize()
        return samples

    def cupti(self, fn, n: int) -> list[float]:
        """n samples (ms): the device time of the work one call issues, from CUPTI."""
        return self.cupti_calls([fn] * n)

    def cupti_calls(self, calls: list) -> list[float]:
        """The device time (ms, CUPTI) of each call in `calls`, run in order in one profiler
        session with the L2 flushed before each."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for fn in calls:
                self.flush()
                fn()
            self.flush()                         # closes the last call's segment
            torch.cuda.synchronize()
        return device_segments(_device_events(prof), len(calls))

    def sample(self, fn, n: int, mode: str) -> list[float]:
        if mode == "events":
            return self.events(fn, n)
        if mode == "cupti":
            return self.cupti(fn, n)
        if mode == "host":
            return self.host(fn, n)
        raise ValueError(f"unknown timing mode {mode!r}")


def _device_events(prof) -> list[tuple[int, int, str]]:
    """(start_ns, duration_ns, name) of every device activity the profiler recorded."""
    from torch.autograd import DeviceType
    out = []
    for event in prof.profiler.kineto_results.events():
        if event.device_type() == DeviceType.CUDA:
            out.append((int(event.start_ns()), int(event.duration_ns()), str(event.name())))
    return out


def device_segments(events: list[tuple[int, int, str]], n: int) -> list[float]:
    """Split a device timeline at flush kernels; each of the n segments' summed duration in ms.

    `events` are (start_ns, duration_ns, name); there must be n + 1 flushes, call i's work lying
    between flush i and flush i + 1. A call that left no device activity is an error: a sample of
    zero would be no measurement at all.
    """
    events = sorted(events)
    flush_at = [i for i, (_, _, name) in enumerate(events) if FLUSH_KERNEL in name]
    if len(flush_at) != n + 1:
        raise RuntimeError(f"CUPTI recorded {len(flush_at)} flush kernels for {n} calls (expected {n + 1}); "
                           "the device timeline is incomplete")
    samples = []
    for a, b in zip(flush_at, flush_at[1:]):
        busy = sum(duration for _, duration, _ in events[a + 1:b])
        if busy <= 0:
            raise RuntimeError("a timed call issued no device work that CUPTI recorded")
        samples.append(busy / 1e6)
    return samples
