"""Which calendar a file of bars follows: a named one checked against the data, or the best of
the candidates inferred from it, with an explanation people can read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trader.domain import Timeframe
from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.known_end import FIX, REGULAR, known_end
from trader.market.calendars.registry import CONTINUOUS, CalendarBuilder
from trader.market.calendars.trials import TIE, Label, Trial, distinct, pick, trial, trials
from trader.market.calendars.units import Int64s

DEFAULT_CANDIDATES: tuple[str, ...] = (
    "fx",
    "XNYS",
    "XSHG",
    "XHKG",
    "XTKS",
    "XLON",
    "XETR",
    "XASX",
    "XTSE",
)
Bools = NDArray[np.bool_]
CONTINUOUS_MISSING = 0.01  # continuous when at most this share of its expected bars is missing


@dataclass(frozen=True, eq=False)
class CalendarFit:
    """A calendar checked against a file's bars."""

    calendar: TradingCalendar
    starts_ms: Int64s  # the data's bar starts as the calendar reads them, in the data's order
    timezone: str  # the zone naive times were read in: "UTC" unless restamped
    label: Label  # whether the data's times are bar starts or bar ends
    in_session: float  # share of the data's bars on expected starts
    expected: int  # expected bars inside the data's first..last span
    missing: int  # expected bars absent from the data, or there as a bad row (dropped)
    explanation: str
    dropped: int = 0  # of the missing, rows there but bad: hygiene drops them


def _reading(chosen: Trial, plain: Trial | None, naive: bool) -> str:
    if chosen.plain:
        return ""
    ends = "bar ends" if chosen.label == "end" else "bar starts"
    text = f"naive times read as {chosen.timezone} {ends}" if naive else f"times read as {ends}"
    if chosen.calendar.anchor == "session":
        text += ", bars anchored at session opens"
    if plain is not None:
        as_plain = "as UTC starts" if naive else "as bar starts"
        text += f" ({as_plain} only {_share(plain.on, plain.bars)} fit)"
    return "; " + text


def _share(part: int, whole: int) -> str:
    """A percentage that reads 100.0% only when it is: 4,998 of 5,000 is 99.96%."""
    text = f"{part / whole:.1%}" if whole else "0.0%"
    return f"{part / whole:.2%}" if text == "100.0%" and part < whole else text


def _dropped(chosen: Trial, bad: Bools | None, timeframe: Timeframe) -> int:
    """Bad rows (a NaN, a high below its low: hygiene drops them) on the calendar's expected
    starts: the data step misses those bars as surely as absent ones."""
    if bad is None or not bad.any():
        return 0
    return int(chosen.calendar.expected_mask(timeframe, chosen.starts[bad]).sum())


def _missing(chosen: Trial, dropped: int, share: bool = False) -> str:
    said = [f"{chosen.missing_share:.1%}"] if share else []
    said += [f"{dropped:,} of them bad rows, dropped"] if dropped else []
    why = f" ({', '.join(said)})" if said else ""
    return f"{chosen.missing + dropped:,} of {chosen.expected:,} expected bars missing{why}"


def _summary(chosen: Trial, dropped: int = 0) -> str:
    where = "on its grid" if chosen.calendar.continuous else "in its sessions"
    off = f" ({chosen.bars - chosen.on:,} outside)" if chosen.on < chosen.bars else ""
    return f"{_share(chosen.on, chosen.bars)} of {chosen.bars:,} bars {where}{off}, " + _missing(
        chosen, dropped
    )


def _past_known(chosen: Trial) -> str:
    """The caveat of bars past the last session the calendar library knows."""
    known = chosen.calendar.known_until_ms
    if known is None or chosen.starts.size == 0 or int(chosen.starts.max()) < known:
        return ""
    return (
        f"; bars after {known_end(chosen.calendar).last_session()} (the last session"
        f" exchange_calendars knows) are judged on {REGULAR}: {FIX}"
    )


def _fit(chosen: Trial, explanation: str, dropped: int = 0) -> CalendarFit:
    return CalendarFit(
        calendar=chosen.calendar,
        starts_ms=chosen.starts,
        timezone=chosen.timezone,
        label=chosen.label,
        in_session=chosen.in_session,
        expected=chosen.expected,
        missing=chosen.missing + dropped,
        explanation=explanation + _past_known(chosen),
        dropped=dropped,
    )


