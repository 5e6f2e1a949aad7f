"""End-to-end study: one GPT-style decoder block with random weights, timed by part.

The block is pre-norm: x + Attn(RMSNorm(x)), then x + MLP(RMSNorm(x)), attention with
grouped KV heads, a GELU MLP of `mlp_ratio * width`. Four configurations (the `impl` column):

  eager           attention with materialised scores and torch.softmax (seed 000's setting)
  ours_softmax    the same block with kernels.softmax in place of torch.softmax
  sdpa            torch.nn.functional.scaled_dot_product_attention, backend chosen by PyTorch
  ours_attention  kernels.attention in prefill, kernels.decode_attention in decode

Each part (norms, projections, attention, softmax, mlp, other = residual adds and what falls
between parts) is bracketed by CUDA events on the stream, so the parts partition the block's
GPU time without synchronising inside it; `total` runs from the first event to the last
(timing `events`). Where the host launches a part more slowly than the GPU runs what precedes
it, the gap lands in that part: the decode step is host-bound throughout, and a short prefill
block is in part (its norms and a wrapper's launch). So every block is also captured once as a
CUDA graph and replayed (timing `cudagraph`, part `total`): the GPU's own time for the block,
which is what the reproduction check and a comparison of kernels read.
The reference for every configuration is the same block in float32 through SDPA.
"""
from __future__ import annotations

import contextlib
import math
from collections import defaultdict

import torch
import torch.nn.functional as F

from rooflab.bench import TOLERANCE, error_metrics, finite_or_none, incorrect_message, is_oom
from rooflab.timing import summarize
from rooflab.trial_orders import balanced_orders

PARTS = ("norms", "projections", "attention", "softmax", "mlp", "other")
CONFIGS = {"prefill": ("eager", "ours_softmax", "sdpa", "ours_attention"),
           "decode": ("eager", "ours_softmax", "sdpa", "ours_attention")}


