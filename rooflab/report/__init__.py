"""From result CSVs to figures and the paper.

load        read every GPU's result folder and the published tables; report bad ones by name
datasheet   vendor numbers per GPU (data/gpus.yaml)
analysis    shared selections: primary GPU, peers and seeds, the timing that judges a case, speedups
headline    each study summed up the way the field judges it (the abstract's numbers)
fmt         numbers as the paper prints them
verdicts    each published claim against our measurement
figures     matplotlib figures (PNG and PDF), one fixed file per figure
markup      LaTeX / Markdown escaping and the two output dialects
context     the numbers and tables both paper formats render
render      Jinja templates -> paper.md, paper.tex (and paper.pdf via latexmk)
"""
