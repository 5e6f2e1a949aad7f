"""kernels.flash_attention, kernels.seeds.attention and rooflab.studies.attention in Triton's CPU
interpreter (TRITON_INTERPRET=1, set by conftest.py), against a float64 torch reference."""
import importlib
import math

import pytest
import torch

import kernels._checks
from kernels.flash_attention import attention
from kernels.seeds.attention import seed_attention
from rooflab.bench import error_metrics
from rooflab.studies import attention as study

attn = importlib.import_module("kernels.flash_attention")


TOL = {torch.float16: 3e-3, torch.bfloat16: 2e-2}  # relative L2 error vs float64, the worst query row


def _inputs(b, hq, hkv, nq, nk, d, dtype, scale=1.0):
    q = torch.randn(b, hq, nq, d).mul_(scale).to(dtype)
    k = torch.randn(b, hkv, nk, d).mul_(scale).to(dtype)
    v = torch.randn(b, hkv, nk, d).to(dtype)
    return q, k, v


def _rel(out, ref):
    """The worst query row's relative L2 error, each row against its own norm (a row that sees no key:
    its largest |out - ref|): in causal attention the early rows, which see few keys, have the largest
    norms, and a whole-tensor norm would hide an error in the late ones."""
    assert out.shape == ref.shape
    assert torch.isfinite(out).all(), "non-finite output"
    return error_metrics(out, ref, per_row=True)[1]


CASES = [
    # batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, causal
    (1, 2, 2, 1, 1, 64, True),
    (1, 2, 2, 1, 1, 64, False),
    (2, 2, 2, 17, 17, 64, True),
    (1, 2, 2, 65, 65, 64, True),
    (1, 2, 2, 65, 65, 64, False),
    (1, 2, 1, 17, 40, 80, True),      # Nq < Nk: chunked prefill, bottom-right mask
    (1, 4, 2, 40, 17, 96, True),      # Nq > Nk: the first 23 queries see no key -> zeros
    (1, 2, 2, 1, 33, 112, True),      # one query against a longer key sequence
    (1, 4, 1, 33, 33, 16, True),      # GQA 4:1
    (1, 4, 2, 33, 50, 128, False),    # GQA 2:1, non-causal, Nk not a block multiple
    (1, 1, 1, 9, 12, 256, True),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "b{}h{}/{}q{}k{}d{}{}".format(*c[:6], "c" if c[6] else ""))
def test_matches_float64_reference(case, dtype, poison):
    b, hq, hkv, nq, nk, d, causal = case
    q, k, v = _inputs(b, hq, hkv, nq, nk, d, dtype)
    out = attention(q, k, v, causal=causal)
    assert out.dtype == dtype and out.shape == (b, hq, nq, d)
    assert _rel(out, attn.reference(q, k, v, causal)) < TOL[dtype]


def test_rows_without_visible_keys_are_zero(poison):
    q, k, v = _inputs(1, 2, 2, 40, 17, 64, torch.float16)
    out = attention(q, k, v, causal=True)
    assert torch.equal(out[:, :, :23], torch.zeros_like(out[:, :, :23]))
    assert out[:, :, 23:].abs().sum() > 0


def _strided(layout):
    """Non-contiguous q, k, v: views whose rows the tensor descriptors can still address
    ("descriptor"), or that need the pointer path (k with a non-unit last stride, v with rows
    65 elements apart, not 16-byte aligned)."""
    q = torch.randn(2, 37, 4, 72).to(torch.float16)[..., :64].transpose(1, 2)   # (2, 4, 37, 64)
    if layout == "descriptor":
        k = torch.randn(2, 45, 2, 64).to(torch.float16).transpose(1, 2)         # (2, 2, 45, 64)
        v = torch.randn(2, 2, 90, 64).to(torch.float16)[:, :, ::2]              # row stride 128
    else:
        k = torch.randn(2, 2, 64, 45).to(torch.float16).transpose(-1, -2)       # stride_d 45
        v = torch.randn(2, 2, 45, 65).to(torch.float16)[..., :64]               # row stride 65
    return q, k, v


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("layout", ["descriptor", "pointer"])
def test_strided_inputs(layout, causal, poison):
    q, k, v = _strided(layout)
    assert not q.is_contiguous() and not k.is_contiguous() and not v.is_contiguous()
    assert attn._use_tma(q, k, v, torch.empty(1)) == (layout == "descriptor")
    out = attention(q, k, v, causal=causal)
    assert _rel(out, attn.reference(q, k, v, causal)) < TOL[torch.float16]