def _as_bad(bad: ArrayLike | None, starts: Int64s) -> Bools | None:
    if bad is None:
        return None
    mask = np.asarray(bad, dtype=np.bool_).reshape(-1)
    if mask.shape != starts.shape:
        raise ValueError(f"{mask.size} bad-row flags for {starts.size} bars")
    return mask


def _as_starts(starts_ms: ArrayLike) -> Int64s:
    starts = np.asarray(starts_ms, dtype=np.int64).reshape(-1)
    if starts.size == 0:
        raise ValueError("no bars to fit a calendar to")
    return starts


def fit_calendar(
    name: str,
    starts_ms: ArrayLike,
    timeframe: Timeframe,
    *,
    naive: bool,
    builder: CalendarBuilder | None = None,
    bad: ArrayLike | None = None,
) -> CalendarFit:
    """The calendar named `name`, checked against the data; with naive times, also read in
    the market's zone and as bar ends, keeping the best reading. A poor fit is returned all the
    same (the caller warns), its explanation saying so. `bad`: which rows hygiene drops (their
    times still tell the calendar; their bars are counted missing)."""
    starts = _as_starts(starts_ms)
    readings = trials(builder or CalendarBuilder(), name, starts, timeframe, naive)
    chosen = pick(readings)
    poor = chosen is None
    if chosen is None:
        chosen = max(readings, key=lambda t: t.in_session)  # max keeps the first of equals
    plain = readings[0] if readings[0] is not chosen else None
    dropped = _dropped(chosen, _as_bad(bad, starts), timeframe)
    summary = _summary(chosen, dropped)
    text = f"{chosen.calendar.name} as named: {summary}{_reading(chosen, plain, naive)}"
    if poor:
        outside = _share(chosen.bars - chosen.on, chosen.bars)
        text += f"; a poor fit: {outside} of the bars fall outside its sessions"
    return _fit(chosen, text, dropped)


def infer_calendar(
    starts_ms: ArrayLike,
    timeframe: Timeframe,
    *,
    naive: bool,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    builder: CalendarBuilder | None = None,
    bad: ArrayLike | None = None,
) -> CalendarFit:
    """The calendar the data follows: continuous when at most 1% of its bars are missing,
    otherwise the candidate reading with the fewest missing among those holding >= 99.5% of the
    bars in their sessions; continuous (said so) when none does. `bad`: as `fit_calendar`'s."""
    starts = _as_starts(starts_ms)
    rows_bad = _as_bad(bad, starts)
    always = TradingCalendar.always_open(CONTINUOUS)
    continuous = trial(always, starts, distinct(starts), timeframe, "UTC", "start")
    if continuous.qualifies() and continuous.missing_share <= CONTINUOUS_MISSING:
        dropped = _dropped(continuous, rows_bad, timeframe)
        text = f"continuous inferred: {_summary(continuous, dropped)}"
        return _fit(continuous, text, dropped)
    builder = builder or CalendarBuilder()
    readings: list[Trial] = []
    for name in candidates:
        try:
            found = trials(builder, name, starts, timeframe, naive)
        except ValueError:  # the exchange cannot be built over the data's span, or no such
            continue  # timeframe there (2d): it cannot be this data's calendar
        readings.extend(found)
        if any(t.qualifies() and t.missing_share <= TIE for t in found):
            break  # no later candidate can win: the best it could do is a tie, which this wins
    chosen = pick(readings)
    if chosen is None:
        nearest = max(readings, key=lambda t: t.in_session, default=None)
        near = (
            f" (nearest: {nearest.calendar.name},"
            f" {_share(nearest.on, nearest.bars)} of bars in its sessions)"
            if nearest is not None
            else ""
        )
        dropped = _dropped(continuous, rows_bad, timeframe)
        return _fit(
            continuous,
            f"no calendar fits{near}; treated as continuous: {_missing(continuous, dropped, True)}",
            dropped,
        )
    first = next(t for t in readings if t.calendar.name == chosen.calendar.name)
    plain = first if first is not chosen else None
    dropped = _dropped(chosen, rows_bad, timeframe)
    summary = _summary(chosen, dropped)
    return _fit(
        chosen,
        f"{chosen.calendar.name} inferred: {summary}{_reading(chosen, plain, naive)}",
        dropped,
    )
