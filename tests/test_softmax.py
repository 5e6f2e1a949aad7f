"""kernels.fused_softmax in Triton's CPU interpreter against a float64 reference.

Every strategy is forced directly (STRATEGIES[name].run into a NaN-poisoned output) and reached
through the dispatch of softmax(); rows hold -inf entries, an all -inf row (NaN, as torch gives)
and large magnitudes. Tolerances compare the output to the float64 softmax of the same (rounded)
input: fp32 rtol 1e-5 / atol 1e-6, fp16 rtol 2e-3 / atol 1e-5, bf16 rtol 1.6e-2 / atol 1e-4
(about two units in the last place of the output's dtype; NaN must match NaN exactly).

The GPU-only launch paths run on CPU tensors with stand-ins: a plan's direct launch (`Launch`)
and, for split, the fused cooperative launch, which the interpreter cannot run (its programs run
one after another, so a row's wait never ends): a stand-in runs the fused launch's arguments as
the partials and finishing phases, on fake streams.
"""
import importlib

import pytest
import torch
import triton

import kernels
import kernels._checks
from tests.conftest import POISONS
from kernels.fused_softmax import STRATEGIES, Config, choose, config, reference, softmax, traffic_bytes

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6),
       torch.float16: dict(rtol=2e-3, atol=1e-5),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-4)}
NINF = float("-inf")
sm = importlib.import_module("kernels.fused_softmax")