def test_custom_scale_and_large_logits(poison):
    q, k, v = _inputs(1, 2, 2, 33, 33, 64, torch.float16, scale=8.0)  # logits in the hundreds
    for sm_scale in (0.05, 1.0):
        out = attention(q, k, v, causal=True, sm_scale=sm_scale)
        assert _rel(out, attn.reference(q, k, v, True, sm_scale)) < TOL[torch.float16]


WS_CFG = {"BLOCK_M": 32, "BLOCK_N": 16, "WARP_SPEC": True, "num_warps": 4, "num_stages": 1}


@pytest.mark.parametrize("nq,nk", [(48, 48), (40, 50), (45, 20), (1, 1)])
def test_warp_specialized_single_loop(nq, nk, poison):
    """The warp-specialized config runs every key block through one loop (masked when Nk is not a
    multiple of BLOCK_N)."""
    q, k, v = _inputs(1, 2, 1, nq, nk, 32, torch.float16)
    out = attn._forward(q, k, v, False, None, config=WS_CFG)
    assert _rel(out, attn.reference(q, k, v, False)) < TOL[torch.float16]


def test_warp_specialized_refuses_causal():
    q, k, v = _inputs(1, 2, 1, 16, 16, 32, torch.float16)
    with pytest.raises(ValueError, match="causal"):
        attn._forward(q, k, v, True, None, config=WS_CFG)


def test_warp_specialized_configs_pruned_for_causal():
    """The autotuning space offers the warp-specialized config only without a causal mask, and
    only on the tensor-descriptor path."""
    def kept(causal, use_tma):
        cfgs = attn._prune(attn.CONFIGS, {"NQ_BUCKET": 4096}, BLOCK_D=128, USE_TMA=use_tma, CAUSAL=causal)
        return [c.kwargs["WARP_SPEC"] for c in cfgs]
    assert True in kept(False, True)
    assert True not in kept(True, True) and True not in kept(False, False)


def test_empty_and_keyless_shapes(poison):
    q, k, v = _inputs(1, 2, 2, 0, 5, 64, torch.float16)
    assert attention(q, k, v).shape == (1, 2, 0, 64)
    q, k, v = _inputs(1, 2, 2, 3, 0, 64, torch.float16)
    assert torch.equal(attention(q, k, v), torch.zeros(1, 2, 3, 64, dtype=torch.float16))


def test_flop_count():
    # causal square: half of N^2 by convention; otherwise the visible pairs exactly
    assert attn.attention_flops(2, 3, 64, 64, 128, True) == 4 * 2 * 3 * 64 * 64 * 128 / 2
    assert attn.attention_flops(2, 3, 64, 80, 128, False) == 4 * 2 * 3 * 64 * 80 * 128
    for nq, nk in ((17, 40), (40, 17), (1, 9), (9, 1)):
        rows = torch.arange(nq)[:, None]
        visible = int((torch.arange(nk)[None, :] <= rows + nk - nq).sum())
        assert attn.visible_pairs(nq, nk, True) == visible


def _bad(**over):
    q, k, v = _inputs(1, 4, 2, 8, 8, 64, torch.float16)
    args = dict(q=q, k=k, v=v, causal=False, sm_scale=None)
    args.update(over)
    return args


