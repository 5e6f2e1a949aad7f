"""kernels.flash_attention_hopper, the Gluon kernel attention() runs on Hopper for the shapes it supports.

Triton's interpreter cannot run Gluon kernels. On the CPU these tests check the scope predicate
(with a stand-in for a compute capability 9.0 GPU), the dispatch in kernels.flash_attention and
its plans, and (test_sm90_*) an offline sm_90 compile of the kernel: no register spills, shared
memory within Hopper's limit, the softmax overlapped with the P V product in the SASS.
The tests named test_gpu_* run the kernel; they need a compute capability 9.0 GPU (H100, H200).

Both groups need a session outside the interpreter, which tests/conftest.py turns on for every
test; test_offline_sm90_checks and (on such a GPU) test_compiled_gpu_checks run them in a child
pytest without the conftest, as one can by hand:

    python -m pytest -q --noconftest tests/test_attention_hopper.py -k "test_sm90_ or test_gpu_"
"""
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

import kernels.flash_attention as attn
import kernels.flash_attention_hopper as hopper
from kernels._checks import interpreting
from rooflab.studies import attention as study
from test_attention import counted_checks, fresh_plans  # noqa: F401  (the plan cache's fixtures)

ROOT = Path(__file__).resolve().parent.parent
TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2}        # relative L2 error vs float64, as tests/test_attention.py
MAX_ABS = {torch.float16: 1e-2, torch.bfloat16: 4e-2}    # largest elementwise error vs float64


def _qkv(b=1, hq=4, hkv=2, nq=256, nk=None, d=128, dtype=torch.float16, device="cpu"):
    gen = torch.Generator(device=device).manual_seed(0)
    nk = nq if nk is None else nk
    q = torch.randn(b, hq, nq, d, generator=gen, device=device).to(dtype)      # (B, Hq, Nq, D)
    k = torch.randn(b, hkv, nk, d, generator=gen, device=device).to(dtype)     # (B, Hkv, Nk, D)
    v = torch.randn(b, hkv, nk, d, generator=gen, device=device).to(dtype)
    return q, k, v


def _offset(t, elements=1):
    """A copy of t starting `elements` elements into its buffer (data pointer off 16 bytes)."""
    flat = torch.empty(t.numel() + elements, dtype=t.dtype, device=t.device)
    return flat[elements:].view(t.shape).copy_(t)


def _rel(out, ref):
    return float((out.double() - ref).norm() / ref.norm())


@pytest.fixture
def on_hopper_standin(monkeypatch):
    """CPU tensors look as if they were on a compute capability 9.0 GPU, outside the interpreter."""
    monkeypatch.setattr(hopper, "interpreting", lambda: False)
    monkeypatch.setattr(hopper, "device_capability", lambda t: (9, 0))


# ---------------------------------------------------------------- the predicate

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("shape", [(1, 4, 4, 128), (2, 8, 2, 384), (1, 32, 8, 1024)],
                         ids=lambda s: "b{}h{}/{}n{}".format(*s))
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
@pytest.mark.parametrize("causal", [True, False])
def test_supports_its_scope(on_hopper_standin, shape, dtype, causal, d):
    b, hq, hkv, n = shape
    q, k, v = _qkv(b, hq, hkv, n, d=d, dtype=dtype)
    assert hopper.supports(q, k, v, causal)


