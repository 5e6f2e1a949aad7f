"""kernels.fused_softmax in Triton's CPU interpreter against a float64 reference.

Every strategy is forced directly (STRATEGIES[name].run into a NaN-poisoned output) and reached
through the dispatch of softmax(); rows hold -inf entries, an all -inf row (NaN, as torch gives)
and large magnitudes. Tolerances compare the output to the float64 softmax of the same (rounded)
input: fp32 rtol 1e-5 / atol 1e-6, fp16 rtol 2e-3 / atol 1e-5, bf16 rtol 1.6e-2 / atol 1e-4
(about two units in the last place of the output's dtype; NaN must match NaN exactly).
"""
import importlib

import pytest
import torch

import kernels
import kernels._checks
from kernels.fused_softmax import STRATEGIES, Config, choose, config, reference, softmax, traffic_bytes

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6),
       torch.float16: dict(rtol=2e-3, atol=1e-5),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-4)}
NINF = float("-inf")
sm = importlib.import_module("kernels.fused_softmax")


def logits(rows, cols, dtype, scale=3.0):
    """(rows, cols) logits with -inf entries and, from 3 rows up, an all -inf row."""
    x = torch.randn(rows, cols) * scale
    x[0, ::3] = NINF                          # -inf entries (all of a length-1 row)
    if rows >= 3:
        x[2] = NINF                           # an all -inf row: torch gives NaN
    return x.to(dtype)


def check(out, x, dim=-1):
    ref = reference(x, dim)
    assert out.shape == x.shape and out.dtype == x.dtype
    torch.testing.assert_close(out.to(torch.float64), ref, equal_nan=True, **TOL[x.dtype])


def run_poisoned(name, x, cfg=None):
    out = torch.full(x.shape, float("nan"), dtype=x.dtype)
    result = STRATEGIES[name].run(x, out=out, cfg=cfg)
    assert result is out
    return out


# ---- every strategy, forced ----

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("cols", [1, 7, 128, 1000, 4097])
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_strategy_forced(name, cols, dtype):
    if not STRATEGIES[name].supports(cols):
        pytest.skip(f"{name} does not handle {cols} columns")
    x = logits(5, cols, dtype)
    check(run_poisoned(name, x), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["looped", "split"])
def test_long_rows(name, dtype):
    """70,000 columns: several tiles per row (looped) and several segments per row (split)."""
    x = logits(3, 70000, dtype)
    cfg = config(name, 70000, dtype)
    assert triton_cdiv(70000, cfg.block) > 1
    check(run_poisoned(name, x), x)


def triton_cdiv(a, b):
    return -(-a // b)


@pytest.mark.parametrize("name,cfg,rows,cols", [
    ("rows", Config(block=16, num_warps=4, rows=4, per_sm=1), 600, 13),    # 132 programs loop over 150 tiles
    ("row", Config(block=64, num_warps=4, per_sm=1), 300, 50),             # 132 programs loop over 300 rows
    ("looped", Config(block=32, num_warps=4, per_sm=1), 140, 100),         # 4 tiles a row, 2 rows for some
    ("split", Config(block=256, num_warps=4), 2, 40000),                   # 157 segments: partials combined in chunks
    ("split", Config(block=64, num_warps=4), 4, 200),                      # last segment mostly masked
    ("split", Config(block=64, num_warps=4, seg_tiles=3), 3, 1000),        # segments of 3 tiles, read twice
    ("split", Config(block=128, num_warps=4, seg_tiles=2), 2, 257),        # 3 tiles: the last segment short
])
def test_launch_configs(name, cfg, rows, cols):
    x = logits(rows, cols, torch.float32)
    check(run_poisoned(name, x, cfg), x)


def test_split_segments_are_four_tiles_of_at_most_split_block():
    cfg = config("split", 1 << 20, torch.float32, rows=64, sms=132)
    assert (cfg.block, cfg.seg_tiles) == (sm.SPLIT_BLOCK, sm.SPLIT_SEG_TILES)
    assert config("split", 1000, torch.float16, rows=3, sms=132).block == 1024     # short rows: one tile


def test_split_segment_all_neg_inf():
    """A segment entirely -inf (max -inf, sum 0) must not turn a finite row into NaN."""
    x = torch.randn(2, 300)
    x[0, :256] = NINF
    x[1, 100:] = NINF
    check(run_poisoned("split", x, Config(block=64, num_warps=4)), x)
    check(run_poisoned("split", x, Config(block=32, num_warps=4, seg_tiles=4)), x)


@pytest.mark.parametrize("dtype,value", [(torch.float32, 1e4), (torch.float16, 6e4), (torch.bfloat16, 1e38)],
                         ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_large_magnitudes(name, dtype, value):
    x = torch.rand(4, 257) * 2 * value - value
    x[1, 5] = value                            # the max of its row is the dtype's large value
    x[3] = value                               # a row of equal large values: uniform output
    x = x.to(dtype)
    out = run_poisoned(name, x)
    assert not out.isnan().any()
    check(out, x)


# ---- the public API ----

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(64, 1), (64, 200), (300, 2000), (2, 20000)])
def test_softmax_dispatch(poison, shape, dtype):
    """Each shape class through softmax(): rows, row (>= 2 rows per SM), split (few long rows)."""
    x = logits(*shape, dtype)
    check(softmax(x), x)