@pytest.mark.parametrize("args,match", [
    (_bad(q=torch.randn(4, 8, 64).half()), "dimensions"),
    (_bad(q=torch.randn(1, 4, 8, 64)), "dtype float32"),
    (_bad(k=torch.randn(1, 2, 8, 64).bfloat16(), v=torch.randn(1, 2, 8, 64).bfloat16()), "share a dtype"),
    (_bad(k=torch.randn(1, 3, 8, 64).half(), v=torch.randn(1, 3, 8, 64).half()), "multiple"),
    (_bad(v=torch.randn(1, 2, 9, 64).half()), "same shape"),
    (_bad(k=torch.randn(2, 2, 8, 64).half(), v=torch.randn(2, 2, 8, 64).half()), "batch"),
    (_bad(k=torch.randn(1, 2, 8, 32).half(), v=torch.randn(1, 2, 8, 32).half()), "head dim"),
    (_bad(q=torch.randn(1, 4, 8, 8).half(), k=torch.randn(1, 2, 8, 8).half(), v=torch.randn(1, 2, 8, 8).half()), "range"),
    (_bad(q=torch.randn(1, 4, 8, 512).half(), k=torch.randn(1, 2, 8, 512).half(),
          v=torch.randn(1, 2, 8, 512).half()), "range"),
    (_bad(sm_scale=-1.0), "sm_scale"),
    (_bad(sm_scale=float("nan")), "sm_scale"),
    (_bad(sm_scale=1e300), "fits fp32"),              # scale * log2(e) overflows fp32: all-NaN scores
    (_bad(sm_scale=10 ** 400), "sm_scale"),
    (_bad(sm_scale=True), "sm_scale"),
    (_bad(causal=1), "causal"),
    (_bad(k=[[1.0]]), "torch.Tensor"),
    (_bad(q=torch.randn(1, 4, 8, 64).half().to_sparse()), "q is a sparse_coo tensor"),
    (_bad(v=torch._neg_view(torch.randn(1, 2, 8, 64).half())), "v is a lazily negated"),
    (_bad(q=torch.zeros(2048, 32, 1, 16).half(), k=torch.zeros(2048, 32, 1, 16).half(),
          v=torch.zeros(2048, 32, 1, 16).half()), "batch \\* query heads = 65536"),
])
def test_bad_input_raises_value_error(args, match):
    with pytest.raises(ValueError, match=match):
        attention(**args)


def test_cpu_tensor_outside_interpreter_raises(monkeypatch):
    monkeypatch.setattr(kernels._checks, "interpreting", lambda: False)
    with pytest.raises(ValueError, match="CUDA"):
        attention(**_bad())


# ---- the seed's design

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("n", [1, 65, 130])
def test_seed_attention(n, dtype, poison):
    q, k, v = _inputs(1, 2, 2, n, n, 64, dtype)
    out = seed_attention(q, k, v)
    assert _rel(out, attn.reference(q, k, v, True)) < TOL[dtype]


@pytest.mark.parametrize("shapes,causal,match", [
    (((1, 2, 8, 64), (1, 2, 8, 64)), False, "causal"),
    (((1, 4, 8, 64), (1, 2, 8, 64)), True, "square multi-head"),
    (((1, 2, 8, 64), (1, 2, 12, 64)), True, "square multi-head"),
    (((1, 2, 8, 80), (1, 2, 8, 80)), True, "power-of-two"),
])
def test_seed_attention_scope(shapes, causal, match):
    q = torch.randn(*shapes[0]).half()
    k = torch.randn(*shapes[1]).half()
    with pytest.raises(ValueError, match=match):
        seed_attention(q, k, k.clone(), causal=causal)


# ---- the study module on the CPU

SHAPE = {"batch": 2, "heads_q": 4, "heads_kv": 2, "seqlen_q": 33, "seqlen_k": 33, "head_dim": 64, "causal": True}


