"""The live capital share: a fixed fraction, or a ramp of steps counted in days from the
promotion, read from its text and refused when it cannot be what it says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from trader.domain.capital_ramp import LiveCapital, RampStep, parse_ramp, ramp_text
from trader.domain.errors import DomainError

PROMOTED = datetime(2026, 1, 5, 14, 30, tzinfo=UTC)
RAMP = parse_ramp("0.1:7d,0.25:14d,1.0")


def test_a_ramp_reads_as_steps_with_lengths_in_days_and_the_last_held_for_good():
    assert (
        RampStep(Decimal("0.1"), 7),
        RampStep(Decimal("0.25"), 14),
        RampStep(Decimal("1.0"), None),
    ) == RAMP
    assert ramp_text(RAMP) == "0.1:7d,0.25:14d,1"
    assert parse_ramp(ramp_text(RAMP)) == RAMP
    assert parse_ramp("") == ()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("0.1:7d,0.25", None),  # fine
        ("0.1,0.25", "needs a length"),
        ("0.1:7d,0.25:3d", "the last step holds for good"),
        ("0.5:7d,0.25", "a ramp never falls"),
        ("0:7d,1", "above 0 and at most 1"),
        ("1.5", "above 0 and at most 1"),
        ("0.1:0d,1", "at least 1"),
        ("0.1:7h,1", "whole days"),
        ("ten:7d,1", "is not a number"),
        ("NaN", "above 0 and at most 1"),
    ],
)
def test_a_ramp_that_cannot_be_what_it_says_is_refused_naming_the_step(text, said):
    if said is None:
        assert parse_ramp(text)
        return
    with pytest.raises(DomainError, match=said):
        parse_ramp(text)


def test_the_share_follows_the_step_of_the_days_since_the_promotion():
    capital = LiveCapital(Decimal("0.1"), RAMP, PROMOTED)
    day = timedelta(days=1)
    tick = timedelta(microseconds=1)
    assert capital.share(PROMOTED - day) == Decimal("0.1")  # before it: the first step
    assert capital.share(PROMOTED) == Decimal("0.1")
    assert capital.share(PROMOTED + 7 * day - tick) == Decimal("0.1")
    assert capital.share(PROMOTED + 7 * day) == Decimal("0.25")
    assert capital.step_at(PROMOTED + 7 * day) == 2
    assert capital.share(PROMOTED + 21 * day - tick) == Decimal("0.25")
    assert capital.share(PROMOTED + 21 * day) == Decimal("1.0")
    assert capital.share(PROMOTED + 400 * day) == Decimal("1.0")
    assert capital.step_at(PROMOTED + 400 * day) == 3


def test_without_a_ramp_the_fraction_holds_and_a_ramp_needs_its_start():
    assert LiveCapital(Decimal("0.3")).share(PROMOTED) == Decimal("0.3")
    with pytest.raises(DomainError, match="needs the time it starts from"):
        LiveCapital(Decimal("0.1"), RAMP, None)
