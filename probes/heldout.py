"""Probe: the softmax dispatcher and the decode split rule at shapes outside the grid.

The question. The rules that choose a softmax strategy (kernels.fused_softmax.choose and its
constants) and a decode split (kernels.flash_decoding) were set from measurements at the grid's
shapes (config/config.yaml). Do they hold where no measurement set them? This probe runs the
sweep's own machinery (rooflab.bench.run_sweep with the config's full-profile bench settings,
after the sweep job's GPU warm-up and torch.compile's precompile) at held-out shapes: vocabulary
rows of models the grid does not have, odd lengths, square scores, very short rows, few long
rows between the grid's lengths; decode at GQA groups of 7 and 8, odd and very long contexts,
head_dim 64, batches the grid skips. Then it judges them the way the paper judges the grid
(rooflab.report.derive.comparisons: each case in the timing that judges it, a tie within 2% or
where the intervals overlap):
  softmax: ours against the fastest of torch, torch.compile and Liger (and, from 8 MB up, the 1.0x
           line of issue 10), against the fastest forced strategy (the dispatcher within 5%),
           and from 128 MB up its share of a copy of the same bytes timed in the same trials;
  decode:  ours against cuDNN and FlashAttention-2, the paged layout against the contiguous one,
           and from 256 MB of KV cache up its share of the GPU's read ceiling (the committed run's
           ceilings.csv for this GPU, whole-buffer and size-matched).

Measured at f87c302 (H100 GPU-7e212431, 144 s for both studies; docs/measurements.md, "Shapes outside the grid"):
softmax at 8 MB and more bf16 8 wins, 2 ties, 2 losses (geometric mean 1.27x), fp32 5, 4 and 4
(1.14x); the losses at 6000x6000 and 512x3000 (looped where the row kernel forced took 1/1.16-1/1.40
of its time), 200000x33 (0.83x torch) and 131072x64 fp32 (0.95x torch.compile); at 128 MB and more 3
of 7 bf16 and 6 of 8 fp32 shapes at 90% of the in-trial copy, the lowest 32x2097152 (0.80, 0.81).
Decode bf16 against cuDNN 3 wins and 7 ties (0.983-1.733x), FA2 1.02-1.22x, paged 0.925-1.018 of
the contiguous speed (slowest at head_dim 64), and none of the 8 shapes of 256 MB and more at 95%
of the read ceiling (0.889-0.948).
Again at f86f589, softmax only, after the row-fill and short-row rules changed (H100 GPU-5543ed88, 100 s):
no loss at 8 MB and more, bf16 10 wins and 2 ties (1.38x), fp32 7 wins and 6 ties (1.24x); ours within
1.3% of the fastest forced strategy everywhere; at 128 MB and more 4 of 7 bf16 and 7 of 8 fp32 shapes at
90% of the in-trial copy, 32x2097152 still the lowest (0.78, 0.80).
Decode again at 7b90060 (H100 GPU-d693ff5a, 19 s): bf16 against cuDNN 2 wins and 8 ties (0.989-1.747x),
FA2 1.02-1.22x, paged 0.927-1.009 of the contiguous speed (slowest at head_dim 64 again), 4 of the 8
shapes of 256 MB and more at 95% of the read ceiling (f86f589's 3.20 TB/s; 0.923-0.988).
Softmax at 6e68086, the first run of the narrow-access rows tile (ROWS_NARROW_TILE_ROWS) and of its five
shapes (H100 GPU-53e1c65c, 135 s): bf16 14 wins and 3 ties at 8 MB and more (1.35x; 350-447 columns
1.04-1.10x, 90-177 1.13-1.73x), fp32 9 wins, 8 ties and a loss (1.17x): 65536x350, 57.0 us against
torch.compile's 54.4 and the in-trial copy's 54.3 (0.95x), the rows kernel forced (the same tile) 56.4;
65536x447 fp32 a tie with torch.compile (73.9 against 75.1); ours within 2.2% of the fastest forced
strategy everywhere; at 128 MB and more 4 of 7 bf16 and 12 of 13 fp32 shapes at 90% of the copy,
32x2097152 the lowest (0.79, 0.80).

Run from the repository root (GPU):  python3 probes/heldout.py
  STUDIES=softmax,decode   SOFTMAX_DTYPES=float32,bfloat16   DECODE_DTYPES=bfloat16
Writes $OUT/heldout_<study>_<dtype>.csv (the results schema) and $OUT/heldout_comparisons.csv;
prints one line per case and a summary per study and dtype last.
"""
from __future__ import annotations