# (Nq, Nk): both multiples of 128; the causal mask needs Nq <= Nk (bottom-right alignment)
UNEQUAL = [(128, 1024), (256, 384), (1024, 8192), (384, 256)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("nq, nk", UNEQUAL, ids=lambda n: str(n))
@pytest.mark.parametrize("heads", [(8, 8), (8, 2), (32, 4)], ids=["mha", "gqa4", "gqa8"])
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_supports_nq_ne_nk(on_hopper_standin, nq, nk, heads, dtype, d):
    q, k, v = _qkv(b=2, hq=heads[0], hkv=heads[1], nq=nq, nk=nk, d=d, dtype=dtype)
    assert hopper.supports(q, k, v, False)
    assert hopper.supports(q, k, v, True) == (nq <= nk)     # causal Nq > Nk: rows without keys
    assert attn.kernel_path(q, k, v, nq <= nk) == attn.HOPPER_PATH


def _transposed(t):
    """t's values in (B, N, H, D) storage: the same shape, not contiguous, rows still 16-byte aligned."""
    return t.transpose(1, 2).contiguous().transpose(1, 2)


REFUSED = {
    "capability 8.0": lambda q, k, v: ((q, k, v), {"capability": (8, 0)}),
    "capability 8.9": lambda q, k, v: ((q, k, v), {"capability": (8, 9)}),
    "capability 10.0": lambda q, k, v: ((q, k, v), {"capability": (10, 0)}),
    "not on CUDA": lambda q, k, v: ((q, k, v), {"capability": None}),
    "interpreter": lambda q, k, v: ((q, k, v), {"interpreting": True}),
    "fp32": lambda q, k, v: ((q.float(), k.float(), v.float()), {}),
    "mixed dtypes": lambda q, k, v: ((q, k.bfloat16(), v.bfloat16()), {}),
    "v dtype": lambda q, k, v: ((q, k, v.bfloat16()), {}),
    "D=32": lambda q, k, v: (_qkv(d=32), {}),
    "D=256": lambda q, k, v: (_qkv(d=256), {}),
    "D=96": lambda q, k, v: (_qkv(d=96), {}),
    "D=80": lambda q, k, v: (_qkv(d=80), {}),
    "k, v D=64, q D=128": lambda q, k, v: ((q, k[..., :64].contiguous(), v[..., :64].contiguous()), {}),
    "q D=64, k, v D=128": lambda q, k, v: ((q[..., :64].contiguous(), k, v), {}),
    "v D=64": lambda q, k, v: ((q, k, v[..., :64].contiguous()), {}),
    "Nk=200": lambda q, k, v: (_qkv(nq=256, nk=200), {}),
    "Nk=1000": lambda q, k, v: (_qkv(nq=128, nk=1000), {}),
    "Nk=64": lambda q, k, v: (_qkv(nq=128, nk=64), {}),
    "Nq=200 Nk=256": lambda q, k, v: (_qkv(nq=200, nk=256), {}),
    "Nq=64 Nk=8192": lambda q, k, v: (_qkv(nq=64, nk=8192), {}),
    "Nk=0": lambda q, k, v: (_qkv(nq=128, nk=0), {}),
    "N=64": lambda q, k, v: (_qkv(nq=64), {}),
    "N=200": lambda q, k, v: (_qkv(nq=200), {}),
    "N=1000": lambda q, k, v: (_qkv(nq=1000), {}),
    "N=0": lambda q, k, v: (_qkv(nq=0), {}),
    "q strided": lambda q, k, v: ((_transposed(q), k, v), {}),
    "k strided": lambda q, k, v: ((q, _transposed(k), v), {}),
    "v strided": lambda q, k, v: ((q, k, _transposed(v)), {}),
    "q off 16 bytes": lambda q, k, v: ((_offset(q), k, v), {}),
    "k off 16 bytes": lambda q, k, v: ((q, _offset(k), v), {}),
    "v off 16 bytes": lambda q, k, v: ((q, k, _offset(v, 3)), {}),
    "Hq % Hkv": lambda q, k, v: (_qkv(hq=4, hkv=3), {}),
    "no kv heads": lambda q, k, v: (_qkv(hq=4, hkv=0), {}),
    "k, v shapes": lambda q, k, v: ((q, k, v[:, :1]), {}),
    "batch": lambda q, k, v: ((q, torch.cat([k, k]), torch.cat([v, v])), {}),
    "3-D q": lambda q, k, v: ((q[0], k, v), {}),
    "k not a tensor": lambda q, k, v: ((q, k.tolist(), v), {}),
    "k on another device": lambda q, k, v: ((q, k.to("meta"), v), {}),
}


@pytest.mark.parametrize("case", REFUSED)
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_refuses_outside_its_scope(on_hopper_standin, monkeypatch, case, d):
    if "D=" in case and d != 128:
        pytest.skip("the head dim cases build their own tensors")
    q, k, v = _qkv(d=d)
    assert hopper.supports(q, k, v, True) and hopper.supports(q, k, v, False)
    (q, k, v), stand_in = REFUSED[case](q, k, v)
    if "capability" in stand_in:
        monkeypatch.setattr(hopper, "device_capability", lambda t: stand_in["capability"])
    if "interpreting" in stand_in:
        monkeypatch.setattr(hopper, "interpreting", lambda: True)
    assert not hopper.supports(q, k, v, True) and not hopper.supports(q, k, v, False)


@pytest.mark.parametrize("nq, nk", [(256, 128), (1024, 384), (8192, 1024)])
def test_refuses_causal_nq_above_nk(on_hopper_standin, nq, nk):
    q, k, v = _qkv(nq=nq, nk=nk)
    assert hopper.supports(q, k, v, False) and not hopper.supports(q, k, v, True)
    assert attn.kernel_path(q, k, v, True) == attn.TRITON_PATH


def test_refuses_more_rows_than_32_bit_offsets_reach(on_hopper_standin, monkeypatch):
    q, k, v = _qkv(b=1, hq=4, hkv=2, nq=256)                     # B * Hq * N = 1024 rows
    monkeypatch.setattr(hopper, "MAX_ROWS", 1024)
    assert hopper.supports(q, k, v, False)
    monkeypatch.setattr(hopper, "MAX_ROWS", 1023)
    assert not hopper.supports(q, k, v, False)


def test_refuses_more_key_rows_than_32_bit_offsets_reach(on_hopper_standin, monkeypatch):
    q, k, v = _qkv(b=1, hq=2, hkv=2, nq=128, nk=1024)             # q: 256 rows, k and v: 2048
    monkeypatch.setattr(hopper, "MAX_ROWS", 2048)
    assert hopper.supports(q, k, v, True)
    monkeypatch.setattr(hopper, "MAX_ROWS", 2047)
    assert not hopper.supports(q, k, v, True) and not hopper.supports(q, k, v, False)


def test_without_a_stand_in_the_interpreter_and_the_cpu_are_refused():
    assert interpreting()
    assert not hopper.supports(*_qkv(), False)
    assert attn.kernel_path(*_qkv(), False) == attn.TRITON_PATH


def test_kernel_path(on_hopper_standin):
    for d in (16, 32, 64, 96, 128, 256):
        assert attn.kernel_path(*_qkv(d=d), True) == (attn.HOPPER_PATH if d in hopper.HEAD_DIMS else attn.TRITON_PATH)
    assert 128 in hopper.HEAD_DIMS


def test_a_triton_without_gluon_keeps_the_triton_path(on_hopper_standin, monkeypatch):
    monkeypatch.setattr(attn, "_hopper", lambda: None)
    assert attn.kernel_path(*_qkv(), True) == attn.TRITON_PATH


# ---------------------------------------------------------------- dispatch

@pytest.fixture
def hopper_launches(monkeypatch):
    """hopper.forward replaced by a recorder that writes the float64 reference into o (and, having
    compiled nothing, returns no kernel to replay)."""
    calls = []

    def forward(q, k, v, causal, sm_scale, o):
        calls.append((q, k, v, causal, sm_scale, o))
        o.copy_(attn.reference(q, k, v, causal, sm_scale))

    monkeypatch.setattr(hopper, "forward", forward)
    return calls


def test_the_interpreter_never_takes_the_hopper_path(fresh_plans, monkeypatch, hopper_launches):
    """Even with a compute capability 9.0 device: the predicate refuses the interpreter."""
    monkeypatch.setattr(hopper, "device_capability", lambda t: (9, 0))
    q, k, v = _qkv(b=1, hq=2, hkv=1, nq=128)
    for causal in (True, False):
        out = attn.attention(q, k, v, causal=causal)
        assert _rel(out, attn.reference(q, k, v, causal)) < TOL[torch.float16]
    assert not hopper_launches
    assert [plan.path for plan in attn._PLANS.values()] == [attn.TRITON_PATH] * 2


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_the_plan_records_the_hopper_path(on_hopper_standin, fresh_plans, counted_checks, hopper_launches, causal,
                                         d):
    q, k, v = _qkv(b=1, hq=4, hkv=1, nq=128, d=d)
    first, second = (attn.attention(q, k, v, causal=causal) for _ in range(2))
    assert len(counted_checks) == 1 and len(hopper_launches) == 2        # the repeat call skips the checks
    (plan,) = attn._PLANS.values()
    assert plan.path == attn.HOPPER_PATH and plan.fast is None
    for call, out in zip(hopper_launches, (first, second)):
        assert call[:4] == (q, k, v, causal) and call[5] is out
        assert call[4] == pytest.approx(1 / math.sqrt(d))                  # the default scale, resolved
    assert first.data_ptr() != second.data_ptr()
    attn.attention(q, k, v, causal=causal, sm_scale=0.3)
    assert hopper_launches[-1][4] == 0.3 and len(attn._PLANS) == 2


@pytest.mark.parametrize("nq, nk, causal", [(256, 640, True), (256, 640, False), (1024, 8192, True),
                                            (384, 128, False)])
def test_nq_ne_nk_plans_the_hopper_path(on_hopper_standin, fresh_plans, counted_checks, hopper_launches,
                                        nq, nk, causal):
    q, k, v = _qkv(b=1, hq=4, hkv=1, nq=nq, nk=nk)
    outs = [attn.attention(q, k, v, causal=causal) for _ in range(2)]
    assert len(counted_checks) == 1 and len(hopper_launches) == 2
    (plan,) = attn._PLANS.values()
    assert plan.path == attn.HOPPER_PATH
    for call, out in zip(hopper_launches, outs):
        assert call[:4] == (q, k, v, causal) and call[5] is out and out.shape == q.shape


def test_causal_nq_above_nk_plans_the_triton_kernel(on_hopper_standin, fresh_plans, hopper_launches):
    q, k, v = _qkv(b=1, hq=2, hkv=1, nq=256, nk=128)
    out = attn.attention(q, k, v, causal=True)
    assert not hopper_launches
    assert [plan.path for plan in attn._PLANS.values()] == [attn.TRITON_PATH]
    assert _rel(out, attn.reference(q, k, v, True)) < TOL[torch.float16]
    assert (out[:, :, :128] == 0).all()                                    # rows that see no key


class _RecordingKernel:
    """Stands in for hopper._attn_fwd: `kernel[grid](*args, **kwargs)` records the launch."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((grid, args, kwargs))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_forward_gives_the_kernel_nq_and_nk_rows(monkeypatch, causal, d):
    kernel = _RecordingKernel()
    monkeypatch.setattr(hopper, "_attn_fwd", kernel)
    q, k, v = _qkv(b=2, hq=8, hkv=2, nq=256, nk=640, d=d)
    o = torch.empty_like(q)
    hopper.forward(q, k, v, causal, 0.1, o)
    ((grid, args, kwargs),) = kernel.calls
    assert grid == hopper.grid(q) == (256 // 128, 2 * 8)                  # (Nq / 128, B * Hq)
    descs, scalars = args[:4], args[4:]
    assert [desc.base.data_ptr() for desc in descs] == [t.data_ptr() for t in (q, k, v, o)]
    assert [desc.shape for desc in descs] == [[2 * 8 * 256, d], [2 * 2 * 640, d], [2 * 2 * 640, d],
                                              [2 * 8 * 256, d]]
    assert [desc.strides for desc in descs] == [[d, 1]] * 4
    assert [desc.block_shape for desc in descs] == [[64, d], [128, d], [128, d], [64, d]]
    assert [desc.layout.swizzle_byte_width for desc in descs] == [min(128, 2 * d)] * 4
    assert scalars[:4] == (256, 640, 8, 4) and scalars[4] == pytest.approx(0.1 * hopper.LOG2E)
    assert kwargs["CAUSAL"] is causal and kwargs["HEAD_DIM"] == d


@pytest.mark.parametrize("d", [16, 32, 64, 96, 256])
def test_the_kernel_is_built_for_its_head_dims_only(d):
    if d in hopper.HEAD_DIMS:
        assert hopper._constexprs(False, d)["HEAD_DIM"] == d
        return
    with pytest.raises(ValueError, match="head dim"):
        hopper._constexprs(False, d)


class _RecordingLaunch:
    """Stands in for a plan's kernels._plans.Launch: records each direct launch's arguments."""

    def __init__(self):
        self.calls = []

    def stream(self):
        return 0

    def __call__(self, stream, *args):
        self.calls.append(args)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_a_repeat_call_launches_with_nq_and_nk_rows(on_hopper_standin, fresh_plans, counted_checks,
                                                     hopper_launches, causal, d):
    """The direct launch of a planned Nq != Nk call: descriptors of the new tensors with Nq rows a
    head for q and o and Nk for k and v, and N_Q, N_K, H, GROUP in the kernel's argument order."""
    q, k, v = _qkv(b=2, hq=8, hkv=2, nq=256, nk=640, d=d)
    attn.attention(q, k, v, causal=causal)
    (plan,) = attn._PLANS.values()
    assert plan.path == attn.HOPPER_PATH
    launch = _RecordingLaunch()
    plan.fast = (launch, hopper.replay_args(q, k, causal, plan.sm_scale))
    new = [torch.randn_like(t) for t in (q, k, v)]
    out = attn.attention(*new, causal=causal)
    assert len(counted_checks) == 1 and len(hopper_launches) == 1          # replayed: no checks, no JIT
    ((*descs, n_q, n_k, heads, group, qk_scale), *_) = [call[:9] for call in launch.calls]
    assert len(launch.calls) == 1
    assert all(desc.base is t for desc, t in zip(descs, (*new, out)))
    assert [desc.shape for desc in descs] == [[2 * 8 * 256, d], [2 * 2 * 640, d], [2 * 2 * 640, d],
                                              [2 * 8 * 256, d]]
    assert [desc.strides for desc in descs] == [[d, 1]] * 4
    assert (n_q, n_k, heads, group) == (256, 640, 8, 4)
    assert qk_scale == pytest.approx(hopper.LOG2E / math.sqrt(d))
    constexprs = hopper._constexprs(causal, d)
    assert constexprs["HEAD_DIM"] == d
    assert launch.calls[0][9:] == tuple(constexprs[name] for name in hopper._CONSTEXPR_ORDER)
    assert hopper._CONSTEXPR_ORDER[0] == "BLOCK_M" and "CAUSAL" in hopper._CONSTEXPR_ORDER


def test_attention_triton_forces_the_triton_kernel(on_hopper_standin, fresh_plans, hopper_launches):
    q, k, v = _qkv(b=1, hq=2, hkv=1, nq=128)
    out = attn.attention_triton(q, k, v, causal=True)
    assert not hopper_launches
    assert _rel(out, attn.reference(q, k, v, True)) < TOL[torch.float16]
    attn.attention(q, k, v, causal=True)                                   # a plan of its own
    assert len(hopper_launches) == 1
    assert [plan.path for plan in attn._PLANS.values()] == [attn.TRITON_PATH, attn.HOPPER_PATH]


def test_an_output_off_16_bytes_takes_the_triton_kernel(on_hopper_standin):
    q, k, v = _qkv()
    assert attn._plan(q, k, v, False, None, torch.empty_like(q), allow_hopper=True).path == attn.HOPPER_PATH
    assert attn._plan(q, k, v, False, None, _offset(q), allow_hopper=True).path == attn.TRITON_PATH
    assert attn._plan(q, k, v, False, None, torch.empty_like(q), allow_hopper=False).path == attn.TRITON_PATH


def test_an_explicit_config_takes_the_triton_kernel(on_hopper_standin, fresh_plans, hopper_launches):
    q, k, v = _qkv(b=1, hq=2, hkv=1, nq=128)
    cfg = {"BLOCK_M": 32, "BLOCK_N": 32, "WARP_SPEC": False, "num_warps": 4, "num_stages": 1}
    out = attn._forward(q, k, v, False, None, config=cfg)
    assert not hopper_launches and not attn._PLANS
    assert _rel(out, attn.reference(q, k, v, False)) < TOL[torch.float16]


def test_bad_input_still_raises_in_the_hopper_scope(on_hopper_standin, fresh_plans, hopper_launches):
    q, k, v = _qkv()
    attn.attention(q, k, v, causal=True)
    for args, match in [(dict(causal=1), "causal"), (dict(causal=True, sm_scale=-1.0), "sm_scale"),
                        (dict(causal=True, sm_scale=float("inf")), "sm_scale")]:
        with pytest.raises(ValueError, match=match):
            attn.attention(q, k, v, **args)
    with pytest.raises(ValueError, match="has no backward"):
        attn.attention(q.clone().requires_grad_(), k, v, causal=True)
    assert len(hopper_launches) == 1


def test_the_study_names_the_path(on_hopper_standin):
    shape = {"batch": 1, "heads_q": 4, "heads_kv": 1, "seqlen_q": 128, "seqlen_k": 128, "head_dim": 128,
             "causal": True}
    inputs = study.make_inputs(shape, torch.float16, "cpu")
    assert study.strategy(shape, "float16", inputs) == attn.HOPPER_PATH
    d64 = dict(shape, head_dim=64)
    assert (study.strategy(d64, "float16", study.make_inputs(d64, torch.float16, "cpu")) == attn.HOPPER_PATH) == (
        64 in hopper.HEAD_DIMS)
    other = study.make_inputs(dict(shape, head_dim=96), torch.float16, "cpu")
    assert study.strategy(shape, "float16", other) is None                # no autotuning in the interpreter
    chunk = dict(shape, seqlen_q=256, seqlen_k=1024)
    assert study.strategy(chunk, "float16", study.make_inputs(chunk, torch.float16, "cpu")) == attn.HOPPER_PATH
    above = dict(shape, seqlen_q=256, seqlen_k=128)                        # causal Nq > Nk: the Triton kernel
    assert study.strategy(above, "float16", study.make_inputs(above, torch.float16, "cpu")) is None


def test_the_study_runs_ours_triton():
    shape = {"batch": 1, "heads_q": 2, "heads_kv": 1, "seqlen_q": 33, "seqlen_k": 33, "head_dim": 64,
             "causal": True}
    inputs = study.make_inputs(shape, torch.float16, "cpu")
    _, rel = study.check(study.impls()["ours_triton"](inputs)(), study.reference(inputs), inputs)
    assert rel < study.tolerance("float16")


# ---------------------------------------------------------------- offline compile (no GPU)

def _ptxas_spills(ptx: str) -> tuple[int, int]:
    """(spill store bytes, spill load bytes) as ptxas -v reports them for sm_90a."""
    from triton import knobs
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "k.ptx").write_text(ptx)
        run = subprocess.run([knobs.nvidia.ptxas.path, "--gpu-name", "sm_90a", "-v", f"{tmp}/k.ptx",
                              "-o", f"{tmp}/k.cubin"], capture_output=True, text=True, check=True)
    found = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", run.stderr)
    assert found, run.stderr
    return max(int(s) for s, _ in found), max(int(ld) for _, ld in found)


