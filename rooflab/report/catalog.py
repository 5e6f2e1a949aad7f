"""The fixed list of figures (Snakemake needs fixed outputs): name -> (study, category, caption).

Kept free of heavy imports so workflow/rules/report.smk can read it at parse time.
"""

FIGURES = {
    "softmax_bandwidth": (
        "softmax", "Softmax",
        "Softmax bandwidth (bytes read and written / median time) against row length, per implementation "
        "and dtype, at the largest row count measured for each length. Solid line: the GPU's measured copy "
        "ceiling; dashed: its datasheet bandwidth. Crosses on the axis: rows that failed the correctness check."),
    "softmax_speedup": (
        "softmax", "Softmax",
        "Speedup of our softmax (median time of the peer / ours, same run) over torch.softmax and over the "
        "fastest correct peer at each shape, against the bytes the shape moves. The vertical line marks the "
        "size below which cases are launch-bound and also timed as CUDA-graph replay."),
    "softmax_strategies": (
        "softmax", "Softmax",
        "Bandwidth of each softmax strategy forced on its own (ours_<strategy>) against row length, with the "
        "dispatched kernel (ours) dashed: where the curves cross is where the dispatcher must switch."),
    "launch_bound": (
        "all", "Timing",
        "Launch-bound region: median time of plain calls (CUDA events) and of CUDA-graph replay for small "
        "cases, against bytes moved. Horizontal lines: the GPU's measured launch floor, plain and in a graph."),
    "claims": (
        "all", "Claims",
        "The seeds' published numbers beside our measurement of the same implementation, shape and dtype, each "
        "as a fraction of its own GPU's datasheet peak (bandwidth for softmax, dense tensor peak for attention)."),
    "attention_tflops": (
        "attention", "Attention",
        "Attention forward throughput (4 B H Nq Nk D FLOPs / time, halved when causal) against sequence length, "
        "per implementation, for each head dimension and masking. Triangles on the axis: out of memory; "
        "dotted line: where the eager score matrix outgrows the GPU's memory."),
    "decode_bandwidth": (
        "decode", "Decode",
        "Decode attention bandwidth (K and V bytes read / time) against cached tokens, one panel per batch size, "
        "against the GPU's measured read-only ceiling (solid) and datasheet bandwidth (dashed)."),
    "decode_split": (
        "decode", "Decode",
        "Split-KV decode against the same kernel without the split: time without / time with, against cached "
        "tokens, per batch size (above 1: splitting the cache helps)."),
    "roofline": (
        "all", "Roofline",
        "Roofline: attained throughput against arithmetic intensity for prefill attention and decode, under the "
        "GPU's measured read bandwidth and dense matmul ceiling (dashed: datasheet)."),
    "cross_gpu": (
        "all", "Cross-GPU",
        "Across GPUs: our kernels and the fastest peer as a fraction of each GPU's own measured ceiling "
        "(median over the shapes measured on that GPU; bars span the lowest to highest shape)."),
    "e2e_breakdown": (
        "e2e", "End-to-end",
        "One decoder block, prefill and decode: GPU time per part for each configuration (PyTorch eager, our "
        "softmax swapped in, SDPA, our attention), the parts stacked to the block's total."),
}

NAMES = list(FIGURES)
