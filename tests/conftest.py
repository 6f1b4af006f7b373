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


def missing(what: str) -> None:
    """Skip for a missing binary or data set on a developer's machine; in CI, where everything
    is installed, the same absence is a failure."""
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"CI must provide {what}")
    pytest.skip(f"{what} is not available here")


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "SOLUSDT_1h.csv").is_file():
        missing(f"the recorded market data in {SHARED_DATA}")
    return SHARED_DATA