def _sass(cubin: bytes) -> list[str]:
    from triton import knobs
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "k.cubin").write_bytes(cubin)
        run = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", f"{tmp}/k.cubin"],
                             capture_output=True, text=True, check=True)
    return re.findall(r"/\*[0-9a-f]{4,}\*/\s+([^;]+);", run.stdout)


def _exp2_while_pv_runs(sass: list[str]) -> list[int]:
    """For each wait that leaves one wgmma group in flight (the overlapped step's P V), the MUFU.EX2
    (exp2) until the next wgmma wait: the softmax that runs while P V does."""
    counts, open_count = [], None
    for ins in sass:
        if "WARPGROUP.DEPBAR" in ins:
            if open_count is not None:
                counts.append(open_count)
            open_count = 0 if ins.rstrip().endswith("0x1") else None
        elif open_count is not None and "MUFU.EX2" in ins:
            open_count += 1
    return counts


def _child_pytest(selector: str) -> None:
    """Run this file's tests matching `selector` in a child pytest without tests/conftest.py, hence
    outside Triton's interpreter (under it, Gluon compiles fail: Triton's own jit functions that
    Gluon calls become interpreted ones when TRITON_INTERPRET=1 is set at import)."""
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "--noconftest", "-p", "no:cacheprovider",
                          str(Path(__file__).relative_to(ROOT)), "-k", selector],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert re.search(r"\d+ passed", run.stdout) and "skipped" not in run.stdout, run.stdout[-3000:]


