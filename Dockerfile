# syntax=docker/dockerfile:1
# trader on an NVIDIA GPU. The build stage makes a virtualenv with torch built for CUDA 12.8 (the
# first CUDA with Blackwell sm_120 kernels) and the package; the image copies only that virtualenv
# onto a small CUDA 12.8 base and runs it as a non-root user.
#
#   docker build -t trader .                            # eager models (the default)
#   docker build --target compile -t trader:compile .   # + the C toolchain torch.compile needs
#   docker run --gpus all -v trader-state:/var/lib/trader trader
#
# The `-base` CUDA image carries the CUDA runtime and the driver's forward-compatibility
# libraries; cuBLAS, cuDNN and NCCL come with torch's own wheels, so the `-runtime` image would
# hold a second copy of them. The host needs an NVIDIA driver >= 570 and the container toolkit.
# This file is linted (hadolint) but was not built where it was written: see deploy/README.md.

ARG CUDA_IMAGE=nvidia/cuda:12.8.1-base-ubuntu24.04

FROM ${CUDA_IMAGE} AS build
ARG TORCH_VERSION=2.9.1
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Ubuntu's python3 (3.12): the image copies this virtualenv, so both stages use the same one.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
ENV VIRTUAL_ENV=/opt/trader/venv \
    PATH=/opt/trader/venv/bin:$PATH \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv "$VIRTUAL_ENV"
# torch from PyTorch's CUDA 12.8 index; the build fails unless it carries sm_120 kernels.
RUN pip install --no-cache-dir --index-url "$TORCH_INDEX_URL" "torch==${TORCH_VERSION}" \
    && python -c 'import torch; archs = torch._C._cuda_getArchFlags(); \
assert "sm_120" in archs, f"torch {torch.__version__} has no sm_120 kernels: {archs}"'
WORKDIR /src
# Dependencies before the source, so a code change reuses this layer.
COPY pyproject.toml ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt
COPY README.md ./
COPY trader ./trader
RUN pip install --no-cache-dir --no-deps . && pip check

FROM ${CUDA_IMAGE} AS app
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/trader \
        --shell /usr/sbin/nologin trader \
    && install -d -o trader -g trader -m 0750 /var/lib/trader /var/cache/trader \
        /var/cache/trader/huggingface /var/cache/trader/inductor
COPY --from=build /opt/trader/venv /opt/trader/venv
COPY config/default.toml /etc/trader/trader.toml
COPY deploy/docker/healthcheck.py /opt/trader/healthcheck.py
# Settings that belong to the container: the config file, the ledger and caches on volumes,
# metrics reachable from the compose network (publish the port on loopback only). HOME is the
# state volume, so libraries' ~/.cache stays writable on a read-only root file system.
ENV PATH=/opt/trader/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TRADER_CONFIG=/etc/trader/trader.toml \
    TRADER_LEDGER__PATH=/var/lib/trader/trader.sqlite3 \
    TRADER_METRICS__HOST=0.0.0.0 \
    HF_HOME=/var/cache/trader/huggingface \
    TORCHINDUCTOR_CACHE_DIR=/var/cache/trader/inductor \
    TRITON_CACHE_DIR=/var/cache/trader/inductor/triton \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
WORKDIR /var/lib/trader
# Numeric, so that runtimes which check for a non-root user (runAsNonRoot) can tell.
USER 10001:10001
# The ledger; model weights; compiled kernels (keeping them makes a restart warm up fast).
VOLUME ["/var/lib/trader", "/var/cache/trader/huggingface", "/var/cache/trader/inductor"]
EXPOSE 9108
# Start-up covers a first download of the weights and the model warm-up.
HEALTHCHECK --interval=30s --timeout=10s --start-period=10m --retries=3 \
    CMD ["python3", "/opt/trader/healthcheck.py"]
STOPSIGNAL SIGTERM
CMD ["trader", "run"]

# torch.compile (opt-in: forecast.<model>.runtime = "compile") builds kernels at run time and
# needs a C compiler and Python's headers; the eager default does not.
FROM app AS compile
USER 0:0
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev python3-dev \
    && rm -rf /var/lib/apt/lists/*
USER 10001:10001

# The default target: the eager image.
FROM app AS runtime
