"""Suite-wide settings and the rule for what a test may skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Shared CI machines are noisy: hypothesis must judge behaviour, not speed.
settings.register_profile("trader", deadline=None, print_blob=True)
settings.load_profile("trader")

ROOT = Path(__file__).resolve().parents[1]
# Recorded market data lives beside the repository, never in it (see ../shared/data/README.md).
SHARED_DATA = Path(os.environ.get("TRADER_SHARED_DATA", ROOT.parent / "shared" / "data"))


def missing_binary(name: str) -> None:
    """Skip for a binary absent on a developer's machine; CI installs every binary the tests
    need, so there the same absence is a failure."""
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI must install {name}: see .ci/run")
    pytest.skip(f"{name} is not installed here")


@pytest.fixture
def shared_data() -> Path:
    """The recorded market data; it lives outside the repository, so a checkout without it
    skips (with the reason) rather than fails."""
    if not (SHARED_DATA / "SOLUSDT_1h.csv").is_file():
        pytest.skip(f"no recorded market data in {SHARED_DATA} (set TRADER_SHARED_DATA)")
    return SHARED_DATA
