"""Each study summed up the way the field judges it, for the abstract and the study sections.

Softmax   memory-bound: shapes that move at least the launch-bound threshold (8 MB by default)
          are judged on kernel time (CUPTI) where the case has it, else on plain-call time
          (CUDA events), against the best of the peers, per dtype,
          and the largest (>= 128 MB) against the measured copy ceiling; the smaller, launch-bound
          shapes only on kernel time (CUPTI), since a plain call there times the host.
Attention long sequences at head dim 128 against FlashAttention-2 and cuDNN (through SDPA) one
          at a time, per dtype and mask; head dim 64 against FlashAttention-2.
Decode    against cuDNN wherever it ran, at the anchors' B=1 L=4096 shape, and, where the KV
          cache read is large (>= 256 MB), against the measured read-only ceiling.
E2E       each block replayed as a CUDA graph, the launch-bound decode step first.
The seeds' designs (seed_*) are always summed up separately from the peers.
Every function takes one GPU's comparisons (rooflab.report.derive) and rows of one study and returns
plain text, formatted here; geometric means carry a bootstrap interval over the shapes.
"""
from __future__ import annotations

import pandas as pd

from rooflab.report.analysis import (E2E_GRAPH_TIMING, KERNEL_TIMING, PLAIN_TIMING, bootstrap_geomean, counts,
                                     is_peer, is_seed, judged, shape_label)
from rooflab.report.derive import select
from rooflab.report.fmt import DASH, DTYPE_SHORT, dt, listing, megabytes, num, pct, ratio, span
from rooflab.schema import HOST_TIMING, SHAPE_COLUMNS
from rooflab.sized_ceilings import rate_at

LARGE_SOFTMAX_BYTES = 128e6     # large enough that every peer streams at its sustained rate
LARGE_DECODE_BYTES = 256e6      # a KV read this large dwarfs the 60 MB L2 and any launch cost
HOST_RATIO_LIMIT = 1.2          # a repeat call's host time over torch.softmax's that a wrapper should stay within
LARGE_DECODE_SHARE = 0.95       # the share of the read ceiling a KV read of LARGE_DECODE_BYTES is held to
LONG_SEQUENCE = 4096            # prefill lengths where attention is compute-bound
DECODE_ANCHOR = {"batch": 1, "heads_kv": 32, "cache_len": 4096, "ragged": False}   # anchors-h200.md's first decode row
PAGED_WITHIN = 0.05             # a paged read this close to the contiguous one (or tied with it) keeps up
PAGED_PAGE_SIZE = 64            # rooflab.studies.decode.PAGE_SIZE (the report runs without torch; a test keeps them equal)
DTYPE_ORDER = list(DTYPE_SHORT)


def _dtypes(frame: pd.DataFrame) -> list[str]:
    present = set(frame["dtype"])
    return [d for d in DTYPE_ORDER if d in present] + sorted(present - set(DTYPE_ORDER))


def _at(table: pd.DataFrame, col: str, lowest: bool = True) -> dict | None:
    """The row where `col` is lowest (or highest), as printed text."""
    part = table.dropna(subset=[col])
    if part.empty:
        return None
    row = part.loc[part[col].idxmin() if lowest else part[col].idxmax()]
    out = {"ratio": ratio(row[col]), "frac": pct(row[col]), "shape": row["shape"], "dtype": dt(row["dtype"]),
           "peer": row.get("best_impl") or "", "value": num(row.get("ours_metric")), "interval": "", "outcome": ""}
    if f"{col}_low" in row and not pd.isna(row[f"{col}_low"]):
        out.update(interval=ratio_interval(row[f"{col}_low"], row[f"{col}_high"]), outcome=row[f"{col}_outcome"])
    return out


def ratio_interval(low, high) -> str:
    """'[0.90x, 0.92x]': the interval of a speedup."""
    return f"[{ratio(low)}, {ratio(high)}]"


