"""Probe: attention forward at Nq != Nk (chunked prefill) and GQA 8:1 on an H200, ours against
cuDNN and FlashAttention-2 (torch SDPA backends) and our Triton kernel alone.

    PYTHONUNBUFFERED=1 python3 probes/attn_nqnk.py [--dtypes float16,bfloat16] [--budget 140]

Shapes (B=4, Hq=32, D=128; the full grid's chunked-prefill entry is B=4 H=32 Nq=1024 Nk=8192):
chunked prefill Nq=1024 Nk=8192 causal and not, Nq=1024 Nk=4096 causal, GQA 8:1 (Hkv=4) N=8192
causal and not, and N=8192 causal (Nq == Nk, MHA) as the control. The implementations, inputs,
float64 reference (on the study's row/head subset) and tolerance are rooflab.studies.attention's,
so the peers get exactly what the sweep gives them: the bottom-right mask for causal Nq != Nk as
torch.nn.attention.bias.causal_lower_right, GQA through enable_gqa or K/V expanded outside the
timed call; a backend SDPA serves with a dense (Nq, Nk) mask is `unsupported`, as in the study.
Checks, timing, budget (default 140 s) and table: probes/attn_probe.py. Writes $OUT/attn_nqnk.csv.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn_probe import run  # noqa: E402


def _shape(nq, nk, causal, hkv=32):
    return {"batch": 4, "heads_q": 32, "heads_kv": hkv, "seqlen_q": nq, "seqlen_k": nk, "head_dim": 128,
            "causal": causal}


# most important first: the budget guard drops the tail
SHAPES = [
    ("chunk 1024/8192 causal", _shape(1024, 8192, True)),
    ("chunk 1024/8192", _shape(1024, 8192, False)),
    ("chunk 1024/4096 causal", _shape(1024, 4096, True)),
    ("gqa8 8192 causal", _shape(8192, 8192, True, hkv=4)),
    ("gqa8 8192", _shape(8192, 8192, False, hkv=4)),
    ("control 8192 causal", _shape(8192, 8192, True)),
]

if __name__ == "__main__":
    run("attn_nqnk", SHAPES, 140.0, "B=4 Hq=32 D=128, Nq != Nk and GQA 8:1",
        "targets (issue 11): chunk 1024/8192 causal ours/fa2 >= 1.5 and ours/cudnn >= 0.9")