class PartTimer:
    """Records (part, start, end) CUDA events; disabled (no events) for the warm-up and reference."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.marks: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []

    @contextlib.contextmanager
    def __call__(self, part: str):
        if not self.enabled:
            yield
            return
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        yield
        end.record()
        self.marks.append((part, start, end))

    def breakdown(self) -> dict[str, float]:
        torch.cuda.synchronize()
        times: dict[str, float] = defaultdict(float)
        for part, start, end in self.marks:
            times[part] += start.elapsed_time(end)
        times["total"] = self.marks[0][1].elapsed_time(self.marks[-1][2])
        times["other"] += times["total"] - sum(times[p] for p in PARTS)
        return dict(times)


class DecoderBlock:
    """Weights (random, scaled by 1/sqrt(fan_in)) and the forward pass of one block."""

    def __init__(self, width: int, heads: int, kv_heads: int, mlp_ratio: float, dtype, device):
        if width % heads or heads % kv_heads:
            raise ValueError(f"width {width} / heads {heads} / kv_heads {kv_heads} do not divide")
        self.width, self.heads, self.kv_heads = width, heads, kv_heads
        self.head_dim = width // heads
        hidden = int(mlp_ratio * width)
        qkv = (heads + 2 * kv_heads) * self.head_dim

        def weight(rows, cols):
            return (torch.randn(rows, cols, device=device) / math.sqrt(rows)).to(dtype)

        self.w_qkv, self.w_o = weight(width, qkv), weight(width, width)
        self.w_up, self.w_down = weight(width, hidden), weight(hidden, width)
        self.ln1 = torch.ones(width, device=device, dtype=dtype)
        self.ln2 = torch.ones(width, device=device, dtype=dtype)

    def params(self) -> int:
        return sum(w.numel() for w in (self.w_qkv, self.w_o, self.w_up, self.w_down))

    def to(self, dtype) -> "DecoderBlock":
        other = object.__new__(DecoderBlock)
        other.__dict__ = {k: (v.to(dtype) if isinstance(v, torch.Tensor) else v) for k, v in self.__dict__.items()}
        return other

    def _split(self, h):  # (B, N, qkv) -> q (B, H, N, Dh), k/v (B, Hkv, N, Dh)
        B, N, _ = h.shape
        q, k, v = h.split([self.heads * self.head_dim, self.kv_heads * self.head_dim,
                           self.kv_heads * self.head_dim], dim=-1)
        q = q.view(B, N, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(B, N, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, N, self.kv_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def forward(self, x, config: str, timer: PartTimer, cache=None):
        """x (B, N, W). Prefill when cache is None; else decode: N == 1, cache = (k, v) of
        (B, Hkv, L, Dh) whose last position receives this token's key and value."""
        with timer("norms"):
            h = F.rms_norm(x, (self.width,), self.ln1)
        with timer("projections"):
            q, k, v = self._split(h @ self.w_qkv)
        if cache is not None:
            with timer("other"):
                k_cache, v_cache = cache
                k_cache[:, :, -1:].copy_(k)
                v_cache[:, :, -1:].copy_(v)
                k, v = k_cache, v_cache
        o = self._attention(q, k, v, config, timer, causal=cache is None)  # (B, H, N, Dh)
        with timer("projections"):
            B, H, N, Dh = o.shape
            o = o.transpose(1, 2).reshape(B, N, H * Dh) @ self.w_o
        with timer("other"):
            x = x + o
        with timer("norms"):
            h = F.rms_norm(x, (self.width,), self.ln2)
        with timer("mlp"):
            h = F.gelu(h @ self.w_up, approximate="tanh") @ self.w_down
        with timer("other"):
            x = x + h
        return x

    def _attention(self, q, k, v, config, timer, causal):
        scale = 1.0 / math.sqrt(self.head_dim)
        group = self.heads // self.kv_heads
        if config in ("eager", "ours_softmax"):
            with timer("attention"):
                k = k.repeat_interleave(group, dim=1)   # (B, H, L, Dh), as eager GQA code does
                v = v.repeat_interleave(group, dim=1)
                scores = (q @ k.transpose(-2, -1)) * scale           # (B, H, N, L)
                if causal:
                    n = scores.shape[-1]
                    mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1)
                    scores = scores.masked_fill(mask, float("-inf"))
            with timer("softmax"):
                if config == "ours_softmax":
                    import kernels
                    probs = kernels.softmax(scores, dim=-1)
                else:
                    probs = torch.softmax(scores, dim=-1)
            with timer("attention"):
                return probs @ v
        with timer("attention"):
            if config == "sdpa":
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            import kernels
            if causal:
                return kernels.attention(q, k, v, causal=True)
            out = kernels.decode_attention(q[:, :, 0], k, v)                    # (B, H, Dh)
            return out.unsqueeze(2)


def flops(block: DecoderBlock, batch: int, seqlen: int, cache_len: int) -> float:
    """Matmul FLOPs of one block: 2 * params per token, plus QK^T and PV (causal halves prefill)."""
    tokens = batch * seqlen
    dense = 2.0 * block.params() * tokens
    keys = cache_len if cache_len else seqlen
    attn = 4.0 * batch * block.heads * seqlen * keys * block.head_dim
    return dense + (attn / 2 if not cache_len else attn)


def _reference(block: DecoderBlock, x, cache):
    ref = block.to(torch.float32)
    cache32 = tuple(c.float() for c in cache) if cache is not None else None
    return ref.forward(x.float(), "sdpa", PartTimer(False), cache32)


def _sustain(step, sustain_ms: float, min_calls: int = 3) -> int:
    """Run `step` back to back for sustain_ms (at least min_calls times), then wait for it.

    A matmul-heavy block draws enough power that the SM clock falls from its boost to the
    sustained clock within a few hundred milliseconds of load; a block of timed calls that
    starts cold would be timed partly at the boost clock, by an amount that depends on what ran
    before it. Each configuration's timed calls are therefore preceded by its own load.
    """
    import time
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    stop = time.perf_counter() + sustain_ms / 1e3
    calls = 0
    while calls < min_calls or time.perf_counter() < stop:
        step()
        calls += 1
        if calls % 4 == 0:
            sync()                        # keep the host from running ahead of the clock it reads
    sync()
    return calls