def outcome_text(c: dict) -> str:
    """'2 wins, 1 tie and 0 losses'."""
    return listing([f"{c['win']} win{'s' if c['win'] != 1 else ''}", f"{c['tie']} tie{'s' if c['tie'] != 1 else ''}",
                    f"{c['loss']} loss{'es' if c['loss'] != 1 else ''}"])


def tally(table: pd.DataFrame) -> dict | None:
    """Shapes compared, wins / ties / losses of ours (analysis.outcome), geometric mean with its bootstrap
    interval over the shapes, and the worst and best shapes of a selection of the comparisons table."""
    part = table.dropna(subset=["vs_best"])
    if part.empty:
        return None
    c = counts(part["vs_best_outcome"])
    gm, low, high = bootstrap_geomean(part["vs_best"])
    return {"n": len(part), "wins": c["win"], "ties": c["tie"], "losses": c["loss"], "outcomes": outcome_text(c),
            "gm": ratio(gm), "gm_interval": ratio_interval(low, high),
            "worst": _at(part, "vs_best"), "best": _at(part, "vs_best", lowest=False)}


def _names(frame: pd.DataFrame, keep) -> str:
    return listing(sorted({i for i in frame["impl"] if keep(i)}))


# ---------------------------------------------------------------- softmax

def softmax(cmp: pd.DataFrame, frame: pd.DataFrame, threshold: float, ceilings: dict) -> dict | None:
    peers = select(cmp, "softmax", "peer")
    if peers["vs_best"].notna().sum() == 0:
        return None
    big = peers[peers["bytes"] >= threshold]
    out = {"threshold": megabytes(threshold), "large": megabytes(LARGE_SOFTMAX_BYTES),
           "peers": _names(frame, is_peer), "seeds": _names(frame, is_seed),
           "dtypes": [dict(tally(big[big["dtype"] == d]), dtype=dt(d)) for d in _dtypes(big)
                      if tally(big[big["dtype"] == d])], "large_frac": None, "launch": None}
    # judged like the comparisons above: the kernel's own time where CUPTI measured it, else the plain call
    large = peers[peers["bytes"] >= LARGE_SOFTMAX_BYTES].dropna(subset=["ours_frac"])
    if not large.empty:
        out["large_frac"] = {"n": len(large), "low": _at(large, "ours_frac"), "high": _at(large, "ours_frac", lowest=False),
                             "ceiling": num(ceilings.get("copy_tbps")), "sized": sized_share(large, ceilings, "copy", IN_TRIALS_SHARE),
                             "in_trials": in_trial_copy(select(cmp, "softmax", "copy"))}
    kernel = peers[(peers["bytes"] < threshold) & (peers["timing"] == KERNEL_TIMING)]
    if tally(kernel):
        small = frame[(frame["status"] == "ok") & (frame["bytes"] < threshold)]
        small = small[small["impl"].map(lambda i: i == "ours" or is_peer(i)).astype(bool)]
        keys = ["dtype", "rows", "cols", "impl"]
        both = small[small["timing"] == PLAIN_TIMING].merge(small[small["timing"] == KERNEL_TIMING][keys + ["median_ms"]],
                                                             on=keys, suffixes=("", "_kernel"))
        out["launch"] = dict(tally(kernel), plain_us=num(both["median_ms"].median() * 1e3),
                             kernel_us=num(both["median_ms_kernel"].median() * 1e3),
                             launch_us=num(ceilings.get("launch_us")))
    out["host"] = host_cost(frame)
    out["host_vs_torch"] = host_against(frame, "softmax", "torch", threshold)
    seeds = select(cmp, "softmax", "seed")
    out["vs_seeds"] = tally(seeds[seeds["bytes"] >= threshold])
    out["vs_seeds_kernel"] = tally(seeds[(seeds["bytes"] < threshold) & (seeds["timing"] == KERNEL_TIMING)])
    return out


