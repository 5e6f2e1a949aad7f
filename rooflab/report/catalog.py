"""The fixed list of figures (Snakemake needs fixed outputs): name -> (study, category, caption).

Kept free of heavy imports so workflow/rules/report.smk can read it at parse time.
"""

FIGURES = {
    "softmax_bandwidth": (
        "softmax", "Softmax",
        "Softmax bandwidth (bytes read and written / median time) against row length, one panel per dtype, at the "
        "largest row count measured for each length; the seeds' designs dashed. Grey bands: lengths whose shape is "
        "small or short enough to have kernel-time rows, where the hollow markers are the kernel's device time "
        "(CUPTI, L2 flushed) and stay off the plain-call lines. Solid line: the GPU's measured copy ceiling; dashed: its datasheet bandwidth. Crosses on "
        "the axis: rows that failed the correctness check."),
    "softmax_speedup": (
        "softmax", "Softmax",
        "Speedup of our softmax (median time of the other / ours, same run) over the fastest peer (torch, torch.compile, "
        "Liger; filled) and over the faster of the seeds' designs (hollow) at each shape, against the bytes the shape "
        "moves; bars: the ratio's interval from both rows' 95% confidence intervals of the median, and the legend "
        "counts wins, ties (intervals overlap or medians within 2%) and losses. Each shape is judged in the timing that measures its kernel: the kernel's device time (CUPTI) where "
        "it was measured (small or short shapes), plain calls elsewhere; grey: below the launch-bound threshold."),
    "softmax_strategies": (
        "softmax", "Softmax",
        "Bandwidth of each softmax strategy forced on its own (one implementation per strategy) against row length, at the largest row "
        "count measured for each length, with the dispatched kernel (ours) dashed: where the curves cross is where the "
        "dispatcher must switch. Grey bands and hollow markers: small or short shapes, in kernel time (CUPTI)."),
    "launch_bound": (
        "all", "Timing",
        "Plain call against the kernel alone: median time of a plain call (CUDA events, hollow) and the kernel's "
        "device time from CUPTI (filled), both with the L2 flushed, for ours and the everyday peer at every shape with "
        "kernel-time rows, against bytes moved. Horizontal lines: the GPU's measured launch floor, plain and in a "
        "graph."),
    "claims": (
        "all", "Claims",
        "Every published number of the seeds that has a measurement of ours, one panel per seed: the claim (blue) as a "
        "fraction of the datasheet peak of the GPU it was published on, beside our measurement of the same "
        "implementation, shape and dtype (red) as a fraction of our GPU's datasheet peak (bandwidth for softmax, "
        "dense tensor rate of the dtype for attention). Each panel names both GPUs."),
    "attention_tflops": (
        "attention", "Attention",
        "Attention forward throughput (4 B H Nq Nk D FLOPs / time, halved when causal) against sequence length, per "
        "implementation, one panel per head dimension and mask, fp16 (bf16 is in attention.csv); the y axis is shared "
        "and covers every curve. Triangles on the axis: out of memory; dotted line: where the eager score matrix "
        "outgrows the GPU's memory."),
    "decode_bandwidth": (
        "decode", "Decode",
        "Decode attention bandwidth (K and V bytes read / time) against cached tokens, fp16 (bf16 is in decode.csv), "
        "non-ragged: one panel per batch size, with Hkv = Hq = 32 (the anchors' configuration) on the top row and "
        "grouped-query Hkv = 8 below, against the GPU's measured read-only ceiling (solid) and datasheet bandwidth "
        "(dashed)."),
    "decode_split": (
        "decode", "Decode",
        "Split-KV decode against the same kernel without the split: time without / time with, against cached tokens, "
        "per batch size (colour) and KV-head count (solid Hkv = 32, dashed Hkv = 8), fp16; above 1 splitting the cache "
        "helps."),
    "roofline": (
        "all", "Roofline",
        "Roofline: attained throughput against arithmetic intensity for prefill attention and decode, under the "
        "GPU's measured read bandwidth and dense fp16 matmul ceiling (dashed: datasheet)."),
    "cross_gpu": (
        "all", "Cross-GPU",
        "Across GPUs: our kernels and the fastest peer (the seeds' designs excluded) as a fraction of each GPU's own "
        "measured ceiling, from plain-call rows (median over the shapes measured on that GPU; bars span the lowest "
        "to the highest shape)."),
    "e2e_breakdown": (
        "e2e", "End-to-end",
        "One decoder block, one panel per phase and length: time per part timed with CUDA events (host gaps land in "
        "'other') for each configuration (PyTorch eager, our softmax swapped in, SDPA, our attention), the parts "
        "stacked to the block's total; diamonds: the whole decode step replayed as one CUDA graph, its GPU time."),
    "reproduction": (
        "all", "Reproduction",
        "Reproduction: each case's median time in a fresh run against the committed run on the same GPU, log-log, "
        "one marker per study, with the line y = x and a band of +-5% around it; a case reproduces when the two "
        "95% confidence intervals of the median overlap or the medians lie within 5% (cases of one run only are "
        "left out)."),
}

NAMES = list(FIGURES)