def test_study_shapes_defaults():
    (shape,) = study.shapes([{"batch": 1, "heads_q": 8, "seqlen_q": 128, "head_dim": 64, "causal": 0}])
    assert shape == {"batch": 1, "heads_q": 8, "heads_kv": 8, "seqlen_q": 128, "seqlen_k": 128,
                     "head_dim": 64, "causal": False}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("impl", ["ours", "seed_attention", "eager"])
def test_study_roundtrip(impl, dtype):
    inputs = study.make_inputs(SHAPE, getattr(torch, dtype), "cpu")
    ref = study.reference(inputs)
    assert ref.shape == (2, 3, len(inputs["ref_rows"]), 64)
    if impl == "seed_attention":
        shape = dict(SHAPE, heads_kv=SHAPE["heads_q"])
        inputs = study.make_inputs(shape, getattr(torch, dtype), "cpu")
        ref = study.reference(inputs)
    _, rel = study.check(study.impls()[impl](inputs)(), ref, inputs)
    assert rel < study.tolerance(dtype)


def test_study_check_catches_a_wrong_mask():
    inputs = study.make_inputs(SHAPE, torch.float16, "cpu")
    wrong = attention(inputs["q"], inputs["k"], inputs["v"], causal=False)
    _, rel = study.check(wrong, study.reference(inputs), inputs)
    assert rel > 10 * study.tolerance("float16")