def _host_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The measured host rows (timing `host`, status ok, a median) of a study's rows."""
    return frame[(frame["timing"] == HOST_TIMING) & (frame["status"] == "ok") & frame["median_ms"].notna()]


def host_against(frame: pd.DataFrame, study: str, reference: str, below: float,
                 limit: float = HOST_RATIO_LIMIT) -> dict | None:
    """A repeat call's own host time of ours over `reference`'s, shape by shape, at the shapes moving
    fewer than `below` bytes where both were timed on the host: the shapes, the median ratio and the
    highest with its shape, and how many ratios lie above `limit`: their medians (`over`), and their
    whole interval (`over_beyond`: ours's lower bound over the reference's upper one, as the
    comparisons' intervals are taken). None where no shape has both."""
    rows = _host_rows(frame)
    rows = rows[(rows["bytes"] < below) & rows["impl"].isin(["ours", reference])]
    keys = ["dtype", *SHAPE_COLUMNS[study]]
    values = ["median_ms", *(c for c in ("ci_low_ms", "ci_high_ms") if c in rows)]
    per = rows.pivot_table(index=keys, columns="impl", values=values, aggfunc="median")
    if ("median_ms", "ours") not in per or ("median_ms", reference) not in per:
        return None
    ratios = (per["median_ms"]["ours"] / per["median_ms"][reference]).dropna()
    if ratios.empty:
        return None
    if "ci_low_ms" in per and "ci_high_ms" in per:
        lows = (per["ci_low_ms"]["ours"] / per["ci_high_ms"][reference]).reindex(ratios.index)
    else:
        lows = ratios
    worst = dict(zip(keys, ratios.idxmax()))
    return {"n": len(ratios), "reference": reference, "median": ratio(ratios.median()),
            "highest": ratio(ratios.max()), "shape": shape_label(worst, study), "dtype": dt(worst["dtype"]),
            "limit": ratio(limit), "over": int((ratios > limit).sum()), "over_beyond": int((lows > limit).sum())}


def host_cost(frame: pd.DataFrame) -> dict | None:
    """A repeat call's own host time (timing `host`, the wrapper's checks and launch) of ours and each
    peer: the median over the cases where it was measured (those also timed kernel-only)."""
    rows = _host_rows(frame)
    rows = rows[rows["impl"].map(lambda i: i == "ours" or is_peer(i)).astype(bool)]
    if rows.empty or "ours" not in set(rows["impl"]):
        return None
    per = rows.groupby("impl")["median_ms"].median() * 1e3
    return {"n": int((rows["impl"] == "ours").sum()), "ours": num(per["ours"]),
            "peers": [{"impl": impl, "us": num(per[impl])} for impl in sorted(per.index) if impl != "ours"]}


# ---------------------------------------------------------------- attention

def _range(table: pd.DataFrame) -> str | None:
    values = table["vs_best"].dropna()
    if values.empty:
        return None
    return span(ratio(values.min()), ratio(values.max()))


def _outcomes(table: pd.DataFrame) -> str | None:
    """'1 win, 1 tie and 0 losses' over the compared rows of a comparisons table."""
    part = table.dropna(subset=["vs_best"])
    return outcome_text(counts(part["vs_best_outcome"])) if not part.empty else None