def case_lengths(phase: str, length: int) -> tuple[int, int]:
    """(seqlen, cache_len) of a case: a prefill of `length` tokens, or one decode step over a cache of `length`."""
    return (length, 0) if phase == "prefill" else (1, length)


def row_base(block: DecoderBlock, config: str, phase: str, length: int) -> dict:
    """The columns every row of a configuration at one case carries."""
    seqlen, cache_len = case_lengths(phase, length)
    return {"impl": config, "phase": phase, "seqlen": seqlen, "cache_len": cache_len,
            "width": block.width, "heads": block.heads}


def measure(block: DecoderBlock, phase: str, length: int, batch: int, reps: int, trials: int, dtype,
            device="cuda", seed: int = 0, sustain_ms: float = 0.0):
    """Rows (dicts without gpu/study/ceiling columns) for every configuration at one case.

    Every configuration is checked against the float32 reference and warmed up first; then
    `trials` rounds time them in seeded orders (rooflab.trial_orders), ceil(reps / trials) forward passes
    per configuration and round (and as many CUDA-graph replays of the block), so drift hits
    all alike; each configuration's calls in a round follow sustain_ms of its own calls (see
    `_sustain`). A row pools every round's samples: median and its 95 % interval.

    Out of memory, in the checks or the timed rounds, while the case holds captured graphs: the
    graphs are given up (`_release_graphs`: their cudagraph rows become error rows that say so) and
    the call is tried once more; a configuration that still runs out is one `oom` row.
    """
    seqlen, cache_len = case_lengths(phase, length)
    x = torch.randn(batch, seqlen, block.width, device=device, dtype=dtype)
    cache = None
    if phase == "decode":
        shape = (batch, block.kv_heads, cache_len, block.head_dim)
        cache = (torch.randn(shape, device=device, dtype=dtype), torch.randn(shape, device=device, dtype=dtype))
    ref = _reference(block, x, cache)
    if x.is_cuda and "ours_softmax" in CONFIGS[phase]:
        from kernels import _native_replay
        _native_replay.module()     # built or loaded now, not in the background while the block is timed
    tol = TOLERANCE[str(dtype).removeprefix("torch.")]
    work = flops(block, batch, seqlen, cache_len)
    ready = {}
    for config in CONFIGS[phase]:
        base = row_base(block, config, phase, length)
        try:
            max_abs, rel = _freeing_graphs(lambda: _checked_and_warm(block, x, config, cache, ref), ready, {})
        except Exception as exc:  # OOM or a kernel refusing the case: one row says so
            yield dict(base, part="total", timing="events", status="oom" if is_oom(exc) else "error",
                       message=f"{type(exc).__name__}: {exc}"[:300])
            torch.cuda.empty_cache()
            continue
        status = "ok" if rel <= tol else "incorrect"
        base.update(max_abs_err=finite_or_none(max_abs), rel_err=finite_or_none(rel), status=status,
                    message=None if status == "ok" else incorrect_message(rel, tol))
        graph = _capture(block, x, config, cache)
        ready[config] = (base, graph)
    per_trial = math.ceil(reps / trials)
    parts = {config: [] for config in ready}
    replays = {config: [] for config in ready}
    for order in balanced_orders(ready, trials, f"{seed}|{phase}|{length}"):
        for config in order:
            if config not in ready:         # given up on out of memory in an earlier trial
                continue
            try:
                samples, replayed = _freeing_graphs(
                    lambda: _one_round(block, x, config, cache, ready[config][1], per_trial, sustain_ms), ready, replays)
            except Exception as exc:
                if not is_oom(exc):
                    raise
                yield dict(ready.pop(config)[0], part="total", timing="events", status="oom", message=f"{type(exc).__name__}: {exc}"[:300])
                parts.pop(config), replays.pop(config)
                torch.cuda.empty_cache()
                continue
            parts[config].extend(samples)
            replays[config].extend(replayed)
    for config, (base, graph) in ready.items():
        samples = parts[config]
        for part in ("total",) + PARTS:
            if part not in samples[0]:        # a part this configuration does not have (softmax under SDPA)
                continue
            values = [s.get(part, 0.0) for s in samples]
            if min(values) <= 0:               # no measurable time (e.g. nothing between the parts)
                continue
            yield dict(base, part=part, timing="events", **_timing(summarize(values, trials)),
                       flops=work if part == "total" else None)
        if isinstance(graph, str):             # the block could not be captured: the row says so
            yield dict(base, part="total", timing="cudagraph", status="error", message=graph)
        elif graph is not None:
            yield dict(base, part="total", timing="cudagraph", flops=work,
                       **_timing(summarize(replays[config], trials)))
    torch.cuda.empty_cache()


