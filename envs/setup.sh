#!/usr/bin/env bash
# Set up .venv for Roofline Lab on a fresh machine.
# With an NVIDIA GPU (nvidia-smi answers): PyPI's CUDA build of torch and the optional peers.
# Without one: torch 2.13.0 is installed first, so the requirements' torch range is already
# met and no multi-GB CUDA build is pulled in (on the project's CI machines that version is
# a CPU build served from local disk).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
if nvidia-smi >/dev/null 2>&1; then
    python -m pip install -q -r envs/requirements.txt -r envs/requirements-peers.txt
else
    python -m pip install -q "torch==2.13.0"
    python -m pip install -q -r envs/requirements.txt
fi
python -c "import torch, triton, snakemake; print('torch', torch.__version__, '| triton', triton.__version__, '| cuda', torch.cuda.is_available())"