compiled_only = pytest.mark.skipif(interpreting(), reason="runs outside the interpreter (a child pytest of "
                                                          "test_offline_sm90_checks or test_compiled_gpu_checks)")


in_the_interpreter = pytest.mark.skipif(not interpreting(), reason="this session is already outside the interpreter")


@in_the_interpreter
def test_offline_sm90_checks():
    """The test_sm90_* tests (no GPU needed), in a child pytest outside the interpreter."""
    _child_pytest("test_sm90_")


@compiled_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_sm90_compile_without_spills(causal, dtype, d):
    compiled = hopper.compile_for_sm90(causal, dtype, d)
    ptx = compiled.asm["ptx"]
    assert _ptxas_spills(ptx) == (0, 0)
    assert not re.search(r"\b(ld|st)\.local", ptx)
    assert compiled.metadata.num_warps == 12                                 # 2 consumer warpgroups + loader
    assert compiled.metadata.shared <= attn.SMEM_BYTES
    # Q (2 x 64 x d) and the K, V ring (2 x STAGES x 128 x d), 2-byte elements: 224 KB at d = 128,
    # 112 KB at d = 64, plus the barriers
    tiles = 2 * (2 * hopper.QROWS + 2 * hopper.STAGES * hopper.BLOCK_N) * d
    assert tiles <= compiled.metadata.shared < tiles + 1024
    # wgmma instructions (K = 16 each) a consumer: S_0 = Q K_0^T (d / 16), each overlapped loop
    # (one; two when causal) S_{j+1} and P_j V_j (d / 16 + 128 / 16), the last P V (128 / 16)
    qk, pv = d // 16, hopper.BLOCK_N // 16
    assert ptx.count("wgmma.mma_async") == 2 * (qk + (2 if causal else 1) * (qk + pv) + pv)
    assert ptx.count("wgmma.mma_async") == {(128, True): 96, (128, False): 64, (64, True): 72, (64, False): 48}[d, causal]
    # every overlapped step (one loop per consumer, two when causal) computes its 64 exp2 of the
    # 64 x 128 scores a thread (and 2 for the row rescale) while P V is in flight, at any d
    assert _exp2_while_pv_runs(_sass(compiled.asm["cubin"])) == [66] * (4 if causal else 2)


