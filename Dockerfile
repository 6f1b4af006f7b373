# syntax=docker/dockerfile:1
# trader on an NVIDIA GPU, on the Python and the torch its tests run on: Python 3.11 (the
# official image, Debian 12 "bookworm") and torch 2.13.0. The build stage makes a virtualenv
# with torch and the package; the image copies only that virtualenv and runs it as a non-root
# user. Build it with `make image` (deploy/docker/build-image.sh: docker or podman, the GPU or
# the CPU torch build, the host's pip configuration as build secrets; deploy/README.md):
#
#   make image                          # trader:latest, PyPI's CUDA torch, sm_120 checked
#   make image TORCH=cpu                # trader:cpu, torch's CPU build
#   make image TORCH=cpu BASE=local     # on a local Debian 12 base, where no registry answers
#   docker run --gpus all -v trader-state:/var/lib/trader -v trader-locks:/run/trader \
#       trader:latest
#
# torch: PyPI's Linux wheel of torch 2.13.0 is its CUDA 13.0 build. The CUDA libraries
# (cuda-toolkit, cuDNN, NCCL) come with it as pip packages, so the base image carries no CUDA;
# the NVIDIA container toolkit mounts the host's driver (NVIDIA_VISIBLE_DEVICES below). CUDA 13
# has Blackwell (sm_120) kernels and needs an NVIDIA driver >= 580 on the host; the toolkit
# refuses to start the container on an older one (NVIDIA_REQUIRE_CUDA). The tests run torch's
# CPU build of the same release (Makefile's TORCH_SPEC). Every other dependency comes from
# requirements/runtime.lock, pinned with its hashes (`make lock`): two builds a month apart
# install the same files. torch is outside it, as its CUDA and CPU builds differ (Makefile).
#
# pip reaches packages as the host's pip does: build-image.sh passes the host's merged pip
# configuration (secret pip.conf, mounted where pip reads it) and the CA bundle it names
# (secret pip-cert) only to the RUN steps that install; podman also mounts the local folders
# its indexes name, read-only. None of it is in a layer, an ARG or the history. Without a host
# configuration both secrets are empty and pip uses PyPI.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG TORCH_VERSION=2.13.0
# Empty: the configured indexes (PyPI without a configuration); e.g.
# https://download.pytorch.org/whl/cpu for the CPU build. A public URL only: build arguments
# show in the build stage's history; private mirrors belong in the pip configuration.
ARG TORCH_INDEX_URL=
# The build fails unless torch carries kernels for this architecture; "cpu": unless torch is a
# CPU build; empty: no check.
ARG TORCH_REQUIRE_ARCH=sm_120
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# PIP_QUIET=2: pip prints errors only, so the index URLs it looks in stay out of the build log.
ENV VIRTUAL_ENV=/opt/trader/venv \
    PATH=/opt/trader/venv/bin:$PATH \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_QUIET=2
# The base's own Python (the official image's /usr/local/bin/python3.11, or Debian's
# /usr/bin/python3.11 on the local base): the app stage starts from the same base, so the
# virtualenv it copies keeps working.
RUN python3 -m venv "$VIRTUAL_ENV"
RUN --mount=type=secret,id=pip.conf,target=/etc/pip.conf --mount=type=secret,id=pip-cert \
    if [ -n "$TORCH_INDEX_URL" ]; then export PIP_INDEX_URL="$TORCH_INDEX_URL"; fi \
    && pip install --no-cache-dir "torch==${TORCH_VERSION}" \
    && python -c 'import os, torch; want = os.environ["TORCH_REQUIRE_ARCH"]; \
archs = torch._C._cuda_getArchFlags() if torch.version.cuda else "cpu"; \
assert want in ("", archs) or want != "cpu" and want in archs, \
    f"torch {torch.__version__} is not the build asked for ({want}): {archs!r}"'
WORKDIR /src
# Dependencies before the source, so a code change reuses this layer: the lock's files, each
# checked against its hash.
COPY requirements/runtime.lock ./requirements/
RUN --mount=type=secret,id=pip.conf,target=/etc/pip.conf --mount=type=secret,id=pip-cert \
    pip install --no-cache-dir --require-hashes -r requirements/runtime.lock
COPY pyproject.toml README.md ./
COPY trader ./trader
# The package's build backend comes from the indexes too.
RUN --mount=type=secret,id=pip.conf,target=/etc/pip.conf --mount=type=secret,id=pip-cert \
    pip install --no-cache-dir --no-deps . && pip check

FROM ${PYTHON_IMAGE} AS app
# The base image has everything the daemon needs from Debian (ca-certificates included).
# /run/trader holds the live symbol locks (broker.lock_dir); mount one named volume there in
# every trader container of the host so that they see each other's locks.
# The group first, so that it gets GID 10001 (--user-group would take the next system GID).
RUN groupadd --system --gid 10001 trader \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/trader \
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
# needs a C compiler and Python's headers: the official image has the headers, Debian's Python
# (the local base) needs python3-dev. The eager default needs none of it. Versions: Debian
# 12's, at any of their point-release revisions (the mirror keeps only the newest, so an exact
# revision would stop building at the next one).
FROM app AS compile
USER 0:0
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc=4:12.2.0-3 'libc6-dev=2.36-9+deb12u*' \
    && if [[ ! -e /usr/local/include/python3.11/Python.h ]]; then \
        apt-get install -y --no-install-recommends 'python3-dev=3.11.2-1+b*'; fi \
    && rm -rf /var/lib/apt/lists/*
USER 10001:10001

# The default target: the eager image.
FROM app AS runtime
