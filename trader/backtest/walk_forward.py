"""Walk-forward: parameters chosen on each training window, reported only on the window after it.

`--walk-forward TRAIN/TEST` cuts a symbol's ticks into folds: fold k trains on TRAIN (bars, or a
span such as 180d) and tests on the TEST that follows; the next fold starts TEST later. On each
training window every combination of the grid runs; the best by the ranking metric (the first
in grid order on a tie, or when none has the figure) then runs on the test window alone, from
a fresh account. Only test windows are reported: per fold, and stitched end to end (each
test's per-bar returns one after the other) into one out-of-sample curve. Nothing reported was
seen by the choice that produced it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from trader.backtest.prepare import Period
from trader.backtest.stats import Performance, performance, returns
from trader.backtest.trials import TrialResult

_SPAN = re.compile(r"^(\d+)([hdw]?)$")
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


class WalkForwardError(ValueError):
    """A --walk-forward that cannot be cut as given."""


@dataclass(frozen=True)
class Span:
    bars: int | None  # a number of ticks ...
    duration: timedelta | None  # ... or of time

    def __str__(self) -> str:
        return f"{self.bars} bars" if self.bars is not None else str(self.duration)


@dataclass(frozen=True)
class Fold:
    number: int  # 1-based
    train: Period
    test: Period


def parse_spec(text: str) -> tuple[Span, Span]:
    """TRAIN/TEST: each a number of bars (2000) or of hours, days or weeks (720h, 180d, 8w)."""
    train, sep, test = text.partition("/")
    if not sep:
        raise WalkForwardError(
            f"--walk-forward {text!r}: give TRAIN/TEST, e.g. 180d/30d or 2000/500"
        )
    return _span(train, text), _span(test, text)


def _span(part: str, whole: str) -> Span:
    match = _SPAN.match(part.strip())
    if match is None or int(match.group(1)) <= 0:
        raise WalkForwardError(
            f"--walk-forward {whole!r}: {part!r} is neither bars (2000) nor a span (180d, 8w, 720h)"
        )
    count, unit = int(match.group(1)), match.group(2)
    return Span(None, _UNITS[unit] * count) if unit else Span(count, None)


def folds(times: Sequence[datetime], train: Span, test: Span) -> list[Fold]:
    """The folds over `times` (a symbol's ticks): full training windows, each followed by a
    test window of at least two ticks."""
    index = np.array([t.timestamp() for t in times])
    out: list[Fold] = []
    start = 0
    while True:
        train_end = _advance(times, index, start, train)
        test_end = _advance(times, index, train_end, test)
        if train_end - start < 2 or train_end >= len(times) or test_end - train_end < 2:
            break
        out.append(
            Fold(
                len(out) + 1,
                Period(times[start], times[train_end - 1]),
                Period(times[train_end], times[test_end - 1]),
            )
        )
        start = _advance(times, index, start, test)  # the next fold starts a test later
    if not out:
        raise WalkForwardError(
            f"--walk-forward: {len(times):,} ticks hold no training window of {train} followed "
            f"by a test window of {test}"
        )
    return out


def _advance(times: Sequence[datetime], index: np.ndarray, start: int, span: Span) -> int:
    """The index `span` after `start` (at most the end)."""
    if span.bars is not None:
        return min(start + span.bars, len(times))
    assert span.duration is not None
    if start >= len(times):
        return len(times)
    limit = (times[start] + span.duration).timestamp()
    return int(np.searchsorted(index, limit, side="left"))


def stitched(tests: Sequence[TrialResult], periods_per_year: float, rf: float) -> Performance:
    """The test windows' per-bar returns one after the other, from the first one's cash."""
    parts = [returns(t.equity) for t in tests if len(t.equity) > 1]
    joined = np.concatenate(parts) if parts else np.zeros(0)
    start = float(tests[0].equity[0]) if tests and len(tests[0].equity) else 1.0
    curve = np.concatenate([[start], start * np.cumprod(1.0 + joined)])
    return performance(curve, periods_per_year, rf)