def test_study_reference_subset_is_bounded():
    big = dict(SHAPE, seqlen_q=32768, seqlen_k=32768, heads_q=32, heads_kv=8, batch=4)
    batches, heads, rows = study._ref_subset(big)
    assert batches == [0, 3] and len(heads) == 3 and len(rows) <= 256
    assert rows[0] == 0 and rows[-1] == 32767
    assert len({h // 4 for h in heads}) == 3  # three different key/value groups


def test_study_unsupported_peers():
    inputs = study.make_inputs(dict(SHAPE, causal=False), torch.float16, "cpu")
    with pytest.raises(study.Unsupported, match="causal"):
        study.impls()["seed_attention"](inputs)
    inputs = study.make_inputs(SHAPE, torch.float16, "cpu")
    with pytest.raises(study.Unsupported, match="GQA"):
        study.impls()["seed_attention"](inputs)


def test_study_work_and_memory():
    big = {"batch": 4, "heads_q": 32, "heads_kv": 32, "seqlen_q": 16384, "seqlen_k": 16384,
           "head_dim": 128, "causal": True}
    nbytes, flops = study.work(big, "float16")
    assert nbytes == 4 * 2 * 4 * 32 * 16384 * 128
    assert flops == 4 * 4 * 32 * 16384 * 16384 * 128 / 2
    io = study.memory_bytes("ours", big, "float16")
    assert io == nbytes
    assert study.memory_bytes("eager", big, "float16") == io + 2 * 2 * 4 * 32 * 16384 * 16384
    ceiling = study.ceiling("bfloat16", {"matmul_bf16_tflops": 680.0, "datasheet_bf16_tflops": 989.0})
    assert (ceiling.metric, ceiling.measured, ceiling.datasheet) == ("tflops", 680.0, 989.0)
    assert math.isclose(study.tolerance("float16"), 1e-2)


# ---- inputs that require grad: the kernels are forward-only

@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_inputs_requiring_grad_raise(which):
    args = _bad()
    args[which] = args[which].clone().requires_grad_()
    with pytest.raises(ValueError, match=f"attention has no backward: .*torch.no_grad\\(\\) \\({which} requires grad"):
        attention(**args)
    with pytest.raises(ValueError, match="has no backward"):
        attn._forward(args["q"], args["k"], args["v"], False, None)


def test_inputs_requiring_grad_run_with_grad_mode_off(poison):
    q, k, v = (t.requires_grad_() for t in _inputs(1, 2, 1, 9, 12, 64, torch.float16))
    for mode in (torch.no_grad, torch.inference_mode):
        with mode():
            out = attention(q, k, v, causal=True)
        assert out.grad_fn is None
        assert _rel(out, attn.reference(q.detach(), k.detach(), v.detach(), True)) < TOL[torch.float16]


# ---- NaN inputs and rows that see no key: the reference keeps the kernel's conventions

def _nan_inputs():
    q, k, v = _inputs(1, 2, 1, 40, 17, 64, torch.float16)   # causal: rows 0..22 see no key
    q[0, 0, 30] = float("nan")      # a row that sees keys: NaN
    q[0, 1, 5] = float("nan")       # a row that sees no key: still zero
    k[0, 0, 10] = float("nan")      # key 10: seen by rows 33.. only (row i sees keys j <= i - 23)
    return q, k, v


def _nan_rows(t):
    return torch.isnan(t).any(dim=-1).nonzero().tolist()


def test_reference_keeps_nan_where_the_kernel_does(poison):
    q, k, v = _nan_inputs()
    out, ref = attention(q, k, v, causal=True), attn.reference(q, k, v, True)
    nan_rows = [[0, 0, 30]] + [[0, h, i] for h in (0, 1) for i in range(33, 40) if [h, i] != [0, 30]]
    assert _nan_rows(ref) == sorted(nan_rows)
    assert _nan_rows(out) == _nan_rows(ref)
    seen = ~torch.isnan(ref)
    assert torch.equal(ref[:, :, :23], torch.zeros_like(ref[:, :, :23]))          # no key: zero
    assert torch.equal(out[:, :, :23], torch.zeros_like(out[:, :, :23]))
    assert (out.double()[seen] - ref[seen]).abs().max() < 1e-2


def test_reference_keeps_nan_without_a_mask(poison):
    q, k, v = _inputs(1, 2, 2, 9, 12, 64, torch.float16)
    q[0, 1, 4] = float("nan")
    out, ref = attention(q, k, v), attn.reference(q, k, v)
    assert _nan_rows(ref) == [[0, 1, 4]] == _nan_rows(out)
    k[0, 0, 3] = float("nan")       # a key every query of head 0 sees
    assert len(_nan_rows(attn.reference(q, k, v))) == 9 + 1
    assert _nan_rows(attention(q, k, v)) == _nan_rows(attn.reference(q, k, v))


def test_reference_nan_values_reach_only_the_rows_that_see_them(poison):
    q, k, v = _inputs(1, 1, 1, 8, 8, 64, torch.float16)
    v[0, 0, 5, 7] = float("nan")    # value of key 5, column 7: rows 5.. see it
    ref = attn.reference(q, k, v, True)
    assert torch.isnan(ref[0, 0, 5:, 7]).all() and not torch.isnan(ref[0, 0, :5]).any()
    assert not torch.isnan(ref[0, 0, :, :7]).any() and not torch.isnan(ref[0, 0, :, 8:]).any()
    clean = v.clone()
    clean[0, 0, 5, 7] = 0.0
    torch.testing.assert_close(ref[0, 0, :5], attn.reference(q, k, clean, True)[0, 0, :5])


def test_reference_rows_without_keys_are_zero_whatever_their_inputs(poison):
    q, k, v = _inputs(1, 1, 1, 6, 2, 64, torch.float16)     # rows 0..3 see no key
    q[0, 0, :4] = float("nan")
    v[0, 0, 1] = float("inf")
    ref = attn.reference(q, k, v, True)
    assert torch.equal(ref[0, 0, :4], torch.zeros(4, 64, dtype=torch.float64))
    assert torch.isinf(ref[0, 0, 5]).all() and torch.isfinite(ref[0, 0, 4]).all()   # row 5 sees key 1
    # the kernel's keyless rows share their query block with rows that see key 1, so 0 * inf
    # reaches them there (the documented exception); with finite values they are zero
    v[0, 0, 1] = 1.0
    assert torch.equal(attention(q, k, v, causal=True)[0, 0, :4], torch.zeros(4, 64, dtype=torch.float16))
    q, k, v = _inputs(1, 2, 2, 3, 0, 64, torch.float16)     # no keys at all
    for causal in (True, False):
        assert torch.equal(attn.reference(q, k, v, causal), torch.zeros(1, 2, 3, 64, dtype=torch.float64))


def test_study_reference_shares_the_conventions():
    shape = {"batch": 1, "heads_q": 2, "heads_kv": 1, "seqlen_q": 40, "seqlen_k": 17, "head_dim": 64,
             "causal": True}
    q, k, v = _nan_inputs()
    inputs = {"q": q, "k": k, "v": v, "causal": True, "shape": shape,
              "ref_batches": [0], "ref_heads": [0, 1], "ref_rows": list(range(40))}
    torch.testing.assert_close(study.reference(inputs), attn.reference(q, k, v, True), equal_nan=True)


# ---- the plan cache (kernels._plans)

@pytest.fixture
def fresh_plans(monkeypatch):
    monkeypatch.setattr(attn, "_PLANS", {})


@pytest.fixture
def counted_checks(monkeypatch):
    """Calls of attn._check, which a repeat call with a planned layout skips."""
    calls = []
    original = attn._check
    monkeypatch.setattr(attn, "_check", lambda *a: calls.append(1) or original(*a))
    return calls


def _offset(shape, dtype, elements):
    """A tensor of `shape` starting `elements` elements into a fresh buffer."""
    n = math.prod(shape)
    return torch.randn(n + elements).to(dtype)[elements:].view(shape)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [True, False])
def test_repeat_call_reuses_the_plan(fresh_plans, counted_checks, poison, dtype, causal):
    q, k, v = _inputs(1, 4, 2, 33, 40, 64, dtype)
    outs = [attention(q, k, v, causal=causal) for _ in range(3)]
    assert len(counted_checks) == 1 and len(attn._PLANS) == 1
    (plan,) = attn._PLANS.values()
    assert plan.fast is None                       # the interpreter launches through Triton
    for out in outs[1:]:
        torch.testing.assert_close(out, outs[0], rtol=0, atol=0)
    assert _rel(outs[-1], attn.reference(q, k, v, causal)) < TOL[dtype]
    q2, k2, v2 = _inputs(1, 4, 2, 33, 40, 64, dtype)   # same layout, other values: same plan
    assert _rel(attention(q2, k2, v2, causal=causal), attn.reference(q2, k2, v2, causal)) < TOL[dtype]
    assert len(counted_checks) == 1 and len(attn._PLANS) == 1


def test_a_plan_is_never_reused_for_another_layout(fresh_plans, counted_checks, poison):
    """Other strides, dtype, causal, sm_scale (value or type) or pointer offset: a plan of its
    own, each still matching the reference; a 16-byte offset is the same layout."""
    shape_q, shape_kv = (1, 4, 33, 64), (1, 2, 40, 64)
    q, k, v = _inputs(1, 4, 2, 33, 40, 64, torch.float16)
    k_t = k.transpose(1, 2).contiguous().transpose(1, 2)            # (B, Nk, Hkv, D) storage
    variants = [
        ("base", (q, k, v), True, None),
        ("strides", (q, k_t, v), True, None),
        ("dtype", (q.bfloat16(), k.bfloat16(), v.bfloat16()), True, None),
        ("causal", (q, k, v), False, None),
        ("scale", (q, k, v), True, 0.3),
        ("scale type", (q, k, v), True, 1),
        ("scale float", (q, k, v), True, 1.0),
        ("offset", (_offset(shape_q, torch.float16, 1), k, v), True, None),      # 2 bytes off
        ("v offset", (q, k, _offset(shape_kv, torch.float16, 3)), True, None),
    ]
    for n, (name, (q_, k_, v_), causal, scale) in enumerate(variants, start=1):
        for _ in range(2):                                          # planned, then replayed
            out = attention(q_, k_, v_, causal=causal, sm_scale=scale)
            assert _rel(out, attn.reference(q_, k_, v_, causal, scale)) < TOL[q_.dtype], name
        assert len(attn._PLANS) == n and len(counted_checks) == n, name
    plans = list(attn._PLANS.values())
    assert plans[0].meta["USE_TMA"] and plans[1].meta["USE_TMA"]     # k_t's rows are still 16-byte aligned
    assert not plans[7].meta["USE_TMA"] and not plans[8].meta["USE_TMA"]   # offsets: the pointer path
    assert plans[3].meta["CAUSAL"] is False and plans[4].rest != plans[0].rest
    aligned_view = _offset(shape_q, torch.float16, 8)               # 16 bytes off: the base layout
    out = attention(aligned_view, k, v, causal=True)
    assert len(attn._PLANS) == len(variants) and len(counted_checks) == len(variants)
    assert _rel(out, attn.reference(aligned_view, k, v, True)) < TOL[torch.float16]


def test_bad_inputs_on_a_repeat_call_still_raise(fresh_plans):
    q, k, v = _inputs(1, 4, 2, 8, 8, 64, torch.float16)
    attention(q, k, v, causal=True)
    attention(q, k, v, causal=True)
    assert len(attn._PLANS) == 1
    for which in ("q", "k", "v"):                                   # requires_grad is not in the key
        args = dict(q=q, k=k, v=v)
        args[which] = args[which].clone().requires_grad_()
        with pytest.raises(ValueError, match=f"has no backward.*{which} requires grad"):
            attention(**args, causal=True)
        with torch.no_grad():                                       # grad mode off: runs
            out = attention(**args, causal=True)
        assert _rel(out, attn.reference(q, k, v, True)) < TOL[torch.float16]
    with pytest.raises(ValueError, match="causal"):
        attention(q, k, v, causal=1)                                # == True, hashes as True
    with pytest.raises(ValueError, match="sm_scale"):
        attention(q, k, v, causal=True, sm_scale=-1.0)
    with pytest.raises(ValueError, match="sm_scale"):
        attention(q, k, v, causal=True, sm_scale=[1.0])            # unhashable: no key
    with pytest.raises(ValueError, match="dtype float32"):
        attention(q.float(), k.float(), v.float(), causal=True)
    with pytest.raises(ValueError, match="torch.Tensor"):
        attention(q, k.tolist(), v, causal=True)
    assert len(attn._PLANS) == 1                                    # the grad-off calls reused it; bad ones kept none


def test_empty_and_keyless_repeat_calls(fresh_plans, poison):
    for _ in range(2):
        q, k, v = _inputs(1, 2, 2, 0, 5, 64, torch.float16)
        assert attention(q, k, v).shape == (1, 2, 0, 64)
        q, k, v = _inputs(1, 2, 2, 3, 0, 64, torch.float16)
        assert torch.equal(attention(q, k, v, causal=True), torch.zeros(1, 2, 3, 64, dtype=torch.float16))


def test_an_explicit_config_bypasses_the_plans(fresh_plans, counted_checks):
    q, k, v = _inputs(1, 2, 1, 20, 45, 32, torch.float16)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "WARP_SPEC": False, "num_warps": 4, "num_stages": 1}
    for _ in range(2):
        out = attn._forward(q, k, v, True, None, config=cfg)
        assert _rel(out, attn.reference(q, k, v, True)) < TOL[torch.float16]
    assert len(counted_checks) == 2 and not attn._PLANS


