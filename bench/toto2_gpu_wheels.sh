#!/usr/bin/env bash
# The wheels bench/toto2_gpu_check.sh installs on a GPU box that has Python 3.12 and torch,
# numpy, safetensors, huggingface_hub, einops, jaxtyping but no internet: the reference toto-2
# and what its import needs, and what trader's Toto 2.0 path imports. cp312 manylinux wheels,
# no dependencies followed, never torch, numpy or pandas (the box's stay; uploads are capped
# at 64 MiB).
#   bash bench/toto2_gpu_wheels.sh [DIR]      (default: gpu-wheels, ignored by git)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-gpu-wheels}
mkdir -p "$dir"
python3 -m pip --disable-pip-version-check download --quiet --no-deps --dest "$dir" \
    --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 --platform any \
    toto-2==2.0.0 dd-unit-scaling==0.1.0 unit-scaling==0.3.5 gluonts==0.17.0 \
    docstring-parser tabulate toolz lightning lightning-utilities torchmetrics \
    "scipy<1.17" \
    pydantic pydantic-core pydantic-settings annotated-types typing-inspection \
    python-dotenv structlog
du -sh "$dir"
