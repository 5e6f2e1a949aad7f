"""The fixed list of figures (Snakemake needs fixed outputs): name -> (study, category).

Each figure's caption is held once, in workflow/report/<name>.rst (the file Snakemake's report shows
beside the image); the paper reads the same file (`caption`). Kept free of heavy imports so
workflow/rules/report.smk can read it at parse time.
"""
from pathlib import Path

CAPTIONS = Path(__file__).resolve().parents[2] / "workflow" / "report"

FIGURES = {
    "softmax_bandwidth": ("softmax", "Softmax"),
    "softmax_speedup": ("softmax", "Softmax"),
    "softmax_strategies": ("softmax", "Softmax"),
    "launch_bound": ("all", "Timing"),
    "claims": ("all", "Claims"),
    "attention_tflops": ("attention", "Attention"),
    "decode_bandwidth": ("decode", "Decode"),
    "decode_split": ("decode", "Decode"),
    "roofline": ("all", "Roofline"),
    "cross_gpu": ("all", "Cross-GPU"),
    "e2e_breakdown": ("e2e", "End-to-end"),
    "reproduction": ("all", "Reproduction"),
}

NAMES = list(FIGURES)


def caption_file(name: str) -> str:
    """workflow/report/<name>.rst, relative to the repository root."""
    return f"workflow/report/{name}.rst"


def caption(name: str, folder: Path = CAPTIONS) -> str:
    """The caption of a figure: the first paragraph of its .rst file, joined into one line."""
    text = (folder / f"{name}.rst").read_text()
    return " ".join(text.strip().split("\n\n")[0].split())