# ---------------------------------------------------------------- on a compute capability 9.0 GPU

HOPPER_HERE = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
on_hopper = pytest.mark.skipif(not HOPPER_HERE, reason="needs a compute capability 9.0 GPU")


@on_hopper
@in_the_interpreter
def test_compiled_gpu_checks():
    """The test_gpu_* tests, in a child pytest outside the interpreter."""
    _child_pytest("test_gpu_")


@pytest.fixture
def nan_empty(monkeypatch):
    """Every torch.empty starts as NaN, so any element a kernel leaves unwritten shows (as
    tests/conftest.py's `poison`, which this file's GPU session runs without)."""
    empty = torch.empty

    def poisoned(*args, **kwargs):
        t = empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", poisoned)


def _check_close(out, ref, dtype):
    assert torch.isfinite(out).all(), "non-finite output (an element left unwritten?)"
    assert _rel(out, ref) < TOL[dtype]
    assert (out.double() - ref).abs().max() < MAX_ABS[dtype]


@on_hopper
@compiled_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("group", [1, 4], ids=["mha", "gqa4"])
@pytest.mark.parametrize("n", [128, 384, 1024])
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_gpu_hopper_path_matches_reference(fresh_plans, nan_empty, d, n, group, causal, dtype):
    q, k, v = _qkv(b=2, hq=8, hkv=8 // group, nq=n, d=d, dtype=dtype, device="cuda")
    assert attn.kernel_path(q, k, v, causal) == attn.HOPPER_PATH
    out = attn.attention(q, k, v, causal=causal)
    (plan,) = attn._PLANS.values()
    assert plan.path == attn.HOPPER_PATH
    ref = attn.reference(q, k, v, causal)
    _check_close(out, ref, dtype)
    direct = torch.full_like(q, float("nan"))                               # the launcher on a NaN-filled output
    hopper.forward(q, k, v, causal, 1 / math.sqrt(d), direct)
    torch.testing.assert_close(direct, out, rtol=0, atol=0)


@on_hopper
@compiled_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("heads", [(4, 4), (8, 2), (32, 4)], ids=["mha", "gqa4", "gqa8"])
@pytest.mark.parametrize("nq, nk, causal", [(nq, nk, causal) for nq, nk in UNEQUAL + [(1024, 4096)]
                                            for causal in (True, False)
                                            if nq <= nk or not causal],     # causal Nq > Nk: the Triton kernel
                         ids=lambda x: str(x))
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_gpu_hopper_path_nq_ne_nk_matches_reference(fresh_plans, nan_empty, d, nq, nk, causal, heads, dtype):
    hq, hkv = heads
    q, k, v = _qkv(b=2 if nk < 4096 else 1, hq=hq, hkv=hkv, nq=nq, nk=nk, d=d, dtype=dtype, device="cuda")
    assert attn.kernel_path(q, k, v, causal) == attn.HOPPER_PATH
    out = attn.attention(q, k, v, causal=causal)
    assert [plan.path for plan in attn._PLANS.values()] == [attn.HOPPER_PATH]
    _check_close(out, attn.reference(q, k, v, causal), dtype)
    direct = torch.full_like(q, float("nan"))
    hopper.forward(q, k, v, causal, 1 / math.sqrt(d), direct)
    torch.testing.assert_close(direct, out, rtol=0, atol=0)


@on_hopper
@compiled_only
def test_gpu_bottom_right_mask_hides_exactly_the_later_keys(fresh_plans, nan_empty):
    """Causal Nq = 128, Nk = 384: query i sees keys j <= i + 256. V holds one-hot rows, so each
    output row is the softmax weights of the keys; a key past the diagonal must get weight 0 and
    every visible key some weight (q = 0: uniform weights)."""
    q = torch.zeros(1, 1, 128, 128, dtype=torch.float16, device="cuda")
    k = torch.randn(1, 1, 384, 128, device="cuda").half()
    v = torch.zeros(1, 1, 384, 128, dtype=torch.float16, device="cuda")
    v[0, 0, torch.arange(384), torch.arange(384) % 128] = 1.0            # key j writes column j % 128
    out = attn.attention(q, k, v, causal=True)[0, 0].float()            # (128, 128)
    rows = torch.arange(128, device="cuda")[:, None]
    cols = torch.arange(128, device="cuda")[None, :]
    visible = (rows + 256 + 1).float()                                   # keys 0 .. i + 256
    # column c sums the keys c, c + 128, c + 256 that row i sees: 2 + (c <= i) of them
    expected = (2.0 + (cols <= rows).float()) / visible
    torch.testing.assert_close(out, expected, rtol=2e-3, atol=1e-4)


@on_hopper
@compiled_only
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_gpu_hopper_path_takes_sm_scale(fresh_plans, nan_empty, causal, d):
    q, k, v = _qkv(b=1, hq=4, hkv=1, nq=384, d=d, device="cuda")
    for sm_scale in (0.02, 0.3):
        _check_close(attn.attention(q, k, v, causal=causal, sm_scale=sm_scale),
                     attn.reference(q, k, v, causal, sm_scale), torch.float16)


@on_hopper
@compiled_only
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_gpu_repeat_call_equals_the_cold_call(fresh_plans, counted_checks, nan_empty, causal, d):
    q, k, v = _qkv(b=2, hq=8, hkv=2, nq=1024, d=d, dtype=torch.bfloat16, device="cuda")
    cold = attn.attention(q, k, v, causal=causal)
    (plan,) = attn._PLANS.values()
    assert plan.path == attn.HOPPER_PATH and plan.fast is not None          # the compiled kernel, kept
    warm = [attn.attention(q, k, v, causal=causal) for _ in range(3)]
    assert len(counted_checks) == 1 and len(attn._PLANS) == 1
    for out in warm:
        torch.testing.assert_close(out, cold, rtol=0, atol=0)
    _check_close(cold, attn.reference(q, k, v, causal), torch.bfloat16)


@on_hopper
@compiled_only
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("layout", [dict(b=1, hq=4, hkv=2, nq=384), dict(b=2, hq=8, hkv=2, nq=256, nk=640),
                                    dict(b=2, hq=32, hkv=4, nq=256, nk=640)],
                         ids=["Nq=Nk", "Nq<Nk gqa4", "Nq<Nk gqa8"])
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_gpu_replay_reads_the_new_tensors(fresh_plans, counted_checks, nan_empty, layout, causal, d):
    """A kept direct launch encodes its descriptors from the call's tensors, not the first call's
    (Nq != Nk: q/o descriptors of Nq rows a head, k/v of Nk)."""
    first = _qkv(**layout, d=d, device="cuda")
    cold = attn.attention(*first, causal=causal)
    (plan,) = attn._PLANS.values()
    assert plan.path == attn.HOPPER_PATH and plan.fast is not None
    torch.testing.assert_close(attn.attention(*first, causal=causal), cold, rtol=0, atol=0)
    for _ in range(2):
        q, k, v = (torch.randn_like(t) for t in first)                      # same layout, new data
        _check_close(attn.attention(q, k, v, causal=causal), attn.reference(q, k, v, causal), torch.float16)
    assert len(counted_checks) == 1 and len(attn._PLANS) == 1


@on_hopper
@compiled_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [True, False])
def test_gpu_attention_triton_matches_reference(fresh_plans, nan_empty, causal, dtype):
    q, k, v = _qkv(b=2, hq=8, hkv=2, nq=384, dtype=dtype, device="cuda")
    out = attn.attention_triton(q, k, v, causal=causal)
    (plan,) = attn._PLANS.values()
    assert plan.path == attn.TRITON_PATH
    _check_close(out, attn.reference(q, k, v, causal), dtype)
    again = attn.attention_triton(q, k, v, causal=causal)                   # replayed through the plan
    torch.testing.assert_close(again, out, rtol=0, atol=0)


