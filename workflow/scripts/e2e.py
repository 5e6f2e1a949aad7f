"""Rule e2e: one decoder block, PyTorch defaults vs our kernels, time by part -> e2e.csv."""
import csv

import torch

from rooflab.bench import DTYPES
from rooflab.e2e import DecoderBlock, measure
from rooflab.gpus import read_ceilings
from rooflab.schema import columns
from rooflab.workflow import log_to

log_to(snakemake.log[0])
model, grid = snakemake.params.model, snakemake.params.grid
dtype = DTYPES[model["dtype"]]
ceilings = read_ceilings(snakemake.input.ceilings)
label = "bf16" if model["dtype"] == "bfloat16" else "fp16"
ceiling, datasheet = ceilings.get(f"matmul_{label}_tflops"), ceilings.get(f"datasheet_{label}_tflops")
torch.manual_seed(0)
block = DecoderBlock(model["width"], model["heads"], model["kv_heads"], model["mlp_ratio"], dtype, "cuda")
with open(snakemake.output.csv, "w", newline="") as handle:
    writer = csv.DictWriter(handle, fieldnames=columns("e2e"))
    writer.writeheader()
    for phase in ("prefill", "decode"):
        for length in grid[phase]:
            for row in measure(block, phase, length, model["batch"], snakemake.params.reps, dtype):
                flops = row.pop("flops", None)
                if flops and row.get("median_ms"):
                    row["tflops"] = flops / (row["median_ms"] * 1e-3) / 1e12
                    row["frac_ceiling"] = row["tflops"] / ceiling if ceiling else None
                    row["frac_datasheet"] = row["tflops"] / datasheet if datasheet else None
                row.setdefault("timing", "events")
                writer.writerow(dict(row, gpu=snakemake.params.gpu, study="e2e", dtype=model["dtype"]))
                handle.flush()
                print(f"{phase:8} {length:6} {row['impl']:15} {row['part']:12} {row['timing']:9} {row['status']:9} {row.get('median_ms')}")