TUNED = {"BLOCK_M": 16, "BLOCK_N": 16, "WARP_SPEC": False, "num_warps": 4, "num_stages": 1}


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("layout", ["descriptor", "pointer"])
def test_gpu_plans_replay_the_first_launch(fresh_plans, poison, monkeypatch, replay, layout, causal):
    """The direct launch a GPU plan keeps gets the first launch's arguments with the call's
    q, k, v and a fresh output, and the grid and constexprs of the config that launch used.

    The autotuner (which times configs on a GPU) is replaced by a launch of TUNED, and `Launch`
    (which needs a GPU) by one that records its arguments and runs them through the interpreter.
    """
    launches, allocators, replays = [], [], replay.calls
    monkeypatch.setattr(attn, "interpreting", lambda: False)
    monkeypatch.setattr(attn, "_use_tma", lambda *ts: all(attn._tma_compatible(t) for t in ts))
    monkeypatch.setattr(attn, "_precompile", lambda grid, args, meta: None)
    monkeypatch.setattr(attn.triton, "set_allocator", allocators.append)
    monkeypatch.setattr(attn, "Launch", replay.launcher(lambda grid, args: attn._attn_fwd[grid](*args)))

    class Tuned:
        def __getitem__(self, grid):
            def run(*args, **meta):
                cfg = dict(TUNED, EVEN_K=args[23] % TUNED["BLOCK_N"] == 0)      # args[23]: N_K
                launches.append(args)
                attn._attn_fwd[grid](*args, **meta, **cfg)
                return "compiled"
            return run
    monkeypatch.setattr(attn, "_attn_fwd_tuned", Tuned())

    q, k, v = _strided(layout)                                      # (2, 4, 37, 64), Nk = 45
    use_tma = layout == "descriptor"
    first = attention(q, k, v, causal=causal)
    assert len(launches) == 1 and not replays
    (plan,) = attn._PLANS.values()
    launch, rest = plan.fast
    assert launch.grid == (3, 8)                                    # cdiv(37, TUNED's BLOCK_M), B * Hq
    assert rest == (*launches[0][4:], 64, 64, causal, use_tma, 16, 16, False, False)
    second = attention(q, k, v, causal=causal)
    (args,) = replays
    assert len(launches) == 1                                       # replayed, not launched anew
    assert args[:3] == (q, k, v) and args[3] is second and args[4:] == rest
    assert len(allocators) == (2 if use_tma else 0)                 # the scratch allocator, every TMA launch
    torch.testing.assert_close(second, first, rtol=0, atol=0)
    assert _rel(second, attn.reference(q, k, v, causal)) < TOL[torch.float16]
    q2 = q.clone().transpose(1, 2).contiguous().transpose(1, 2) if use_tma else q.contiguous()
    third = attention(q2, k, v, causal=causal)                      # other strides: launched, not replayed
    assert len(launches) == 2 and len(replays) == 1 and len(attn._PLANS) == 2
    assert _rel(third, attn.reference(q2, k, v, causal)) < TOL[torch.float16]