@on_hopper
@compiled_only
@pytest.mark.parametrize("shape", [dict(nq=1000), dict(nq=256, d=96), dict(nq=256, d=32), dict(nq=1000, d=64),
                                   dict(nq=128, nk=1000), dict(nq=384, nk=128)],
                         ids=["N=1000", "D=96", "D=32", "D=64 N=1000", "Nk=1000", "Nq>Nk"])
def test_gpu_other_shapes_take_the_triton_kernel(fresh_plans, nan_empty, shape):
    q, k, v = _qkv(b=1, hq=4, hkv=2, device="cuda", **shape)
    assert attn.kernel_path(q, k, v, True) == attn.TRITON_PATH
    _check_close(attn.attention(q, k, v, causal=True), attn.reference(q, k, v, True), torch.float16)
    assert [plan.path for plan in attn._PLANS.values()] == [attn.TRITON_PATH]


@on_hopper
@compiled_only
@pytest.mark.parametrize("d", hopper.HEAD_DIMS, ids=lambda d: f"d{d}")
def test_gpu_study_strategy_names_the_path(d):
    shape = {"batch": 1, "heads_q": 8, "heads_kv": 2, "seqlen_q": 512, "seqlen_k": 512, "head_dim": d,
             "causal": True}
    inputs = study.make_inputs(shape, torch.float16, "cuda")
    study.impls()["ours"](inputs)()
    assert study.strategy(shape, "float16", inputs) == attn.HOPPER_PATH
    _, rel = study.check(study.impls()["ours"](inputs)(), study.reference(inputs), inputs)
    assert rel < study.tolerance("float16")