def test_dispatch_rule():
    sms = 132
    assert choose(65536, 128, torch.float16, sms) == "rows"
    assert choose(16384, 512, torch.float32, sms) == "rows"
    assert choose(16384, 1024, torch.float16, sms) == "row"
    assert choose(8192, 4096, torch.float16, sms) == "row"
    assert choose(8192, 4096, torch.float32, sms) == "looped"      # fp32 rows of 1000-4096 columns
    assert choose(16384, 4097, torch.float32, sms) == "row"
    assert choose(4096, 16384, torch.float32, sms) == "row"
    assert choose(4096, 32768, torch.bfloat16, sms) == "looped"
    assert choose(64, 4096, torch.float16, sms) == "split"          # too few rows to fill the GPU
    assert choose(1024, 131072, torch.bfloat16, sms) == "looped"
    assert choose(256, 262144, torch.float32, sms) == "split"      # two rows an SM: split the rows
    assert choose(16, 4194304, torch.bfloat16, sms) == "split"
    for rows, cols in [(1, 1), (5, 1025), (10**6, 8), (3, 10**7)]:
        for dtype in DTYPES:
            name = choose(rows, cols, dtype, sms)
            assert STRATEGIES[name].supports(cols)


def test_kernels_package_exports_softmax(poison):
    x = logits(4, 33, torch.float32)
    assert kernels.softmax is softmax
    check(kernels.softmax(x, dim=-1), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_dims_3d(poison, dim, dtype):
    x = (torch.randn(4, 6, 9) * 3).to(dtype)
    x[1, 2, :] = NINF
    check(softmax(x, dim=dim), x, dim)


@pytest.mark.parametrize("make", [
    lambda b: b.t(),                      # transposed: last dim strided, made contiguous
    lambda b: b[:, ::2],                  # step in the last dim
    lambda b: b[::2, :],                  # step in the rows: a row stride, no copy
    lambda b: b[1:, 3:40],                # sliced: row stride > cols, offset start
    lambda b: b[:1, :].expand(5, -1),     # row stride 0
], ids=["transposed", "col-step", "row-step", "sliced", "expanded"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_inputs(poison, make, dtype):
    x = make((torch.randn(24, 48) * 3).to(dtype))
    check(softmax(x), x)
    check(softmax(x, dim=0), x, 0)


def test_row_stride_input_is_not_copied(poison, monkeypatch):
    base = torch.randn(8, 40)
    x = base[:, 5:37]                     # rows 40 apart, contiguous within a row
    monkeypatch.setattr(torch.Tensor, "contiguous", lambda self, *a, **k: pytest.fail("copied"))
    check(softmax(x), x)


@pytest.mark.parametrize("shape,dim", [((0, 5), -1), ((5, 0), -1), ((5, 0), 0), ((2, 0, 3), 1), ((0,), 0)])
def test_empty(shape, dim):
    x = torch.randn(shape)
    out = softmax(x, dim=dim)
    assert out.shape == x.shape and out.dtype == x.dtype


def test_zero_dim():
    x = torch.tensor(2.5)
    for dim in (0, -1):
        out = softmax(x, dim=dim)
        assert out.shape == () and out.item() == 1.0


def test_traffic_model():
    assert traffic_bytes(8192, 4096, torch.float16) == 2 * 8192 * 4096 * 2
    assert traffic_bytes(256, 262144, torch.float32) == 2 * 256 * 262144 * 4


# ---- bad input ----

@pytest.mark.parametrize("args,match", [
    ((torch.arange(6).reshape(2, 3),), "dtype int64"),
    ((torch.randn(2, 3, dtype=torch.float64),), "dtype float64"),
    (([1.0, 2.0],), "torch.Tensor"),
    ((torch.randn(2, 3), 2), "dim 2 is out of range"),
    ((torch.randn(2, 3), -3), "dim -3 is out of range"),
    ((torch.randn(2, 3), 1.0), "dim must be an int"),
    ((torch.randn(2, 3), True), "dim must be an int"),
])
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        softmax(*args)


def test_cpu_tensor_without_interpreter(monkeypatch):
    monkeypatch.setattr(kernels._checks, "interpreting", lambda: False)
    monkeypatch.setattr(sm, "_PLANS", {})          # no plan cached by an earlier interpreted call
    with pytest.raises(ValueError, match="CUDA tensor"):
        softmax(torch.randn(2, 3))


def test_strategy_bad_input():
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="2 dimensions"):
        STRATEGIES["row"].run(x.reshape(2, 2, 8))
    with pytest.raises(ValueError, match="contiguous last dimension"):
        STRATEGIES["row"].run(x.t())
    with pytest.raises(ValueError, match="out must be"):
        STRATEGIES["row"].run(x, out=torch.empty(4, 9))
    with pytest.raises(ValueError, match="at most 4096 columns"):
        STRATEGIES["rows"].run(torch.randn(1, 5000))
    with pytest.raises(ValueError, match="unknown strategy"):
        config("tiles", 10, torch.float32)
    assert not STRATEGIES["row"].supports(0) and STRATEGIES["split"].supports(10**8)


def test_interpreter_uses_fixed_sm_count():
    assert sm.num_sms(torch.device("cpu")) == sm.INTERPRETER_SMS


def test_repeated_calls_reuse_a_plan_keyed_by_layout(monkeypatch):
    monkeypatch.setattr(sm, "_PLANS", {})
    x = logits(6, 40, torch.float32)
    for _ in range(2):
        check(softmax(x), x)
    assert len(sm._PLANS) == 1
    check(softmax(x.t()), x.t())                  # other strides: a plan of its own
    check(softmax(x, dim=0), x, dim=0)
    assert len(sm._PLANS) == 3
    with pytest.raises(ValueError, match="dtype"):
        softmax(x.to(torch.int32))                # a new dtype is checked, never served from the cache


# ---- autograd: the Triton forward with a backward in fp32 torch ops ----

GRAD_TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6),     # against float64 torch.softmax's gradient
            torch.float16: dict(rtol=1e-2, atol=1e-3),
            torch.bfloat16: dict(rtol=5e-2, atol=1e-2)}


