"""Probe: attention forward at head dim 64 on an H200, ours (attention(): the Gluon Hopper kernel
where it applies) against cuDNN and FlashAttention-2 (torch SDPA backends) and our Triton kernel
alone (attention_triton()).

    PYTHONUNBUFFERED=1 python3 probes/attn_d64.py [--dtypes float16,bfloat16] [--budget 55]

Shapes: B=4 Hq=Hkv=32 D=64, N = 4096 and 8192 (Nq == Nk), causal and not, fp16 and bf16. The
implementations, inputs, float64 reference (on the study's rows: both edges and a spread, batches
0 and B-1, three heads) and tolerance are rooflab.studies.attention's, as probes/attn_nqnk.py uses
them: the peers are F.scaled_dot_product_attention(is_causal=...) under sdpa_kernel(CUDNN_ATTENTION)
or sdpa_kernel(FLASH_ATTENTION).

The table's path column is the kernel attention() ran (`gluon-hopper` expected at every shape).
Checks, timing, budget (default 55 s; past it ours_triton, whose first call autotunes, is not
called) and table: probes/attn_probe.py. Writes $OUT/attn_d64.csv.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attn_probe import run  # noqa: E402

SHAPES = [(f"N={n}{' causal' if causal else ''}",
           {"batch": 4, "heads_q": 32, "heads_kv": 32, "seqlen_q": n, "seqlen_k": n, "head_dim": 64, "causal": causal})
          for n in (4096, 8192) for causal in (False, True)]

if __name__ == "__main__":
    run("attn_d64", SHAPES, 55.0, "B=4 Hq=32 D=64",
        "merge D=64 on the Gluon path if ours (gluon-hopper) beats ours_triton (/trit > 1) at every row")
