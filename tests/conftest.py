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


def _allowed_seconds(item: pytest.Item) -> float:
    """The timeout a test was given of its own: its author knew it to be long."""
    marker = item.get_closest_marker("timeout")
    return float(marker.args[0]) if marker is not None and marker.args else 0.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules in the order `make test`'s workers take them (it turns xdist's own order,
    by number of tests, off): those with long tests of their own first, then by number of
    tests. In xdist's order the one-test modules came last, and with them the longest tests
    of all (a kill run of 4 minutes): one worker ran it while the other had nothing left.
    tests/container/conftest.py then moves the container tests to the very end."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)

    def longest_first(tests: list[pytest.Item]) -> tuple[float, int]:
        return -sum(map(_allowed_seconds, tests)), -len(tests)

    items[:] = [item for tests in sorted(modules.values(), key=longest_first) for item in tests]