def _torch_grad(x, dim, dy):
    x64 = x.detach().to(torch.float64).requires_grad_()
    torch.softmax(x64, dim).backward(dy.to(torch.float64))
    return x64.grad


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", [((3, 7), -1), ((5, 1), -1), ((2, 1000), 1), ((2, 5000), -1),
                                       ((4, 6, 9), 0), ((3, 5, 7), 1), ((1, 33), 0)],
                         ids=lambda v: str(v))
def test_backward_matches_torch(shape, dim, dtype):
    x = (torch.randn(shape) * 3).to(dtype).requires_grad_()
    y = softmax(x, dim)
    assert y.requires_grad and y.dtype == dtype
    check(y.detach(), x.detach(), dim)                       # the forward is unchanged
    dy = torch.randn(shape).to(dtype)
    y.backward(dy)
    assert x.grad.dtype == dtype and x.grad.shape == x.shape
    torch.testing.assert_close(x.grad.to(torch.float64), _torch_grad(x, dim, dy), **GRAD_TOL[dtype])


@pytest.mark.parametrize("shape,dim", [((3, 11), -1), ((4, 3, 5), 1)])
def test_backward_agrees_with_finite_differences(shape, dim):
    """gradcheck's directional test in fp32 (the kernels take no float64): <grad, u> against a
    central difference of sum(softmax(x) * w) along a random direction u."""
    x = torch.randn(shape, requires_grad=True)
    w = torch.randn(shape)
    (softmax(x, dim) * w).sum().backward()
    eps = 1e-2
    for _ in range(3):
        u = torch.randn(shape)
        with torch.no_grad():
            f = lambda t: float((softmax(t, dim).double() * w.double()).sum())  # noqa: E731
            numeric = (f(x + eps * u) - f(x - eps * u)) / (2 * eps)
        analytic = float((x.grad.double() * u.double()).sum())
        assert abs(numeric - analytic) <= 2e-3 * max(1.0, abs(analytic)), (numeric, analytic)