def attention(cmp: pd.DataFrame, frame: pd.DataFrame) -> dict | None:
    flash, cudnn = select(cmp, "attention", "sdpa_flash"), select(cmp, "attention", "sdpa_cudnn")
    if flash["vs_best"].notna().sum() == 0 and cudnn["vs_best"].notna().sum() == 0:
        return None

    def long(table, head_dim):
        square = table["seqlen_q"] == table["seqlen_k"]
        return table[(table["head_dim"] == head_dim) & square & (table["seqlen_q"] >= LONG_SEQUENCE)]

    groups = []
    for dtype in _dtypes(frame):
        for causal in (True, False):
            def pick(table):
                part = long(table, 128)
                return part[(part["dtype"] == dtype) & (part["causal"] == causal)]
            f, c = pick(flash), pick(cudnn)
            n = int(max(f["vs_best"].notna().sum(), c["vs_best"].notna().sum()))
            if n:
                groups.append({"dtype": dt(dtype), "mask": "causal" if causal else "non-causal", "n": n,
                               "flash": _range(f), "cudnn": _range(c),
                               "flash_outcomes": _outcomes(f), "cudnn_outcomes": _outcomes(c)})
    out = {"long": num(LONG_SEQUENCE), "groups": groups, "d64": None}
    d64 = flash[flash["head_dim"] == 64].dropna(subset=["vs_best"])
    if not d64.empty:
        out["d64"] = {"n": len(d64), "flash": _range(d64), "outcomes": _outcomes(d64), "worst": _at(d64, "vs_best"),
                      "lengths": span(num(d64["seqlen_q"].min()), num(d64["seqlen_q"].max()))}
    out["vs_seeds"] = tally(select(cmp, "attention", "seed"))
    out["hopper"] = hopper_path(frame)
    return out


HOPPER_PATH = "gluon-hopper"    # the strategy of `ours` rows that ran the Gluon Hopper kernel
TRITON_ALONE = "ours_triton"    # our Triton kernel forced at the same shapes


def hopper_path(frame: pd.DataFrame) -> dict | None:
    """The shapes where `ours` ran the Gluon Hopper kernel: how many, at which head dimensions, and
    cuDNN's time over ours and over our Triton kernel alone (`ours_triton`) there, in the judged
    timing of each case."""
    ok = frame[(frame["status"] == "ok") & frame["median_ms"].notna()]
    keys = ["gpu", "dtype", *SHAPE_COLUMNS["attention"]]
    cases = judged(ok, "attention")
    hopper = cases[(cases["impl"] == "ours") & (cases["strategy"] == HOPPER_PATH)].set_index(keys).index
    if hopper.empty:
        return None
    times = cases.pivot_table(index=keys, columns="impl", values="median_ms")
    times = times[times.index.isin(hopper)]

    def over(impl):
        if impl not in times or "sdpa_cudnn" not in times:
            return None
        values = (times["sdpa_cudnn"] / times[impl]).dropna()
        return span(ratio(values.min()), ratio(values.max())) if not values.empty else None

    gain = (times[TRITON_ALONE] / times["ours"]).dropna() if TRITON_ALONE in times else pd.Series(dtype=float)
    dims = sorted({int(d) for d in times.index.get_level_values("head_dim")})
    return {"n": len(times), "head_dims": " and ".join(map(str, dims)),
            "cudnn": over("ours"), "triton_cudnn": over(TRITON_ALONE),
            "gain": span(ratio(gain.min()), ratio(gain.max())) if not gain.empty else None}


# ---------------------------------------------------------------- decode

