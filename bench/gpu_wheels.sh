#!/usr/bin/env bash
# Run on a machine with PyPI access, from the repository root: download the wheels that a GPU
# box without internet lacks for bench/finetune_gpu_check.sh, into var/gpu-wheels/ (or $1).
#
# The box has Python 3.12 with torch, numpy, pandas, pyarrow, safetensors, huggingface_hub,
# peft, transformers, accelerate, matplotlib, tqdm, scipy, einops, jaxtyping, lightning, pyyaml
# and pytest. What `trader finetune` and bench/finetune.py import beyond those: our settings
# and logging stack, the trading calendars, the scoring rules (scoringrules), and the
# reference packages the bench measures against (toto-ts, kronos-model-arch and what their
# model code imports). No torch, numpy or pandas: the check script installs these wheels with
# --no-deps, so the box's torch stays.
# bitsandbytes (QLoRA) is left out: its wheel alone is larger than the upload allows.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-var/gpu-wheels}
PIP=${PIP:-.venv/bin/python -m pip}
mkdir -p "$DIR"
$PIP download --disable-pip-version-check --quiet --no-deps --only-binary=:all: \
    --python-version "${PYTHON_VERSION:-3.12}" --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform any -d "$DIR" \
    pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
    typing-extensions==4.16.0 pydantic-settings==2.16.3 python-dotenv==1.2.4 \
    structlog==26.1.0 exchange-calendars==4.13.2 korean-lunar-calendar==0.4.0 \
    pyluach==2.3.0 toolz==1.2.0 tzdata==2026.6 scoringrules==0.10.0 \
    toto-ts==0.2.0 kronos-model-arch==0.1.0 gluonts==0.17.0 rotary-embedding-torch==0.8.6 \
    'setuptools>=75'
ls "$DIR"
du -sh "$DIR"