def test_backward_through_a_graph_and_non_contiguous_input():
    base = torch.randn(6, 8, requires_grad=True)
    x = (base * 2).t()                                          # non-leaf, non-contiguous (8, 6)
    loss = (softmax(x, -1) ** 2).sum() + softmax(x, 0)[1].sum()
    loss.backward()
    ref = base.detach().clone().requires_grad_()
    xr = (ref * 2).t()
    ((torch.softmax(xr, -1) ** 2).sum() + torch.softmax(xr, 0)[1].sum()).backward()
    torch.testing.assert_close(base.grad, ref.grad, rtol=1e-5, atol=1e-6)


def test_backward_of_all_neg_inf_row_and_edge_shapes():
    x = torch.full((2, 5), NINF)
    x[1] = torch.randn(5)
    x.requires_grad_()
    softmax(x).sum().backward()
    assert torch.isnan(x.grad[0]).all()                         # as torch's gradient: NaN in, NaN out
    assert torch.allclose(x.grad[1], torch.zeros(5), atol=1e-6)  # sum(softmax) is constant
    s = torch.tensor(1.5, requires_grad=True)
    softmax(s).backward()
    assert softmax(s).item() == 1.0 and s.grad.item() == 0.0
    e = torch.randn(0, 4, requires_grad=True)
    softmax(e).sum().backward()
    assert e.grad.shape == (0, 4)


def test_no_grad_calls_skip_the_autograd_function(monkeypatch):
    def refuse(*args):
        raise AssertionError("autograd path taken")
    monkeypatch.setattr(sm._Softmax, "apply", refuse)
    x = torch.randn(4, 9)
    assert softmax(x).grad_fn is None                           # no grad needed
    xg = x.clone().requires_grad_()
    with torch.no_grad():
        assert softmax(xg).grad_fn is None                      # grad mode off
    with torch.inference_mode():
        assert softmax(xg).grad_fn is None


