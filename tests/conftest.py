"""Suite-wide settings and the rule for what a test may skip."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from hypothesis import settings

# Shared CI machines are noisy: hypothesis must judge behaviour, not speed.
settings.register_profile("trader", deadline=None, print_blob=True)
settings.load_profile("trader")

# Under pytest-xdist (`make test` runs a worker per core), each worker gets its share of the
# cores: torch's default of a thread per core in every worker oversubscribes the machine, and
# its spinning threads then slow every test down. Set before any test imports torch.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
if _WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // _WORKERS)))

ROOT = Path(__file__).resolve().parents[1]
# Recorded market data: the excerpts in tests/data/, named in tests/recorded.py; tests never
# read ../shared/data/ (the full recordings, for benchmarks and demos).


def missing_binary(name: str) -> None:
    """Skip for a binary absent on a developer's machine; CI installs every binary the tests
    need, so there the same absence is a failure."""
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI must install {name}: see .ci/run")
    pytest.skip(f"{name} is not installed here")


@pytest.fixture(autouse=True)
def _log_configuration_as_found() -> Iterator[None]:
    """`configure_logging` sets process-wide state (structlog's configuration, the root
    logger's level): a test that calls it must not silence what the next test in the same
    worker captures (a WARNING level left behind drops every info line before
    `capture_logs` sees it)."""
    saved, level = structlog.get_config(), logging.getLogger().level
    yield
    structlog.configure(**saved)
    logging.getLogger().setLevel(level)