def decode(cmp: pd.DataFrame, frame: pd.DataFrame, ceilings: dict) -> dict | None:
    cudnn, flash = select(cmp, "decode", "sdpa_cudnn"), select(cmp, "decode", "sdpa_flash")
    out = {"vs_cudnn": tally(cudnn), "anchor": [], "large": None, "split": None, "paged": None}
    if out["vs_cudnn"] is None:
        return None
    anchor = []
    for dtype in _dtypes(frame):
        pick = pd.Series(True, index=cudnn.index)
        for col, value in DECODE_ANCHOR.items():
            pick &= cudnn[col] == value
        rows = cudnn[pick & (cudnn["dtype"] == dtype)].dropna(subset=["vs_best"])
        if rows.empty:
            continue
        row = rows.iloc[0]
        same = flash[(flash["shape"] == row["shape"]) & (flash["dtype"] == dtype)].dropna(subset=["vs_best"])
        f = same.iloc[0] if not same.empty else None
        anchor.append({"dtype": dt(dtype), "shape": row["shape"], "ours": num(row["ours_metric"]),
                       "cudnn": num(row["best_metric"]), "vs_cudnn": ratio(row["vs_best"]),
                       "interval": ratio_interval(row["vs_best_low"], row["vs_best_high"]),
                       "outcome": row["vs_best_outcome"],
                       "flash": num(f["best_metric"]) if f is not None else "",
                       "vs_flash": ratio(f["vs_best"]) if f is not None else ""})
    out["anchor"] = anchor
    peers = select(cmp, "decode", "peer")
    large = peers[peers["bytes"] >= LARGE_DECODE_BYTES].dropna(subset=["ours_frac"])   # kernel time where measured
    if not large.empty:
        out["large"] = {"bytes": megabytes(LARGE_DECODE_BYTES), "n": len(large), "low": _at(large, "ours_frac"),
                        "median": pct(large["ours_frac"].median()), "ceiling": num(ceilings.get("read_tbps")),
                        "sized": sized_share(large, ceilings, "read", LARGE_DECODE_SHARE), **under_share(large, LARGE_DECODE_SHARE)}
    split = tally(select(cmp, "decode", "ours_nosplit"))
    if split:
        out["split"] = dict(split, low=split["worst"]["ratio"], low_shape=split["worst"]["shape"],
                            high=split["best"]["ratio"], high_shape=split["best"]["shape"])
    out["paged"] = paged_layout(select(cmp, "decode", "ours_paged"))
    out["vs_seeds"] = tally(select(cmp, "decode", "seed"))
    out["host"] = host_cost(frame)
    return out


IN_TRIALS_SHARE = 0.90    # the share of the copy in the same trials that the large shapes are held to


def under_share(rows: pd.DataFrame, share: float) -> dict:
    """How many comparison rows read under `share` of their ceiling: at the median (`under`), and with
    their whole interval (`under_beyond`: the share at ours's fastest bound, ours_low_ms, still under
    it). `target` is the share as a percentage."""
    frac = rows["ours_frac"].astype(float)
    best = frac * rows["ours_ms"].astype(float) / rows["ours_low_ms"].astype(float)
    return {"target": pct(share), "under": int((frac < share).sum()), "under_beyond": int((best < share).sum())}


def in_trial_copy(against_copy: pd.DataFrame) -> dict | None:
    """Large shapes (>= LARGE_SOFTMAX_BYTES) against the copy of their bytes timed in the same trials
    (the `copy` bound, rooflab.studies.softmax; vs_best = the copy's time over ours, ours' share of its
    rate): how many, the median and lowest share, how many reach IN_TRIALS_SHARE at the median and how
    many at the high end of their interval (`reach_interval`); None where the run timed no copy."""
    big = against_copy[against_copy["bytes"] >= LARGE_SOFTMAX_BYTES].dropna(subset=["vs_best"])
    if big.empty:
        return None
    reach_interval = int((big["vs_best_high"] >= IN_TRIALS_SHARE).sum()) if "vs_best_high" in big else None
    return {"n": len(big), "median": pct(big["vs_best"].median()), "low": _at(big, "vs_best"),
            "share": pct(IN_TRIALS_SHARE), "reach": int((big["vs_best"] >= IN_TRIALS_SHARE).sum()),
            "reach_interval": reach_interval}


def sized_share(large: pd.DataFrame, ceilings: dict, kind: str, share: float) -> dict | None:
    """Large rows against a kernel moving the same bytes (sized_ceilings.rate_at: the GPU's reads or copies of
    a few sizes, `kind`), where those were measured: the smallest row's size-matched rate and its share of
    the whole-buffer ceiling (<kind>_tbps), ours as a share of the size-matched rate (median and lowest), and
    how many rows read under `share` of it (`under`; `target`, the share as a percentage)."""
    sized = large.assign(own=[rate_at(ceilings, b, kind) for b in large["bytes"]])
    if sized["own"].isna().any() or not ceilings.get(f"{kind}_tbps"):
        return None
    sized = sized.assign(share=sized["ours_metric"] / sized["own"])
    smallest = sized.loc[sized["bytes"].idxmin()]
    return {"low": _at(sized, "share"), "median": pct(sized["share"].median()),
            "smallest": megabytes(smallest["bytes"]), "smallest_read": num(smallest["own"]),
            "smallest_frac": pct(smallest["own"] / ceilings[f"{kind}_tbps"]),
            "under": int((sized["share"] < share).sum()), "target": pct(share)}


