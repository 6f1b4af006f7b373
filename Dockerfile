# syntax=docker/dockerfile:1
# trader on an NVIDIA GPU, on the Python and the torch its tests run on: Python 3.11 (the
# official image, Debian 12 "bookworm") and torch 2.13.0. The build stage makes a virtualenv
# with torch and the package; the image copies only that virtualenv and runs it as a non-root
# user.
#
#   docker build -t trader .                            # eager models (the default)
#   docker build --target compile -t trader:compile .   # + the C toolchain torch.compile needs
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu \
#       --build-arg TORCH_REQUIRE_ARCH= -t trader:cpu .  # torch's CPU build, no GPU
#   docker run --gpus all -v trader-state:/var/lib/trader -v trader-locks:/run/trader trader
#
# torch: PyPI's Linux wheel of torch 2.13.0 is its CUDA 13.0 build. The CUDA libraries
# (cuda-toolkit, cuDNN, NCCL) come with it as pip packages, so the base image carries no CUDA;
# the NVIDIA container toolkit mounts the host's driver (NVIDIA_VISIBLE_DEVICES below). CUDA 13
# has Blackwell (sm_120) kernels and needs an NVIDIA driver >= 580 on the host; the toolkit
# refuses to start the container on an older one (NVIDIA_REQUIRE_CUDA). The tests run torch's
# CPU build of the same release (Makefile's TORCH_SPEC). Every other dependency comes from
# requirements/runtime.lock, pinned with its hashes (`make lock`): two builds a month apart
# install the same files. torch is outside it, as its CUDA and CPU builds differ (Makefile).
# This file is linted (hadolint) but was not built where it was written: see deploy/README.md.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://pypi.org/simple
# The build fails unless torch carries kernels for this architecture (empty: no check).
ARG TORCH_REQUIRE_ARCH=sm_120
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV VIRTUAL_ENV=/opt/trader/venv \
    PATH=/opt/trader/venv/bin:$PATH \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The image's own Python (/usr/local/bin/python3.11): the app stage has the same one, so the
# virtualenv it copies keeps working.
RUN python3 -m venv "$VIRTUAL_ENV"
RUN pip install --no-cache-dir --index-url "$TORCH_INDEX_URL" "torch==${TORCH_VERSION}" \
    && python -c 'import os, torch; want = os.environ["TORCH_REQUIRE_ARCH"]; \
archs = torch._C._cuda_getArchFlags() if torch.version.cuda else ""; \
assert not want or want in archs, f"torch {torch.__version__} has no {want} kernels: {archs!r}"'
WORKDIR /src
# Dependencies before the source, so a code change reuses this layer: the lock's files, each
# checked against its hash.
COPY requirements/runtime.lock ./requirements/
RUN pip install --no-cache-dir --require-hashes -r requirements/runtime.lock
COPY pyproject.toml README.md ./
COPY trader ./trader
RUN pip install --no-cache-dir --no-deps . && pip check

FROM ${PYTHON_IMAGE} AS app
# The base image has everything the daemon needs from Debian (ca-certificates included).
# /run/trader holds the live symbol locks (broker.lock_dir); mount one named volume there in
# every trader container of the host so that they see each other's locks.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/trader \
        --shell /usr/sbin/nologin trader \
    && install -d -o trader -g trader -m 0750 /var/lib/trader /var/cache/trader \
        /var/cache/trader/huggingface /var/cache/trader/inductor \
    && install -d -o trader -g trader -m 0700 /run/trader
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
    TRADER_BROKER__LOCK_DIR=/run/trader/locks \
    TRADER_METRICS__HOST=0.0.0.0 \
    HOME=/var/lib/trader \
    HF_HOME=/var/cache/trader/huggingface \
    TORCHINDUCTOR_CACHE_DIR=/var/cache/trader/inductor \
    TRITON_CACHE_DIR=/var/cache/trader/inductor/triton \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=13.0"
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
# needs a C compiler; the image's Python already has its headers. The eager default needs none.
# Versions: Debian 12's gcc, and its libc6-dev at any of its point-release revisions (the
# mirror keeps only the newest, so an exact revision would stop building at the next one).
FROM app AS compile
USER 0:0
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc=4:12.2.0-3 'libc6-dev=2.36-9+deb12u*' \
    && rm -rf /var/lib/apt/lists/*
USER 10001:10001

# The default target: the eager image.
FROM app AS runtime