import glob
import os
import sys
import time

import pandas as pd
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from rooflab import precompile, studies  # noqa: E402
from rooflab.bench import BenchConfig, Sweep, run_sweep  # noqa: E402
from rooflab.gpus import read_ceilings  # noqa: E402
from rooflab.gpustate import start_job  # noqa: E402
from rooflab.report.analysis import geomean  # noqa: E402
from rooflab.report.derive import comparisons, select  # noqa: E402
from rooflab.sized_ceilings import rate_at  # noqa: E402
from rooflab.workflow import detect_gpu  # noqa: E402

OUT = os.environ.get("OUT", os.path.join(ROOT, "probe_out"))
STUDIES = os.environ.get("STUDIES", "softmax,decode").split(",")
DTYPES = {"softmax": os.environ.get("SOFTMAX_DTYPES", "float32,bfloat16").split(","),
          "decode": os.environ.get("DECODE_DTYPES", "bfloat16").split(",")}

# (rows, cols) that no rule was set at; each a shape a user meets.
SOFTMAX_SHAPES = [
    (100, 100),         # tiny: launch-bound
    (512, 3000),        # a mid row under 8 MB, off every power of two
    (131072, 64),       # very short rows (scores of a 64-key window)
    (200000, 33),       # very short, odd
    (262144, 97),       # widths between a warp and 512 columns (class counts) read an element at a
    (131072, 177),      # time, and two (90, 350): the narrow rows tiles (ROWS_NARROW_TILE_ROWS)
    (65536, 447),       # were set at 33-511 columns, none of these
    (262144, 90),
    (65536, 350),
    (12288, 768),       # mid-size activations (BERT-base width)
    (24576, 2048),      # attention scores, 12 heads x 2048 queries
    (6000, 6000),       # an odd square
    (8192, 8192),       # attention scores at 8k
    (768, 30522),       # BERT's vocabulary
    (2048, 32000),      # Llama 2's vocabulary
    (4096, 50257),      # GPT-2's vocabulary, odd
    (1024, 128256),     # Llama 3's vocabulary
    (3, 1000003),       # three long odd rows
    (32, 2097152),      # few long rows, between the grid's 16 x 4M and 64 x 1M
]
# (batch, heads_q, heads_kv, cache_len, head_dim, ragged) that no rule was set at.
DECODE_SHAPES = [
    (1, 32, 8, 524288, 128, False),   # B=1 GQA at half a million tokens (2.1 GB of cache)
    (2, 32, 8, 65536, 128, False),    # long context, small batch
    (3, 32, 32, 10000, 128, False),   # odd batch and length, MHA
    (1, 64, 8, 100000, 128, False),   # GQA 8, odd length
    (8, 32, 4, 8192, 128, False),     # GQA 8
    (8, 28, 4, 16384, 128, False),    # GQA 7 (Qwen-style)
    (32, 32, 8, 2048, 128, False),    # a batch the grid skips
    (128, 32, 8, 1024, 128, False),   # a large batch of short contexts
    (16, 16, 2, 8192, 64, False),     # head_dim 64
    (24, 32, 8, 16384, 128, True),    # ragged, a batch the grid skips
]
SOFTMAX_IMPLS = ["ours", "ours_rows", "ours_row", "ours_looped", "ours_split", "torch", "torch_compile",
                 "liger", "copy"]