def _checked_and_warm(block: DecoderBlock, x, config: str, cache, ref) -> tuple[float, float]:
    """(max_abs, rel) of the configuration's output against the reference, then 3 warm-up calls."""
    out = block.forward(x, config, PartTimer(False), cache)
    errors = error_metrics(out, ref)
    del out
    for _ in range(3):
        block.forward(x, config, PartTimer(False), cache)
    return errors


def _freeing_graphs(call, ready: dict, replays: dict):
    """call(); if it runs out of memory while the case holds captured graphs, give them up
    (`_release_graphs`) and call once more. The graphs' memory pools (a long prefill's scores under
    eager attention among them) can leave too little for the eager calls on a smaller GPU; the
    events timing stays, and the cudagraph rows say why they are missing."""
    try:
        return call()
    except Exception as exc:
        why = f"graph released: out of memory with the case's graphs held ({type(exc).__name__}: {exc})"[:300]
        if not (is_oom(exc) and _release_graphs(ready, replays, why)):
            raise
    return call()


def _one_round(block: DecoderBlock, x, config: str, cache, graph, per_trial: int, sustain_ms: float):
    """One configuration's share of a trial: per_trial timed forward passes after sustain_ms of its
    own load, then as many replays of its graph (if it has one) after the same load."""
    _sustain(lambda: block.forward(x, config, PartTimer(False), cache), sustain_ms)
    samples = []
    for _ in range(per_trial):
        timer = PartTimer(True)
        block.forward(x, config, timer, cache)
        samples.append(timer.breakdown())
    replayed = []
    if _is_graph(graph):
        _sustain(graph.replay, sustain_ms)
        replayed = _replay_ms(graph, per_trial)
    return samples, replayed


def _is_graph(graph) -> bool:
    return graph is not None and not isinstance(graph, str)


def _release_graphs(ready: dict, replays: dict, why: str) -> int:
    """Give up every captured graph of the case (their replays so far too): each configuration's
    cudagraph row becomes an error row with `why`. Returns how many graphs were held."""
    held = [config for config, (_, graph) in ready.items() if _is_graph(graph)]
    for config in held:
        base, graph = ready[config]
        graph.reset()
        ready[config] = (base, why)
        replays[config] = []
    if held and torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return len(held)


def _timing(t) -> dict:
    return {"median_ms": t.median_ms, "ci_low_ms": t.ci_low_ms, "ci_high_ms": t.ci_high_ms, "p20_ms": t.p20_ms,
            "p80_ms": t.p80_ms, "reps": t.reps, "trials": t.trials}


def _capture(block: DecoderBlock, x, config: str, cache):
    """The block's forward captured once as a CUDA graph (timing `cudagraph`), or why it could not be.

    Eager timing of a decode step measures the host launching ~30 kernels as much as the GPU, and
    of a short prefill block partly so; graph replay leaves the GPU's own time, which is what a
    serving engine with graphs sees. The graph keeps its memory pool (a prefill block's scores
    under eager attention among it) until the case ends; a capture that fails, out of memory
    included, becomes the row's error and the events rows stand.
    """
    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                block.forward(x, config, PartTimer(False), cache)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            block.forward(x, config, PartTimer(False), cache)
        graph.replay()
        torch.cuda.synchronize()
        return graph
    except Exception as exc:
        torch.cuda.synchronize()
        return f"graph capture: {type(exc).__name__}: {exc}"[:300]


def _replay_ms(graph, n: int) -> list[float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for start, end in zip(starts, ends):
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]