def test_double_backward_is_refused():
    x = torch.randn(3, 4, requires_grad=True)
    (g,) = torch.autograd.grad(softmax(x).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


@pytest.mark.parametrize("args,match", [
    ((torch.randn(2, 3, dtype=torch.float64, requires_grad=True),), "dtype float64"),
    ((torch.randn(2, 3, requires_grad=True), 2), "dim 2 is out of range"),
    ((torch.randn(2, 3, requires_grad=True), 1.0), "dim must be an int"),
])
def test_bad_input_requiring_grad(args, match):
    with pytest.raises(ValueError, match=match):
        softmax(*args)


# ---- the plan cache (kernels._plans) ----

@pytest.fixture
def fresh_plans(monkeypatch):
    monkeypatch.setattr(sm, "_PLANS", {})
    return sm


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("make,dim", [
    (lambda: logits(7, 33, torch.float32), -1),
    (lambda: torch.randn(3, 5, 129) * 3, -1),
    (lambda: (torch.randn(9, 70) * 3)[:, 1:66], -1),     # offset start, row stride 70
    (lambda: torch.randn(6, 11, 4) * 3, 1),              # a middle dim: moved, copied
], ids=["rows", "3d", "sliced", "middle-dim"])
def test_plan_cache_repeat_equals_cold_call(fresh_plans, poison, make, dim, dtype):
    x = make().to(dtype)
    cold = softmax(x, dim)
    assert len(sm._PLANS) == 1
    for _ in range(2):
        again = softmax(x, dim)
        torch.testing.assert_close(again, cold, rtol=0, atol=0, equal_nan=True)
    check(again, x, dim)


def test_repeat_call_does_not_revalidate(fresh_plans, monkeypatch):
    calls = []
    original = sm.check_tensor
    monkeypatch.setattr(sm, "check_tensor", lambda *a, **k: calls.append(a[0]) or original(*a, **k))
    x = logits(5, 40, torch.float16)
    outs = [softmax(x) for _ in range(3)]
    assert calls == ["x"]                          # validated once, on the first call
    for out in outs[1:]:
        torch.testing.assert_close(out, outs[0], rtol=0, atol=0, equal_nan=True)
    softmax(x.float())                             # another dtype: validated and planned anew
    assert calls == ["x", "x"] and len(sm._PLANS) == 2


def test_a_plan_is_never_reused_for_another_layout(fresh_plans):
    base = torch.randn(4, 40) * 3
    a, b = base[:, 0:32], base[:, 1:33]           # same shape and strides, start 4 bytes apart
    check(softmax(a), a)
    check(softmax(b), b)
    check(softmax(base[:, :32].contiguous()), base[:, :32])   # same shape, another row stride
    assert len(sm._PLANS) == 3
    keys = list(sm._PLANS)
    assert keys[0][-1] != keys[1][-1]              # the data pointer offset is part of the key
    with pytest.raises(ValueError, match="dtype int32"):
        softmax(a.to(torch.int32))                # same layout, bad dtype: checked, not served
    for bad_dim in (True, 1.0):                    # equal (and hash equal) to the planned dim 1
        softmax(a, 1)
        with pytest.raises(ValueError, match="dim must be an int"):
            softmax(a, bad_dim)


def test_plan_cache_is_bounded(fresh_plans, monkeypatch):
    monkeypatch.setattr(kernels._plans, "PLAN_CACHE_SIZE", 4)
    xs = [torch.randn(3, cols) for cols in range(10, 16)]
    for x in xs:
        check(softmax(x), x)
    assert len(sm._PLANS) == 4
    assert [k[0][1] for k in sm._PLANS] == [12, 13, 14, 15]     # the oldest dropped first
    check(softmax(xs[0]), xs[0])                   # a dropped plan is simply made again
    assert len(sm._PLANS) == 4


def test_gpu_plans_replay_the_first_launch(fresh_plans, poison, monkeypatch, replay):
    """The direct launch a GPU plan keeps gets the first launch's arguments, with a new out and x.

    `Launch` (which needs a GPU) is replaced by one that records its arguments and runs them
    through the interpreter; the strategies' launchers are wrapped to record the first launch.
    """
    launches, replays = [], replay.calls
    monkeypatch.setattr(sm, "interpreting", lambda: False)
    monkeypatch.setattr(sm, "Launch", replay.launcher(lambda grid, args: launches[-1][0][grid](*args)))
    for name in ("rows", "row", "looped"):
        build = {"rows": sm._rows_args, "row": sm._row_args, "looped": sm._looped_args}[name]

        def recording(x, out, cfg, build=build):
            kernel, grid, args, options = build(x, out, cfg)
            launches.append((kernel, args))
            return kernel, grid, args, options
        monkeypatch.setitem(STRATEGIES, name, sm.Strategy(name, STRATEGIES[name].max_cols,
                                                          sm._one_launch(recording)))
    monkeypatch.setattr(sm, "choose", lambda rows, cols, dtype, sms: {40: "rows", 700: "row"}.get(cols, "looped"))
    for shape in [(2, 3, 40), (5, 700), (3, 2000)]:
        x = (torch.randn(*shape) * 3).to(torch.float16)
        first = softmax(x)
        n, m = len(replays), len(launches)
        second = softmax(x)
        assert len(replays) == n + 1 and len(launches) == m     # replayed, not launched anew
        kernel, args = launches[-1]
        replay = replays[-1]
        assert replay[1] is x and replay[0] is second and replay[2:] == args[2:]
        torch.testing.assert_close(second, first, rtol=0, atol=0, equal_nan=True)
        check(second, x)
