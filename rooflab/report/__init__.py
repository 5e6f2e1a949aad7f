"""From result CSVs to figures and the paper. Imports no measuring code and needs no torch.

load        read every GPU's result folder and the published tables; report bad ones by name
analysis    shared rules: peers and seeds' designs, the timing that judges a case, win / tie / loss,
            geometric means with bootstrap intervals, the lead GPU
derive      the shared tables, derived once and written under results/aggregate/: cases, comparisons,
            verdicts, Amdahl checks
verdicts    each published claim against our measurement (called by derive only)
headline    each study summed up the way the field judges it, from the comparisons
context     the builder over the section views (views/: method, studies, e2e, claims, quality, environment)
figures/    matplotlib figures per study (softmax, attention, decode, e2e, overview) and one style module
catalog     the fixed figure list; captions live in workflow/report/<name>.rst
fmt         numbers and implementation labels as the paper prints them
markup      LaTeX / Markdown escaping and the two output dialects
render      Jinja templates -> paper.md, paper.tex (and paper.pdf via latexmk)
deps        the modules a report script imports (the report rules' inputs)
"""