DECODE_IMPLS = ["ours", "ours_nosplit", "ours_paged", "sdpa_flash", "sdpa_cudnn"]
LARGE_SOFTMAX_BYTES, LARGE_DECODE_BYTES, LAUNCH_BOUND_BYTES = 128e6, 256e6, 8e6


def load_config() -> dict:
    with open(os.path.join(ROOT, "config", "config.yaml")) as handle:
        return yaml.safe_load(handle)


def shapes_of(study: str) -> list[dict]:
    if study == "softmax":
        return [{"rows": r, "cols": c} for r, c in SOFTMAX_SHAPES]
    keys = ("batch", "heads_q", "heads_kv", "cache_len", "head_dim", "ragged")
    return [dict(zip(keys, s)) for s in DECODE_SHAPES]


def measure(study_name: str, dtype: str, ceilings: dict, bench: BenchConfig, monitor, steady) -> str:
    study = studies.load(study_name)
    impls = SOFTMAX_IMPLS if study_name == "softmax" else DECODE_IMPLS
    shapes = study.shapes(shapes_of(study_name))
    precompile.warm(study.STUDY, shapes, [dtype], impls)
    sweep = Sweep(study=study, gpu=SLUG, shapes=shapes, dtypes=[dtype], impls=impls, ceilings=ceilings,
                  bench=bench, monitor=monitor, steady_mhz=steady)
    path = os.path.join(OUT, f"heldout_{study_name}_{dtype}.csv")
    started = time.perf_counter()
    rows = run_sweep(sweep, path)
    print(f"{study_name} {dtype}: {rows} rows in {time.perf_counter() - started:.0f} s -> {path}", flush=True)
    return path


def side_by_side(frame: pd.DataFrame, table: pd.DataFrame, study: str, keys: list, first: str,
                 others: dict) -> pd.DataFrame:
    """The comparisons (`table`, derive.comparisons of `frame`) against `first`, each of `others`
    ({against: suffix}) beside them as vs_best_<suffix> and best_impl_<suffix>, and the strategy ours
    dispatched to (from `frame`)."""
    keyed = select(table, study, first)
    for against, suffix in others.items():
        other = select(table, study, against)[keys + ["vs_best", "best_impl"]]
        keyed = keyed.merge(other.rename(columns={"vs_best": f"vs_best_{suffix}", "best_impl": f"best_impl_{suffix}"}),
                            on=keys, how="left")
    strategy = frame[frame["impl"] == "ours"].drop_duplicates(keys)[keys + ["strategy"]]
    return keyed.merge(strategy, on=keys, how="left")