def paged_layout(paged: pd.DataFrame) -> dict | None:
    """The paged cache (ours_paged) against the contiguous one (ours), same kernel and bytes: shapes within
    PAGED_WITHIN of the contiguous time or tied with it, and the paged read's speed as a share of the
    contiguous one (geometric mean with its interval, and the slowest shape)."""
    paged = paged.dropna(subset=["vs_best"])
    if paged.empty:
        return None
    within = (paged["vs_best"] <= 1 + PAGED_WITHIN) | (paged["vs_best_outcome"] == "tie")
    gm, low, high = bootstrap_geomean(1.0 / paged["vs_best"])
    slow = paged.loc[paged["vs_best"].idxmax()]
    return {"n": len(paged), "within": int(within.sum()), "tolerance": f"{PAGED_WITHIN:.0%}", "page": PAGED_PAGE_SIZE,
            "gm": ratio(gm), "gm_interval": ratio_interval(low, high), "low": ratio(1.0 / slow["vs_best"]),
            "low_shape": slow["shape"], "low_dtype": dt(slow["dtype"])}


# ---------------------------------------------------------------- end to end

def e2e_graph(frame: pd.DataFrame) -> dict | None:
    """Each block's totals replayed as a CUDA graph against its call-by-call (events) totals: every
    length (`lengths`), and per phase (`by_phase`, decode first: the host-bound step) its lengths and
    the ranges of both timings."""
    totals = frame[(frame["part"] == "total") & (frame["status"] == "ok") & frame["median_ms"].notna()]
    graph, events = totals[totals["timing"] == E2E_GRAPH_TIMING], totals[totals["timing"] == PLAIN_TIMING]
    if graph.empty:
        return None
    lengths, impls = [], sorted(set(graph["impl"]) | {"eager", "sdpa", "ours_attention", "ours_softmax"})
    for (phase, seqlen, cache_len), part in graph.groupby(["phase", "seqlen", "cache_len"], sort=True):
        same = events[(events["phase"] == phase) & (events["seqlen"] == seqlen) & (events["cache_len"] == cache_len)]
        entry = {"phase": phase, "length": f"L={cache_len}" if phase == "decode" else f"S={seqlen}",
                 "cache_len": num(cache_len), "seqlen": num(seqlen), **{i: DASH for i in impls}}
        for _, r in part.iterrows():
            entry[r["impl"]] = num(r["median_ms"])
            plain = same[same["impl"] == r["impl"]]["median_ms"]
            entry[f"{r['impl']}_events"] = num(plain.iloc[0]) if not plain.empty else ""
        lengths.append(entry)

    def ranges(g: pd.DataFrame) -> dict:
        plain = events.merge(g, on=["phase", "seqlen", "cache_len", "impl"], suffixes=("", "_graph"))
        return {"events_range": span(num(plain["median_ms"].min()), num(plain["median_ms"].max())),
                "graph_range": span(num(plain["median_ms_graph"].min()), num(plain["median_ms_graph"].max()))}
    phases = sorted(set(graph["phase"]), key=lambda p: (p != "decode", p))
    by_phase = [{"phase": p, "lengths": [e for e in lengths if e["phase"] == p],
                 **ranges(graph[graph["phase"] == p])} for p in phases]
    return {"lengths": lengths, "phases": sorted(set(graph["phase"])), "by_phase": by_phase, **ranges(graph),
            "impls": sorted(set(graph["impl"]))}