def logits(rows, cols, dtype, scale=3.0):
    """(rows, cols) logits with -inf entries and, from 3 rows up, an all -inf row; from 5 rows up
    a +inf and a NaN inside a row (torch gives NaN for all of either row)."""
    x = torch.randn(rows, cols) * scale
    x[0, ::3] = NINF                          # -inf entries (all of a length-1 row)
    if rows >= 3:
        x[2] = NINF                           # an all -inf row: torch gives NaN
    if rows >= 5:
        x[3, cols // 2] = float("inf")
        x[4, (cols - 1) // 3] = float("nan")
    return x.to(dtype)


def check(out, x, dim=-1):
    ref = reference(x, dim)
    assert out.shape == x.shape and out.dtype == x.dtype
    torch.testing.assert_close(out.to(torch.float64), ref, equal_nan=True, **TOL[x.dtype])


def poisoned_twice(x, run, what):
    """run(out) into an output filled with each of the conftest's poisons (NaN, then 7.0): an element
    it leaves unwritten differs between the two, whatever its answer (NaN hides an all -inf row's).
    Returns the last output."""
    outs = []
    for value in POISONS.values():
        out = torch.full(x.shape, value, dtype=x.dtype)
        run(out)
        outs.append(out)
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0, equal_nan=True,
                               msg=lambda m: f"{what} left elements unwritten: {m}")
    return outs[-1]


def run_poisoned(name, x, cfg=None):
    """The strategy run through poisoned_twice."""
    def run(out):
        assert STRATEGIES[name].run(x, out=out, cfg=cfg) is out
    return poisoned_twice(x, run, name)


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


PEELED = {"row": lambda cols: Config(block=triton_pow2(cols), num_warps=4),
          "looped": lambda cols: Config(block=16, num_warps=4),
          "split": lambda cols: Config(block=16, num_warps=4, seg_tiles=1),
          "split_2": lambda cols: Config(block=16, num_warps=4, seg_tiles=2)}


def triton_pow2(n):
    return 1 << (n - 1).bit_length()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("cols", [1, 3, 9, 33, 101])
@pytest.mark.parametrize("name", list(PEELED))
def test_rows_off_the_vector_boundary(name, cols, dtype):
    """Odd row lengths: every row starts at another offset from a 16-byte boundary, so row,
    looped and split peel a head and a tail around an aligned body (rows shorter than the head
    included), with -inf entries and an all -inf row in the body, the head and the tail."""
    x = logits(11, cols, dtype)
    x[4, -1] = NINF
    x[5, 0] = 1e4 if dtype != torch.float16 else 6e4       # a large magnitude at a row's edge
    assert sm._peeled_vec(x, torch.empty_like(x)) == 16 // x.element_size()
    check(run_poisoned(name.split("_")[0], x, PEELED[name](cols)), x)


def test_looped_output_rows_at_another_offset_narrow_the_vector():
    """An output whose rows sit at other offsets from the boundary than x's: no common width."""
    x = logits(6, 37, torch.float16)
    wide = torch.full((6, 40), float("nan"), dtype=torch.float16)
    out = wide[:, :37]                                 # row stride 40 against x's 37
    assert sm._peeled_vec(x, out) == 1
    STRATEGIES["looped"].run(x, out=out, cfg=Config(block=16, num_warps=4))
    check(out, x)
    assert wide[:, 37:].isnan().all()                  # nothing written past the rows


@pytest.mark.parametrize("first,vec", [(0, 8), (3, 1)])
def test_looped_strided_input_rows(first, vec):
    """x and out rows every 24 elements (column slices of 17): rows of x and out at the same
    offsets (width 8 in fp16) unless x's first element is off the boundary (width 1)."""
    base = logits(7, 24, torch.float16)
    x = base[:, first:first + 17]
    wide = torch.full((7, 24), float("nan"), dtype=torch.float16)
    out = wide[:, :17]
    assert sm._peeled_vec(x, out) == vec
    STRATEGIES["looped"].run(x, out=out, cfg=Config(block=8, num_warps=4))
    check(out, x)
    assert wide[:, 17:].isnan().all()


@pytest.mark.parametrize("rows,cols,dtype,tile_rows,warps", [
    (4096, 7, torch.float16, 16, 1),          # 4096 // 132 = 31 rows an SM: 16 a program, 128 elements
    (256, 256, torch.float32, 2, 1),          # fewer rows than SMs: 512-element tiles on a warp
    (512, 512, torch.float16, 1, 1),
    (1024, 128, torch.float32, 4, 1),
    (1024, 256, torch.bfloat16, 2, 1),
    (2048, 256, torch.float32, 8, 4),         # every SM a tile of the table's 2048 elements
    (65536, 128, torch.float16, 16, 4),       # enough rows: the table's 2048-element tiles
    (4096, 1, torch.float16, 512, 4),         # one-column rows keep their 512-row tiles
])
def test_small_rows_problems_give_every_sm_a_tile(rows, cols, dtype, tile_rows, warps):
    cfg = config("rows", cols, dtype, rows=rows, sms=132)
    assert (cfg.rows, cfg.num_warps) == (tile_rows, warps)
    x = logits(rows, cols, dtype)
    check(run_poisoned("rows", x, cfg), x)


def test_one_column_rows_take_bigger_tiles():
    assert config("rows", 1, torch.float32).rows == sm.ROWS_1COL_LARGE_TILE_ROWS        # a large problem
    assert config("rows", 1, torch.float16, rows=1048576, sms=132).rows == sm.ROWS_1COL_LARGE_TILE_ROWS
    assert config("rows", 1, torch.float16, rows=4096, sms=132).rows == sm.ROWS_MAX_TILE_ROWS_1COL
    assert config("rows", 1, torch.float32, rows=1500, sms=132).rows == sm.ROWS_MAX_TILE_ROWS_1COL
    assert config("rows", 7, torch.float32).rows == sm.ROWS_MAX_TILE_ROWS
    x = logits(1500, 1, torch.float32)  # 512-row tiles, the last one partly empty
    check(run_poisoned("rows", x, config("rows", 1, torch.float32, rows=1500, sms=132)), x)
    x = logits(2500, 1, torch.float32)  # 1024-row tiles, the last one partly empty
    check(run_poisoned("rows", x, config("rows", 1, torch.float32)), x)


def test_split_tiles_hold_the_same_bytes_in_every_dtype():
    for dtype, block in [(torch.float32, 4096), (torch.float16, 8192), (torch.bfloat16, 8192)]:
        for rows, cols in [(16, 1 << 22), (64, 1 << 20)]:
            cfg = config("split", cols, dtype, rows=rows, sms=132)
            assert cfg.block == block
            assert cfg.block * torch.tensor([], dtype=dtype).element_size() == sm.SPLIT_TILE_BYTES


def test_split_rounds_of_short_segment_rows_take_two_tile_segments_on_four_warps():
    """Several rounds of rows of at most SPLIT_ROUNDS_MAX_SEGS 2-tile segments: 2-tile segments on 4
    warps, up to 6 programs an SM; longer rows, peeled 16-bit rows and problems that fit one round keep
    the table's."""
    rounds = Config(block=4096, num_warps=sm.SPLIT_ROUNDS_WARPS, per_sm=sm.SPLIT_ROUNDS_PER_SM,
                    seg_tiles=sm.SPLIT_ROUNDS_SEG_TILES)
    assert config("split", 1 << 20, torch.float32, rows=64, sms=132) == rounds        # 128 segments a row
    assert config("split", 131072, torch.float32, rows=1024, sms=132) == rounds
    assert config("split", 65537, torch.float32, rows=2048, sms=132) == rounds       # peeled fp32
    table = Config(block=4096, num_warps=sm.SPLIT_WARPS)                               # chosen at launch
    for dtype in (torch.float16, torch.bfloat16):                  # peeled 16-bit: 4 an SM, the table's
        assert config("split", 65537, dtype, rows=2048, sms=132) == Config(block=8192, num_warps=sm.SPLIT_WARPS)
    assert config("split", 65536, torch.float16, rows=2048, sms=132) == Config(      # aligned: 4 segments
        block=8192, num_warps=4, per_sm=sm.SPLIT_ROUNDS_PER_SM, seg_tiles=2)
    assert config("split", 1 << 22, torch.float32, rows=16, sms=132) == table          # 512 segments a row
    assert config("split", 1 << 22, torch.float16, rows=16, sms=132).seg_tiles == 0   # 256
    assert config("split", 262144, torch.float32, rows=8, sms=132) == table           # one round: 256 <= 528
    assert config("split", 262144, torch.float32) == table                             # rows unknown
    x = logits(3, 5 * 4096 + 8, torch.float32)    # the rounds' config through the interpreter's launches
    check(run_poisoned("split", x, Config(block=4096, num_warps=4, per_sm=6, seg_tiles=2)), x)


@pytest.mark.parametrize("name", ["row", "looped"])
def test_aligned_rows_skip_the_edges_code(name):
    """Rows on the vector boundary run without PEEL, odd rows with it; both match the reference."""
    x = logits(6, 4096, torch.float16)
    assert sm._access(x, torch.empty_like(x)) == (8, False)
    check(run_poisoned(name, x), x)
    x = logits(6, 4097, torch.float16)
    assert sm._access(x, torch.empty_like(x)) == (8, True)
    check(run_poisoned(name, x), x)


def test_looped_tiles():
    assert config("looped", 3001, torch.float16) == Config(block=sm.LOOPED_SHORT_BLOCK, num_warps=4)
    # 4097 columns: a 4096-column aligned body (one tile) and edges, not an 8192 block half empty
    assert config("looped", 4097, torch.float16) == Config(block=4096, num_warps=4)
    assert config("looped", 4097, torch.float32) == Config(block=4096, num_warps=8)
    assert config("row", 4097, torch.bfloat16).block == 4096
    assert config("looped", 7, torch.float32).block == 8          # shorter than PEEL_MIN_COLS: whole
    assert config("looped", 32768, torch.float16) == Config(block=8192, num_warps=8)    # 64 B a thread
    assert config("looped", 32768, torch.float32) == Config(block=8192, num_warps=16)
    assert config("looped", 4096, torch.float32) == Config(block=4096, num_warps=8)
    assert config("split", 1000, torch.float16, rows=3, sms=132).block == 1024     # short rows: one tile


def test_row_warps_follow_the_columns_the_block_covers():
    """A warp per 512 covered columns, rounded down to a power of two (4 to 32): a full block
    keeps the table's warps, a block filled half to three quarters takes half of them."""
    assert config("row", 4096, torch.float32).num_warps == 8
    assert config("row", 3072, torch.float32) == Config(block=4096, num_warps=4)
    assert config("row", 2056, torch.bfloat16) == Config(block=4096, num_warps=4)
    assert config("row", 4104, torch.float32) == Config(block=8192, num_warps=8)
    assert config("row", 6000, torch.bfloat16) == Config(block=8192, num_warps=8)
    assert config("row", 8192, torch.bfloat16).num_warps == 16
    assert config("row", 32768, torch.float32).num_warps == 32
    assert config("row", 1000, torch.float32) == Config(block=1024, num_warps=4)
    assert config("row", 4097, torch.float16) == Config(block=4096, num_warps=8)   # a 4096 body


def rows_launch(x: torch.Tensor, cfg: Config, out: torch.Tensor | None = None):
    """rows' launch of x into out (else a new tensor like x): ({argument name: value}, grid, options)."""
    kernel, grid, args, launch = sm._rows_args(x, torch.empty_like(x) if out is None else out, cfg)
    return dict(zip(kernel.arg_names, args)), grid, launch


def test_rows_tile_of_narrow_accesses_takes_one_warp():
    """Rows no access wider than one element divides (33, 65, 129, 511 columns) or than two (66, 130,
    258 columns), whose block is wider than a warp's 32 lanes, up to 512, go on one warp,
    ROWS_NARROW_TILE_ROWS[(access, block)] rows a tile (at most the table's); rows on a wider
    access, in a block a warp covers or in a wider block keep the table's tile."""
    cases = ((33, torch.float32, 1, 64, 16), (65, torch.float32, 1, 128, 8), (129, torch.bfloat16, 1, 256, 8),
             (511, torch.float32, 1, 512, 2), (66, torch.float32, 2, 128, 8), (130, torch.bfloat16, 2, 256, 8),
             (258, torch.float32, 2, 512, 2))
    for cols, dtype, vec, block, tile in cases:
        cfg = config("rows", cols, dtype)
        assert cfg.block == block and cfg.num_warps > 1 and sm.ROWS_NARROW_TILE_ROWS[(vec, block)] == tile <= cfg.rows
        x = logits(40, cols, dtype)
        args, grid, launch = rows_launch(x, cfg)
        assert args["VEC"] == vec and launch["num_warps"] == 1 and args["ROWS"] == tile and grid == (triton_cdiv(40, tile),)
    small = Config(block=256, num_warps=2, rows=2)     # a small problem's tile: fewer rows than the rule's
    x = logits(40, 129, torch.float32)
    args, grid, launch = rows_launch(x, small)
    assert launch["num_warps"] == 1 and args["ROWS"] == 2 and grid == (20,)
    for cols, dtype in ((36, torch.float32), (132, torch.bfloat16), (7, torch.float32), (1025, torch.float32)):
        # 16-byte rows, 8-byte accesses, a block a warp covers, a 2048 block: the table's tile
        cfg = config("rows", cols, dtype)
        x = logits(40, cols, dtype)
        args, grid, launch = rows_launch(x, cfg)
        assert launch["num_warps"] == cfg.num_warps and args["ROWS"] == cfg.rows, cols
    for cols in (33, 65, 66, 129, 130, 301, 511):
        for dtype in DTYPES:
            x = logits(37, cols, dtype)
            x[0, ::5] = NINF
            x[1] = NINF
            x[2, 3] = 1e4 if dtype != torch.float32 else 1e30
            check(run_poisoned("rows", x), x)


@pytest.fixture
def no_static_lengths(monkeypatch):
    """No row length compiled in yet (earlier tests may have used up ROWS_STATIC_MAX_LENGTHS)."""
    monkeypatch.setattr(sm, "_STATIC_LENGTHS", set())


def test_rows_static_kernel_where_rows_are_contiguous(no_static_lengths):
    """Contiguous rows in blocks of 2 to ROWS_STATIC_MAX_BLOCK columns take the kernel compiled for
    their length (N_COLS, EVEN where the tile divides the rows); a strided x or out, a one-column
    block or a wider one keep the kernel that takes the length and strides as arguments."""
    for rows, cols, dtype in ((40, 350, torch.float32), (37, 258, torch.bfloat16), (1, 7, torch.float16),
                              (64, 512, torch.float16)):
        cfg = config("rows", cols, dtype)
        args, _, _ = rows_launch(logits(rows, cols, dtype), cfg)
        assert "x_row_stride" not in args and args["N_COLS"] == cols and args["n_rows"] == rows
        assert args["EVEN"] == (rows % args["ROWS"] == 0)
    wide = logits(40, 700, torch.float32)[:, :350]
    for x, out in ((wide, None), (logits(40, 350, torch.float32), torch.empty(40, 700)[:, :350]),
                   (logits(40, 1, torch.float32), None), (logits(40, 1000, torch.float16), None)):
        args, _, _ = rows_launch(x, config("rows", x.shape[1], x.dtype), out)
        assert args["x_row_stride"] == x.stride(0) and "N_COLS" not in args


def test_rows_static_lengths_are_bounded(monkeypatch, no_static_lengths):
    """Past ROWS_STATIC_MAX_LENGTHS (length, dtype) pairs a new length takes the argument kernel;
    the lengths already compiled in keep theirs."""
    monkeypatch.setattr(sm, "ROWS_STATIC_MAX_LENGTHS", 2)
    static = {}
    for cols, dtype in ((100, torch.float32), (100, torch.float16), (101, torch.float32), (100, torch.float32),
                        (100, torch.float16)):
        args, _, _ = rows_launch(logits(8, cols, dtype), config("rows", cols, dtype))
        static[(cols, dtype)] = "N_COLS" in args
    assert static == {(100, torch.float32): True, (100, torch.float16): True, (101, torch.float32): False}
    assert sm._STATIC_LENGTHS == {(100, torch.float32), (100, torch.float16)}


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp32", "fp16", "bf16"])
def test_rows_static_kernel_matches_reference(dtype, no_static_lengths):
    """The compiled-length kernel against float64 at tiles that divide the rows and tiles that do not
    (-inf entries, an all -inf row, a large magnitude), the output poisoned; and a strided input of
    the same length through the other kernel."""
    for rows, cols in ((64, 350), (37, 350), (5, 33), (96, 258), (1, 130), (3, 2)):
        x = logits(rows, cols, dtype)
        assert "N_COLS" in rows_launch(x, config("rows", cols, dtype))[0]
        x[0, ::3] = NINF
        x[-1] = NINF
        x[rows // 2, 1] = 1e4 if dtype != torch.float32 else 1e30
        check(run_poisoned("rows", x), x)
    x = logits(40, 700, dtype)[:, :350]
    x[3] = NINF
    check(run_poisoned("rows", x), x)


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


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows", [1, 7, 1030])
def test_one_column_rows_are_one_or_nan(rows, dtype):
    """A one-column row is 1 where its value is finite, however large, and NaN where it is -inf,
    +inf or NaN, as torch.softmax gives: the rows kernel's one-column tile takes no exponential."""
    x = torch.randn(rows, 1) * 3
    specials = [NINF, float("inf"), float("nan"), torch.finfo(dtype).max, -torch.finfo(dtype).max,
                torch.finfo(dtype).tiny]
    x[:len(specials), 0] = torch.tensor(specials[:rows])
    x = x.to(dtype)
    out = run_poisoned("rows", x)
    check(out, x)
    assert torch.equal(out.isnan(), ~x.isfinite())
    check(softmax(x), x)


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
    assert choose(16384, 1024, torch.float16, sms) == "rows"        # 16-bit, >= 64 rows an SM
    assert choose(16384, 1024, torch.float32, sms) == "row"         # 64 MiB: under LOOPED_MIN_BYTES
    assert choose(32768, 1000, torch.float32, sms) == "row"         # 125 MiB: under LOOPED_MIN_BYTES
    assert choose(4096, 2048, torch.float32, sms) == "row"
    assert choose(1000, 1024, torch.bfloat16, sms) == "row"         # 16-bit, fewer rows
    assert choose(8192, 4096, torch.float16, sms) == "row"          # 64 MiB
    assert choose(8192, 4096, torch.float32, sms) == "row"          # 128 MiB
    assert choose(16384, 4096, torch.float32, sms) == "looped"      # 256 MiB: LOOPED_MIN_BYTES
    assert choose(16384, 4096, torch.bfloat16, sms) == "row"        # 128 MiB in 16 bits
    assert choose(32768, 4096, torch.bfloat16, sms) == "looped"     # 256 MiB in 16 bits
    assert choose(32768, 4096, torch.float16, sms) == "looped"
    assert choose(32768, 4096, torch.float32, sms) == "looped"      # 512 MiB
    assert choose(65536, 2048, torch.float16, sms) == "row"         # 256 MiB, 16-bit rows under
    assert choose(49152, 3072, torch.bfloat16, sms) == "row"        # LOOPED_LARGE_MIN_COLS_16BIT
    assert choose(65536, 2048, torch.float32, sms) == "looped"      # 512 MiB fp32
    assert choose(4096, 8192, torch.float32, sms) == "row"          # longer than LOOPED_LARGE_MAX_COLS
    assert choose(16384, 4097, torch.float16, sms) == "row"         # a 4096 body and edges
    assert choose(16384, 4097, torch.float32, sms) == "row"         # longer than LOOPED_LARGE_MAX_COLS
    assert choose(16384, 3001, torch.float16, sms) == "row"         # body fills under 3/4 of 4096
    assert choose(8192, 4104, torch.float32, sms) == "row"          # ... or half of 8192
    assert choose(512, 3000, torch.bfloat16, sms) == "row"
    assert choose(16384, 6144, torch.float16, sms) == "row"         # three quarters full
    assert choose(65536, 3000, torch.float32, sms) == "looped"      # 750 MiB: LOOPED_MIN_BYTES
    assert choose(4096, 16384, torch.float32, sms) == "row"
    assert choose(8192, 16384, torch.float16, sms) == "looped"      # 16-bit, over 8192 columns, >= 4 rows an SM
    assert choose(300, 16384, torch.bfloat16, sms) == "row"         # ... fewer rows: row as before
    assert choose(8192, 8192, torch.bfloat16, sms) == "row"
    assert choose(4096, 32768, torch.bfloat16, sms) == "looped"
    assert choose(4096, 32768, torch.float32, sms) == "row"         # fp32 keeps row up to 32768
    assert choose(512, 32768, torch.float32, sms) == "row"
    assert choose(1024, 32768, torch.float16, sms) == "looped"
    assert choose(2048, 65537, torch.float16, sms) == "split"         # a 128 KiB body: over LOOPED_MAX_ROW_BYTES
    assert choose(4096, 32768, torch.float16, sms) == "looped"        # a 64 KiB body
    assert choose(2048, 65537, torch.float32, sms) == "split"         # a 256 KiB body: over LOOPED_MAX_ROW_BYTES
    assert choose(1024, 65536, torch.float32, sms) == "split"
    assert choose(64, 4096, torch.float16, sms) == "split"          # too few rows to fill the GPU
    assert choose(1024, 131072, torch.bfloat16, sms) == "split"       # 256 KiB rows
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
    ((torch.randn(2, 3).to_sparse(),), "sparse_coo tensor"),
    ((torch.randn(2, 3).to_sparse_csr(),), "sparse_csr tensor"),
    ((torch.nested.nested_tensor([torch.randn(2), torch.randn(3)]),), "nested tensor"),
    ((torch._neg_view(torch.randn(2, 3)),), "lazily negated"),
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
    assert g.requires_grad                         # so the refusal below is the backward's, not a leaf's
    with pytest.raises(RuntimeError, match="differentiate twice"):
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
    replay.track_outputs(sm)
    for shape in [(2, 3, 40), (5, 700), (3, 2000)]:
        x = (torch.randn(*shape) * 3).to(torch.float16)
        replay.track(x)
        first = softmax(x)
        n, m = len(replays), len(launches)
        second = softmax(x)
        assert len(replays) == n + 1 and len(launches) == m     # replayed, not launched anew
        kernel, args = launches[-1]
        replayed = replays[-1]
        assert replayed[1] is x and replayed[0] is second and replayed[2:] == args[2:]
        torch.testing.assert_close(second, first, rtol=0, atol=0, equal_nan=True)
        check(second, x)


@pytest.mark.parametrize("hook", [False, True])
def test_gpu_plans_replay_through_the_lean_launcher_unless_hooked(fresh_plans, poison, monkeypatch, replay, hook):
    """Where the lean launcher can describe the kernel, a repeat call passes it out's and x's
    addresses and nothing else; with a Triton launch hook registered, the call goes through
    Triton's launcher (which calls the hooks)."""
    launches = []
    replay.lean = True
    monkeypatch.setattr(sm, "interpreting", lambda: False)
    monkeypatch.setattr(sm, "hooked", lambda: hook)
    monkeypatch.setattr(sm, "Launch", replay.launcher(lambda grid, args: launches[-1][0][grid](*args)))

    def recording(x, out, cfg):
        kernel, grid, args, options = sm._row_args(x, out, cfg)
        launches.append((kernel, args))
        return kernel, grid, args, options
    monkeypatch.setitem(STRATEGIES, "row", sm.Strategy("row", STRATEGIES["row"].max_cols, sm._one_launch(recording)))
    monkeypatch.setattr(sm, "choose", lambda rows, cols, dtype, sms: "row")
    replay.track_outputs(sm)
    x = (torch.randn(5, 700) * 3).to(torch.float16)
    replay.track(x)
    first = softmax(x)
    second = softmax(x)
    assert len(launches) == 1
    calls = replay.calls if hook else replay.lean_calls
    assert len(calls) == 1 and not (replay.lean_calls if hook else replay.calls)
    assert calls[0][0] is second and calls[0][1] is x and calls[0][2:] == launches[0][1][2:]
    torch.testing.assert_close(second, first, rtol=0, atol=0, equal_nan=True)
    check(second, x)


# ---- split: the fused launch a GPU plan keeps, bound to its stream ----

SPLIT_ARGS = list(sm._split_kernel.arg_names)
COMPILED = object()                               # what the stand-in's fused launch "compiles"


@pytest.mark.parametrize("cfg,rows,cols", [
    (None, 3, 5000),                                           # the table's setting: one segment
    (Config(block=64, num_warps=4), 4, 200),                   # one-tile segments
    (Config(block=64, num_warps=4, seg_tiles=3), 3, 1000),     # segments of three tiles
])
def test_split_launcher_in_the_interpreter_is_two_launches(poison, cfg, rows, cols):
    """In the interpreter the split is its two launches: nothing a plan could launch directly."""
    x = logits(rows, cols, torch.bfloat16)
    out = torch.empty(rows, cols, dtype=x.dtype)
    assert sm._launch_split(x, out, cfg or config("split", cols, x.dtype, rows)) is None
    check(out, x)


def test_split_two_launches_share_the_kept_workspace(poison, monkeypatch):
    """The two-launch split takes its partials buffer from _slots, as the fused launch does: repeat
    calls reuse one buffer, its words left with a launch's tag (never zeroed again), and every call
    still matches the reference, whichever tag the buffer holds when it starts."""
    monkeypatch.setattr(sm, "_SLOTS", {})
    cfg = Config(block=64, num_warps=4, seg_tiles=2)
    x = logits(3, 1000, torch.float32)
    x[1].fill_(NINF)                                   # an all -inf row
    first = None
    for call in range(3):
        out = torch.full_like(x, 7.0)
        assert sm._launch_split(x, out, cfg) is None
        check(out, x)
        (buf,) = sm._SLOTS.values()
        first = buf if first is None else first
        assert buf is first and buf.shape[0] == 3                    # one buffer, kept across calls
        assert bool((((buf >> 31) & 1) == (call + 1) % 2).all())      # the partials launch's tag


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", [((2, 20000), -1), ((3, 5000), -1), ((2, 3, 4100), -1), ((4100, 3), 0)],
                         ids=lambda v: str(v))
def test_split_repeat_calls_match_the_reference(fresh_plans, poison, shape, dim, dtype):
    x = (torch.randn(shape) * 3).to(dtype)
    x.select(dim, 1).fill_(NINF)                  # one -inf entry in each softmax row
    assert choose(x.numel() // x.shape[dim], x.shape[dim], dtype, sm.INTERPRETER_SMS) == "split"
    first = softmax(x, dim)
    for _ in range(3):
        again = softmax(x, dim)
        check(again, x, dim)
        torch.testing.assert_close(again, first, rtol=0, atol=0, equal_nan=True)
    (plan,) = sm._PLANS.values()
    assert plan.stream_bound and plan.fast is None and plan.stream is None     # the interpreter: no direct launch


class FusedStandIn:
    """Stands in for _split_kernel on a GPU: a fused launch runs as its two phases, same arguments.

    The interpreter runs programs one after another, so the fused kernel's wait would never end;
    the stand-in runs the partials and finishing phases on the fused launch's workspace instead,
    which checks the arguments' order (by name) and that the workspace is all the launch needs.
    """
    def __init__(self, real, refuse=False):
        self.real, self.refuse, self.launches = real, refuse, []

    def __getitem__(self, grid):
        def run(*args, **options):
            self.launches.append((grid, args, options))
            if dict(zip(SPLIT_ARGS, args))["MODE"] != sm._FUSED.value:
                return self.real[grid](*args, **options)
            assert options == dict(launch_cooperative_grid=True, num_warps=options["num_warps"])
            if self.refuse:
                raise RuntimeError("Triton Error [CUDA]: too many blocks in cooperative launch")
            return self.emulate(grid, args)
        return run

    def emulate(self, grid, args):
        assert len(args) == len(SPLIT_ARGS)
        a = dict(zip(SPLIT_ARGS, args))
        assert a["out_ptr"].shape == a["x_ptr"].shape == (a["n_rows"], a["n_cols"])
        assert a["slots_ptr"].shape == (a["n_rows"], a["n_segs"]) and a["slots_ptr"].dtype == torch.int64
        covered = sm.covered_cols(a["n_cols"], a["VEC"]) if a["PEEL"] else a["n_cols"]   # a peeled row's body
        assert a["n_segs"] == triton_cdiv(triton_cdiv(covered, a["BLOCK"]), a["seg_tiles"])
        assert grid[0] % a["n_segs"] == 0 and grid[0] <= a["n_rows"] * a["n_segs"]
        assert a["ONE_TILE"] == (a["seg_tiles"] == 1)
        for mode in (sm._PARTIALS, sm._FINISH):
            self.real[(a["n_rows"] * a["n_segs"],)](*{**a, "MODE": mode.value}.values())
        return COMPILED


class StreamLaunch:
    """A Launch stand-in on a fake device: `StreamLaunch.current` is the current stream's handle
    (None: another device); replays run through the fused stand-in and are recorded, with the
    addresses softmax passes for out and x mapped back to the tensors by the `replay` fixture's
    map (`tracker`: the inputs the tests give to `track` and every output of sm.new_output)."""
    current: int | None = 0
    replays: list = []
    tracker = None

    @staticmethod
    def track(t):
        StreamLaunch.tracker.track(t)
        return t

    def __init__(self, compiled, grid):
        assert compiled is COMPILED
        self.grid, self.device = grid, None       # a CPU tensor's device.index is None too

    def stream(self):
        return StreamLaunch.current

    def lean(self, args, slots):
        return None                                # no lean launcher: replays come through __call__

    def __call__(self, stream, *args):
        assert stream == StreamLaunch.current
        args = StreamLaunch.tracker.resolve(args)
        StreamLaunch.replays.append(args)
        sm._split_kernel.emulate(self.grid, args)


@pytest.fixture
def gpu_split(fresh_plans, monkeypatch, replay):
    """softmax's GPU path for split on CPU tensors: a fused stand-in, fake streams and partials
    buffers kept per fake stream, as _slots keeps them per stream."""
    calls, buffers = [], {}

    def fake_slots(device, rows, n_segs):
        if sm._capturing():
            return torch.zeros((rows, n_segs), dtype=torch.int64)
        return buffers.setdefault((StreamLaunch.current, rows, n_segs),
                                  torch.zeros((rows, n_segs), dtype=torch.int64))

    def counting(x, out, cfg, launch=sm._launch_split):
        calls.append(x.shape)
        return launch(x, out, cfg)

    monkeypatch.setattr(sm, "interpreting", lambda: False)
    monkeypatch.setattr(sm, "_slots", fake_slots)
    monkeypatch.setattr(sm, "_split_kernel", FusedStandIn(sm._split_kernel))
    monkeypatch.setattr(sm, "_resident_per_sm", lambda key, device, warmup: 2)
    monkeypatch.setattr(sm, "_capturing", lambda: False)
    monkeypatch.setattr(sm, "Launch", StreamLaunch)
    monkeypatch.setitem(STRATEGIES, "split", sm.Strategy("split", None, counting, stream_bound=True))
    monkeypatch.setattr(StreamLaunch, "current", 7)
    monkeypatch.setattr(StreamLaunch, "replays", [])
    monkeypatch.setattr(StreamLaunch, "tracker", replay)
    replay.track_outputs(sm)
    return calls


@pytest.mark.parametrize("rows,cols,dtype", [(3, 5000, torch.float16), (2, 70000, torch.bfloat16),
                                             (5, 20000, torch.float32), (1, 300000, torch.float32)])
def test_split_launcher_returns_the_fused_launch(gpu_split, poison, rows, cols, dtype):
    x = logits(rows, cols, dtype)
    out = torch.empty(rows, cols, dtype=dtype)
    cfg = config("split", cols, dtype, rows)
    compiled, grid, args = sm._launch_split(x, out, cfg)
    assert compiled is COMPILED and args[0] is out and args[1] is x
    a = dict(zip(SPLIT_ARGS, args))
    assert (a["MODE"], a["BLOCK"], a["VEC"], a["PARTIALS_BLOCK"], a["PREFETCH"]) == \
        (sm._FUSED.value, cfg.block, sm._vec(x, out), sm.PARTIALS_BLOCK, cfg.prefetch)
    assert (a["x_row_stride"], a["out_row_stride"], a["n_rows"], a["n_cols"]) == (cols, cols, rows, cols)
    # the first segment length whose segments all fit one round of 2 * 132 programs, else four tiles
    tiles = triton_cdiv(cols, cfg.block)
    one_round = [t for t in sm.SPLIT_ONE_ROUND_TILES if rows * triton_cdiv(tiles, t) <= 2 * 132]
    assert a["seg_tiles"] == (one_round[0] if one_round else sm.SPLIT_SEG_TILES)
    assert a["ONE_TILE"] == (a["seg_tiles"] == 1)
    assert grid == (min(2 * 132 // a["n_segs"], rows) * a["n_segs"],)
    check(out, x)


def test_split_launcher_falls_back_to_two_launches_when_refused(gpu_split, poison, monkeypatch):
    monkeypatch.setattr(sm, "_split_kernel", FusedStandIn(sm._split_kernel.real, refuse=True))
    x = logits(3, 5000, torch.float16)
    out = torch.empty(3, 5000, dtype=x.dtype)
    assert sm._launch_split(x, out, config("split", 5000, x.dtype, 3)) is None
    modes = [dict(zip(SPLIT_ARGS, args))["MODE"] for _, args, _ in sm._split_kernel.launches]
    # each segment length tried in a fused launch, then the two launches
    tried = 1 + len(sm.SPLIT_ONE_ROUND_TILES)
    assert modes == [sm._FUSED.value] * tried + [sm._PARTIALS.value, sm._FINISH.value]
    check(out, x)
    y = softmax(x)                                  # refused through softmax(): no direct launch kept
    check(y, x)
    assert next(iter(sm._PLANS.values())).fast is None


def test_split_plan_replays_only_on_its_stream(gpu_split, poison, monkeypatch):
    replays = StreamLaunch.replays
    x = StreamLaunch.track(logits(3, 20000, torch.bfloat16))
    first = softmax(x)                               # stream 7: planned, launched, kept
    (plan,) = sm._PLANS.values()
    assert gpu_split == [(3, 20000)] and plan.stream == 7 and plan.fast is not None
    workspace = plan.fast[1][:1]                     # the partials' words
    for n in range(1, 3):                            # repeat calls on stream 7: direct launches
        again = softmax(x)
        assert len(replays) == n and len(gpu_split) == 1
        assert replays[-1][0] is again and replays[-1][1] is x
        assert replays[-1][2] is workspace[0]        # the plan's own buffer, its tags alternating
        torch.testing.assert_close(again, first, rtol=0, atol=0, equal_nan=True)
        check(again, x)
    for n, current in enumerate((8, None, 0), 2):    # another stream, another device, the default stream
        monkeypatch.setattr(StreamLaunch, "current", current)
        check(softmax(x), x)
        assert len(replays) == 2 and len(gpu_split) == n    # launched through _launch_split
    assert len(gpu_split) == 4 and plan.stream == 7    # the plan stays bound to its first stream
    launches = sm._split_kernel.launches
    assert launches[-1][1][2] is not workspace[0]    # the other streams got a workspace of their own
    monkeypatch.setattr(StreamLaunch, "current", 7)
    monkeypatch.setattr(sm, "_capturing", lambda: True)
    check(softmax(x), x)                             # inside a graph capture: the normal path
    assert len(replays) == 2 and len(gpu_split) == 5 and launches[-1][1][2] is not workspace[0]
    monkeypatch.setattr(sm, "_capturing", lambda: False)
    check(softmax(x), x)
    assert len(replays) == 3 and len(gpu_split) == 5


def test_split_plan_is_not_kept_from_a_graph_capture(gpu_split, poison, monkeypatch):
    x = StreamLaunch.track(logits(2, 20000, torch.float16))
    monkeypatch.setattr(sm, "_capturing", lambda: True)
    check(softmax(x), x)
    (plan,) = sm._PLANS.values()
    assert plan.fast is None and len(gpu_split) == 1
    monkeypatch.setattr(sm, "_capturing", lambda: False)
    monkeypatch.setattr(StreamLaunch, "current", 3)
    check(softmax(x), x)                             # the first call outside a capture keeps it
    assert plan.fast is not None and plan.stream == 3 and len(gpu_split) == 2
    check(softmax(x), x)
    assert len(StreamLaunch.replays) == 1 and len(gpu_split) == 2


def test_split_plans_that_copy_are_never_launched_directly(gpu_split, poison):
    x = (torch.randn(4100, 3) * 3).to(torch.float16)
    for _ in range(3):
        check(softmax(x, 0), x, 0)                   # dim 0 is moved and copied: no direct launch
    assert next(iter(sm._PLANS.values())).fast is None and len(gpu_split) == 3


class _FakeLaunch:
    def __init__(self, stream, device=0):
        self.current, self.device = stream, device

    def stream(self):
        return self.current

    def lean(self, args, slots):
        return None


@pytest.mark.parametrize("bound", [False, True])
def test_plan_stream_check(monkeypatch, bound):
    """_Plan.keep records the first launch's stream for stream-bound plans; fast_stream gives the
    handle to launch on, None where the plan must take the normal path."""
    capturing = []
    monkeypatch.setattr(sm, "_capturing", lambda: bool(capturing))
    launch = _FakeLaunch(0)                          # the default stream's handle is 0
    monkeypatch.setattr(sm, "Launch", lambda compiled, grid: launch)
    device = torch.device("cuda", 0)
    plan = sm._Plan(None, None, None, 2, 100, stream_bound=bound)
    plan.keep((COMPILED, (8,), ("out", "x", "parts", 5)), device)
    assert plan.fast == (launch, ("parts", 5)) and plan.stream == (0 if bound else None)
    assert plan.fast_stream() == 0
    for other, expect in [(5, None), (None, None)]:   # another stream; another current device
        launch.current = other
        assert plan.fast_stream() == (expect if bound else other)
    launch.current = 0
    capturing.append(True)
    assert plan.fast_stream() == (None if bound else 0)


def test_stream_bound_plan_keeps_no_launch_it_cannot_replay(monkeypatch):
    capturing = []
    monkeypatch.setattr(sm, "_capturing", lambda: bool(capturing))
    launch = _FakeLaunch(4, device=1)
    monkeypatch.setattr(sm, "Launch", lambda compiled, grid: launch)
    launched = (COMPILED, (8,), ("out", "x", "parts"))
    plan = sm._Plan(None, None, None, 2, 100, stream_bound=True)
    plan.keep(launched, torch.device("cuda", 0))    # launched on device 1 for a tensor on device 0
    assert plan.fast is None
    launch.current = None                            # no stream handle
    plan.keep(launched, torch.device("cuda", 1))
    assert plan.fast is None
    launch.current = 4
    capturing.append(True)                           # inside a CUDA graph capture
    plan.keep(launched, torch.device("cuda", 1))
    assert plan.fast is None
    capturing.clear()
    plan.keep(launched, torch.device("cuda", 1))
    assert plan.fast == (launch, ("parts",)) and plan.stream == 4


def test_split_strategy_is_stream_bound_and_the_others_are_not():
    assert [n for n, s in STRATEGIES.items() if s.stream_bound] == ["split"]
    x = logits(2, 20000, torch.float32)
    assert sm._plan(x, -1).stream_bound and not sm._plan(logits(2, 40, torch.float32), -1).stream_bound


def test_split_partials_carry_one_tag_a_launch(gpu_split, poison):
    """Every launch writes every word of the plan's partials buffer, all with the other tag than the
    launch before (the buffer starts zeroed: the first takes tag 1), so a launch tells its own
    partials from the last launch's by the tag alone, with no counters to re-arm."""
    x = StreamLaunch.track(logits(3, 20000, torch.float32))
    check(softmax(x), x)
    (plan,) = sm._PLANS.values()
    slots = plan.fast[1][0]
    assert slots.dtype == torch.int64 and slots.shape[0] == 3 and slots.shape[1] > 1
    tags = []
    for _ in range(4):
        tag = (slots >> 31) & 1
        assert (tag == tag[0, 0]).all()
        tags.append(int(tag[0, 0]))
        check(softmax(x), x)
    assert tags == [1, 0, 1, 0] and len(StreamLaunch.replays) == 4


def test_split_partials_buffers_are_kept_per_stream_and_layout(monkeypatch):
    """_slots zeroes a buffer once per (device, stream, rows, segments) and hands it out again (no
    memset in a repeat call); a capture gets its own; the oldest is dropped beyond the cache size."""
    monkeypatch.setattr(sm, "_SLOTS", {})
    monkeypatch.setattr(sm, "interpreting", lambda: False)     # the GPU path, on CPU tensors
    monkeypatch.setattr(sm, "_capturing", lambda: False)
    cpu = torch.device("cpu")
    a = sm._slots(cpu, 3, 5)
    assert a.shape == (3, 5) and a.dtype == torch.int64 and not a.any()
    a.fill_(1 << 31)                                   # a launch's tag in every word
    assert sm._slots(cpu, 3, 5) is a                   # kept, not zeroed again
    assert sm._slots(cpu, 5, 3) is not a               # another layout: a buffer of its own
    monkeypatch.setattr(sm, "_capturing", lambda: True)
    inside = sm._slots(cpu, 3, 5)
    assert inside is not a and not inside.any() and len(sm._SLOTS) == 2
    monkeypatch.setattr(sm, "_capturing", lambda: False)
    monkeypatch.setattr(sm, "SLOTS_CACHE_SIZE", 2)
    b = sm._slots(cpu, 5, 3)
    sm._slots(cpu, 7, 7)                               # drops the oldest made, (3, 5)
    assert sm._slots(cpu, 5, 3) is b and len(sm._SLOTS) == 2
    fresh = sm._slots(cpu, 3, 5)                       # made again, zeroed
    assert fresh is not a and not fresh.any()


@pytest.mark.parametrize("cols,dtype,segs", [(65537, torch.float16, 2), (65537, torch.float32, 4),
                                             (65536, torch.float16, 2), (70001, torch.bfloat16, 3)])
def test_split_segments_cover_a_peeled_body(gpu_split, poison, cols, dtype, segs):
    """A row off the vector boundary is its aligned body in whole segments and its edges in segment
    0: no segment of a launch is left with nothing but masked lanes."""
    x = logits(2, cols, dtype)                       # an odd length: row 1 starts off the boundary
    out = torch.empty(2, cols, dtype=dtype)
    compiled, grid, args = sm._launch_split(x, out, Config(block=16384 // dtype.itemsize, num_warps=8, seg_tiles=4))
    a = dict(zip(SPLIT_ARGS, args))
    assert a["n_segs"] == segs and a["PEEL"] == (cols % (16 // dtype.itemsize) != 0)
    check(out, x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("cols,peel", [(100, False), (1025, True)], ids=["aligned", "peeled"])
@pytest.mark.parametrize("one_tile,prefetch", [(True, True), (True, False), (False, False)],
                         ids=["one_tile_prefetch", "one_tile", "tiles"])
def test_fused_split_rounds_in_the_interpreter(one_tile, prefetch, cols, peel, dtype):
    """The fused launch itself (MODE _FUSED), which the stand-ins above replace by its two phases: with
    one segment a row no program waits on another, so the interpreter runs it. A grid of 2 programs
    over 5 rows takes 3 rounds, with the next round's segment loaded during the wait (PREFETCH); the
    second launch on the same workspace reads the other tag. Poisoned twice (NaN, 7.0)."""
    x = logits(5, cols, dtype)        # an all -inf row, -inf entries; 1025 columns: rows off the 16-byte grid
    vec, peeled = sm._access(x, torch.empty_like(x))
    assert peeled == peel
    covered = sm.covered_cols(cols, vec) if peeled else cols
    block = triton.next_power_of_2(covered) if one_tile else 32
    seg_tiles = 1 if one_tile else triton_cdiv(covered, block)
    slots = torch.zeros((5, 1), dtype=torch.int64)
    def launch(out):
        sm._split_kernel[(2,)](out, x, slots, x.stride(0), out.stride(0), 5, cols, 1, seg_tiles,
                               BLOCK=block, VEC=vec, PARTIALS_BLOCK=sm.PARTIALS_BLOCK, MODE=sm._FUSED.value,
                               ONE_TILE=one_tile, PREFETCH=prefetch, PEEL=peeled)
    for _ in range(2):                # both launches poisoned twice: four launches, the tags alternating
        check(poisoned_twice(x, launch, "the fused split"), x)