def test_dense_masks_counts_causal_bias_fallback_and_restores():
    from torch.nn.attention.bias import CausalBias, causal_lower_right
    original = CausalBias._materialize
    with study._dense_masks() as built:
        mask = causal_lower_right(3, 5)._materialize()
    assert len(built) == 1 and CausalBias._materialize is original
    assert mask.tolist() == [[True, True, True, False, False], [True] * 4 + [False], [True] * 5]


@pytest.mark.parametrize("materializes", [True, False])
def test_bottom_right_peer_given_a_dense_mask_is_unsupported(monkeypatch, materializes):
    """A backend that SDPA serves with a dense (Nq, Nk) mask is another kernel: `unsupported`."""
    from rooflab.bench import Unsupported

    def sdpa(q, k, v, attn_mask=None, **kwargs):
        if materializes:
            attn_mask._materialize(q.device)
        return q

    monkeypatch.setattr(study.F, "scaled_dot_product_attention", sdpa)
    q, k = torch.zeros(1, 2, 4, 8), torch.zeros(1, 2, 12, 8)
    inputs = {"q": q, "k": k, "v": k}
    if materializes:
        with pytest.raises(Unsupported, match="dense 4x12 mask"):
            study._sdpa_bottom_right("sdpa_cudnn", q, k, k, inputs)
    else:
        assert study._sdpa_bottom_right("sdpa_flash", q, k, k, inputs)() is q
