# The three commands: `make run` starts the daemon, `make test` runs every check, `make demo` shows
# the daemon at work offline. Each builds the virtualenv .venv first when it is missing or
# pyproject.toml changed, and is quick otherwise.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# --no-compile: Python writes the bytecode of what it imports on first use; compiling all of
# torch's files at install time costs more than the rest of a fresh `make demo`.
INSTALL := $(BIN)/python -m pip --disable-pip-version-check --quiet install --no-compile

# torch: a box with an NVIDIA driver gets the newest CUDA build (>= 2.7, the first with
# Blackwell sm_120 kernels); a machine without one gets a pinned release. Override either:
#   make run TORCH_SPEC='torch==2.9.1' TORCH_PIP_ARGS='--index-url https://download.pytorch.org/whl/cpu'
# torch is the one runtime dependency outside the lock below: its CPU build and PyPI's CUDA
# build of one release are different files (different hashes), so it is pinned by version
# (here and the Dockerfile's TORCH_VERSION) and installed first.
HAS_NVIDIA := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo yes)
TORCH_VERSION := 2.13.0
TORCH_SPEC ?= $(if $(HAS_NVIDIA),torch>=2.7,torch==$(TORCH_VERSION))
TORCH_PIP_ARGS ?=

# Every other runtime dependency, transitive ones included, pinned with its hashes: `make run`
# and the image install exactly these files (pip --require-hashes). `make lock` refreshes it
# to the newest releases pyproject.toml allows, resolved with torch==$(TORCH_VERSION) for every
# platform and Python >= 3.11 (markers choose); `make lock LOCK_ARGS=` re-resolves after a
# pyproject.toml change and keeps the other pins. Not in it: torch, and the CUDA libraries and
# triton that torch pins exactly, which come with whichever torch build is installed.
LOCK := requirements/runtime.lock
LOCK_ARGS ?= --upgrade
UV_SPEC := uv==0.13.8
TORCH_BUNDLED := cuda-bindings cuda-pathfinder cuda-toolkit nvidia-cublas nvidia-cuda-cupti \
	nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile \
	nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-nccl-cu13 \
	nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx triton

RUNTIME := $(VENV)/.runtime-installed
DEV := $(VENV)/.dev-installed

.PHONY: run test demo lint security typecheck unit venv lock clean image image-test

run: $(RUNTIME)
	$(BIN)/trader run

# MODEL=toto or MODEL=kronos: the same run with a foundation model whose weights are cached.
MODEL ?= baseline
demo: $(RUNTIME)
	$(BIN)/trader demo --model $(MODEL)

# A worker per core; each takes whole modules, so module fixtures (random checkpoints, a
# daemon scraped by Prometheus) are built once; in the suite's order, the longest first
# (tests/conftest.py), not xdist's. PYTEST_WORKERS=0: one process. The 25 slowest
# tests are listed at the end: CI's whole run must stay under 45 minutes, and drifts upward.
PYTEST_WORKERS ?= auto
test: $(DEV) lint security typecheck
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=25

# The image (deploy/docker/build-image.sh, deploy/README.md): docker or podman, whichever is
# there (IMAGE_ENGINE=docker|podman); TORCH=cpu for torch's CPU build (trader:cpu), else PyPI's
# CUDA build checked for sm_120 (trader:latest); BASE=local where no registry answers (a Debian
# 12 base made here), BASE=auto to decide; IMAGE=name:tag; TARGET=compile for torch.compile.
TORCH ?= gpu
BASE ?= registry
image:
	TORCH='$(TORCH)' BASE='$(BASE)' IMAGE='$(IMAGE)' IMAGE_ENGINE='$(IMAGE_ENGINE)' \
		TARGET='$(TARGET)' deploy/docker/build-image.sh

# The CPU image (on the local base where no registry answers), then the container tests:
# the image's contents, the daemon in it, the systemd unit. They reuse an image of the same
# build inputs (tests/container/conftest.py).
image-test: $(DEV)
	$(MAKE) image TORCH=cpu BASE=auto
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadscope tests/container

lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The static security check: ruff's S rules (bandit's checks), selected here on their own so
# that no change to the lint selection can drop them. Accepted findings carry their reason.
security: $(DEV)
	$(BIN)/ruff check --select S --output-format concise .

typecheck: $(DEV)
	$(BIN)/mypy trader

venv: $(DEV)

$(RUNTIME): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "trader needs Python >= 3.11; set PYTHON=/path/to/python3.11"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(INSTALL) $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(INSTALL) --require-hashes -r $(LOCK)
	$(INSTALL) --no-deps -e .
	@# Not over a dev venv: the reference model packages pin versions of their own (toto-ts).
	@test -e $(DEV) || $(BIN)/python -m pip check
	@touch $@

lock:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(INSTALL) "$(UV_SPEC)"
	@echo "torch==$(TORCH_VERSION)" > $(VENV)/torch-constraint.txt
	$(BIN)/uv pip compile pyproject.toml --quiet --universal --python-version 3.11 \
		--generate-hashes --constraints $(VENV)/torch-constraint.txt \
		--no-emit-package torch $(addprefix --no-emit-package ,$(TORCH_BUNDLED)) \
		--custom-compile-command "make lock" $(LOCK_ARGS) --output-file $(LOCK)

# The reference Toto 2.0 needs Python >= 3.12: its own virtualenv, used by the conformance
# tests and bench/toto2.py through a subprocess. Without a Python 3.12 the tests that need it
# skip (and fail in CI). PYTHON312=/path/to/python3.12 picks one.
PYTHON312 ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python python3.13; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && command -v $$p && break; done)
TOTO2_REFERENCE := $(VENV)/toto2-reference/.installed
TOTO2_REFERENCE_MODELS := toto-2==2.0.0 dd-unit-scaling==0.1.0 unit-scaling==0.3.5 gluonts==0.17.0

REFERENCE_MODELS := toto-ts==0.2.0 kronos-model-arch==0.1.0 gluonts==0.17.0

# The dev tools on top of the lock, which holds: its pins, hashes and comments dropped, are
# constraints here (pip takes no hashes in constraints without requiring them of everything).
$(DEV): $(RUNTIME) requirements/reference.txt | $(TOTO2_REFERENCE)
	sed -n 's/^\([a-z0-9].*\) \\$$/\1/p' $(LOCK) > $(VENV)/runtime-constraints.txt
	$(INSTALL) -e '.[dev]' -r requirements/reference.txt -c $(VENV)/runtime-constraints.txt
	$(INSTALL) --no-deps $(REFERENCE_MODELS)
	@touch $@

$(TOTO2_REFERENCE): requirements/toto2-reference.txt
	@if [ -z "$(PYTHON312)" ]; then \
		echo "no Python >= 3.12 found: the Toto 2.0 conformance tests will skip (set PYTHON312)"; \
	else \
		set -e; \
		$(PYTHON312) -m venv $(VENV)/toto2-reference; \
		$(VENV)/toto2-reference/bin/python -m pip --disable-pip-version-check --quiet install \
			--no-compile $(TORCH_PIP_ARGS) "$(TORCH_SPEC)" -r requirements/toto2-reference.txt; \
		$(VENV)/toto2-reference/bin/python -m pip --disable-pip-version-check --quiet install \
			--no-compile --no-deps $(TOTO2_REFERENCE_MODELS); \
		$(VENV)/toto2-reference/bin/python -c "import toto2"; \
		touch $@; \
	fi

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
