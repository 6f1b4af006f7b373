"""The share of capital a live daemon may size from: a fixed fraction, or a ramp of steps
counted in days from the promotion (`trader promote`).

A ramp is written "0.1:7d,0.25:14d,1.0": 10% for the first 7 days, then 25% for the next 14,
then 100% from day 21 on. Each step but the last has a length in whole days; the last holds
for good. Fractions are exact decimals in (0, 1] and never fall from one step to the next: a
ramp only ever hands the strategy more capital as the live record grows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from itertools import pairwise

from trader.domain.errors import DomainError

ONE = Decimal(1)


@dataclass(frozen=True)
class RampStep:
    fraction: Decimal
    days: int | None  # None: the last step, held from then on


def _fraction(text: str, where: str) -> Decimal:
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise DomainError(f"{where}: {text.strip()!r} is not a number") from None
    if not value.is_finite() or not 0 < value <= ONE:
        raise DomainError(f"{where}: a fraction must be above 0 and at most 1, not {value}")
    return value


def parse_ramp(text: str) -> tuple[RampStep, ...]:
    """The steps of `text` ("" is no ramp); DomainError naming the step that is wrong."""
    if not text.strip():
        return ()
    pieces = [p.strip() for p in text.split(",")]
    steps = []
    for n, piece in enumerate(pieces, 1):
        where = f"ramp step {n} ({piece!r})"
        last = n == len(pieces)
        share, sep, length = piece.partition(":")
        if last and sep:
            raise DomainError(f"{where}: the last step holds for good, so it has no length")
        if not last and not sep:
            raise DomainError(f"{where}: every step but the last needs a length, e.g. 0.1:7d")
        days = None
        if sep:
            count = length.strip().removesuffix("d")
            if not count.isdigit() or int(count) < 1:
                raise DomainError(f"{where}: a length is whole days, at least 1, e.g. 7d")
            days = int(count)
        steps.append(RampStep(_fraction(share, where), days))
    for before, after in pairwise(steps):
        if after.fraction < before.fraction:
            raise DomainError(
                f"ramp {text!r}: {after.fraction} after {before.fraction}: a ramp never falls"
            )
    return tuple(steps)


def ramp_text(steps: tuple[RampStep, ...]) -> str:
    """`steps` written as `parse_ramp` reads them."""
    shares = [f"{s.fraction.normalize():f}" for s in steps]
    return ",".join(f"{f}:{s.days}d" if s.days else f for f, s in zip(shares, steps, strict=True))


@dataclass(frozen=True)
class LiveCapital:
    """The share of equity live sizing may use at a time: `fraction` without a ramp; with
    one, its step at the days elapsed since `since` (before `since`: the first step)."""

    fraction: Decimal
    ramp: tuple[RampStep, ...] = ()
    since: datetime | None = None

    def __post_init__(self) -> None:
        if self.ramp and self.since is None:
            raise DomainError("a capital ramp needs the time it starts from")

    def share(self, at: datetime) -> Decimal:
        return self.ramp[self.step_at(at) - 1].fraction if self.ramp else self.fraction

    def step_at(self, at: datetime) -> int:
        """Which step (1-based) is in force at `at`; 1 without a ramp."""
        if self.since is None:
            return 1
        elapsed, end = at - self.since, timedelta(0)
        for n, step in enumerate(self.ramp, 1):
            if step.days is None:
                return n
            end += timedelta(days=step.days)
            if elapsed < end:
                return n
        return 1