def softmax_lines(frame: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """One line a case, then a summary a dtype."""
    keyed = side_by_side(frame, table, "softmax", ["dtype", "rows", "cols"], "peer",
                         {"strategy": "forced", "copy": "copy"})
    lines = [f"  {r.dtype:8} {r.rows:>7}x{r.cols:<8} {r.bytes / 1e6:8.1f} MB {r.timing:6} {r.strategy:6} "
             f"ours {r.ours_ms * 1e3:9.2f} us | vs {r.best_impl:13} {r.vs_best:5.3f}x {r.vs_best_outcome:4} | "
             f"ours/best forced ({r.best_impl_forced}) {1 / r.vs_best_forced:5.3f} | copy share {r.vs_best_copy:5.3f}"
             for r in keyed.itertuples()]
    for dtype, part in keyed.groupby("dtype"):
        big, small = part[part["bytes"] >= LAUNCH_BOUND_BYTES], part[part["bytes"] < LAUNCH_BOUND_BYTES]
        large = part[part["bytes"] >= LARGE_SOFTMAX_BYTES]
        lines.append(f"softmax {dtype}: >= 8 MB vs fastest peer {big['vs_best_outcome'].value_counts().to_dict()} "
                     f"geomean {geomean(big['vs_best']):.3f} worst {big['vs_best'].min():.3f}; < 8 MB "
                     f"{small['vs_best_outcome'].value_counts().to_dict()}; ours/best forced max "
                     f"{(1 / part['vs_best_forced']).max():.3f}; >= 128 MB copy share min "
                     f"{large['vs_best_copy'].min():.3f}, {int((large['vs_best_copy'] >= 0.9).sum())} of {len(large)} at 0.90")
    return lines


def decode_lines(frame: pd.DataFrame, table: pd.DataFrame, ceilings: dict) -> list[str]:
    """One line a case, then a summary a dtype; read shares against the whole-buffer read ceiling
    and against a read of the case's own size (rooflab.sized_ceilings)."""
    keys = ["dtype", "batch", "heads_q", "heads_kv", "cache_len", "head_dim", "ragged"]
    keyed = side_by_side(frame, table, "decode", keys, "sdpa_cudnn", {"sdpa_flash": "fa2", "ours_paged": "paged"})
    read = ceilings.get("read_tbps")
    lines = [f"  {r.dtype:8} {r.shape:38} {r.bytes / 1e6:8.1f} MB {r.timing:6} {r.strategy:8} "
             f"ours {r.ours_ms * 1e3:9.2f} us | cuDNN {r.vs_best:5.3f}x {r.vs_best_outcome:4} | FA2 "
             f"{r.vs_best_fa2:5.3f}x | paged/contig {1 / r.vs_best_paged:5.3f} | read share "
             f"{r.ours_metric / read:5.3f} (own size {r.ours_metric / rate_at(ceilings, r.bytes, 'read'):5.3f})"
             for r in keyed.itertuples()]
    for dtype, part in keyed.groupby("dtype"):
        share = part[part["bytes"] >= LARGE_DECODE_BYTES]["ours_metric"] / read
        lines.append(f"decode {dtype}: vs cuDNN {part['vs_best_outcome'].value_counts().to_dict()} "
                     f"{part['vs_best'].min():.3f}-{part['vs_best'].max():.3f}x geomean {geomean(part['vs_best']):.3f}; "
                     f"vs FA2 {part['vs_best_fa2'].min():.3f}-{part['vs_best_fa2'].max():.3f}x; paged/contig "
                     f"{(1 / part['vs_best_paged']).min():.3f}-{(1 / part['vs_best_paged']).max():.3f}; >= 256 MB read "
                     f"share min {share.min():.3f}, {int((share >= 0.95).sum())} of {len(share)} at 0.95")
    return lines


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    committed = os.path.join(ROOT, "data", "results", SLUG, "ceilings.csv")
    ceilings = read_ceilings(committed) if os.path.exists(committed) else {}
    print(f"GPU {SLUG}; ceilings from {committed if ceilings else 'nowhere (no committed run of this GPU)'}")
    config = load_config()["bench"]
    bench = BenchConfig(**{**config["full"], **{k: v for k, v in config.items() if k not in ("quick", "full")}})
    monitor, record = start_job()
    for study in STUDIES:
        for dtype in DTYPES[study]:
            measure(study, dtype, ceilings, bench, monitor, record["warm_up"]["steady_sm_mhz"])
    lines, tables = [], []
    for study in STUDIES:
        frame = pd.concat([pd.read_csv(p) for p in sorted(glob.glob(os.path.join(OUT, f"heldout_{study}_*.csv")))])
        bad = frame[frame["status"] != "ok"]
        for r in bad.itertuples():
            lines.append(f"  not ok: {r.impl} {r.dtype} {r.status} {r.message}")
        tables.append(comparisons(frame, study))
        lines += (softmax_lines(frame, tables[-1]) if study == "softmax"
                  else decode_lines(frame, tables[-1], ceilings))
    pd.concat(tables).to_csv(os.path.join(OUT, "heldout_comparisons.csv"), index=False)
    print("\n".join(lines))


SLUG = detect_gpu()[1] or "cpu"
if __name__ == "__main__":
    main()
