"""Building trading calendars by name, and finding which one a file of bars follows.

Exchange sessions come from exchange_calendars (imported inside the functions that need it:
importing it, with pandas, takes about half a second, and a crypto daemon never needs it).
The FX week is built here: exchange_calendars has no calendar for it.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

import numpy as np
from numpy.typing import ArrayLike, NDArray

from trader.domain import Timeframe
from trader.market.calendar import DAY_MS, Anchor, TradingCalendar

CONTINUOUS, FX = "continuous", "fx"
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
_ALIASES = {"24/7": CONTINUOUS, "24/5": FX, "forex": FX}

QUALIFIES = 0.995  # share of bars on expected starts: a stray bar or two is data, not a misfit
CONTINUOUS_MISSING = 0.01  # continuous when at most this share of its expected bars is missing
TIE = 0.001  # missing shares this close are a tie, settled by candidate and variant order

FX_ZONE = "America/New_York"
_FX_ROLL = time(17)  # the FX day ends at 17:00 New York
_FX_CLOSED = {(12, 25), (1, 1)}
_FAR_END = datetime(2100, 1, 1, tzinfo=UTC)  # for exchanges with no last buildable date
_PAD = timedelta(days=7)  # sessions built past the span, so bars at its edges are right

Label = Literal["start", "end"]
Int64s = NDArray[np.int64]


def _ms(at: datetime) -> int:
    return int(at.timestamp()) * 1000


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _xc() -> Any:
    # Imported on first use; it has no type information, so its values are Any here.
    return importlib.import_module("exchange_calendars")


def calendar_names() -> list[str]:
    """Every name build_calendar knows, besides aliases (continuous, fx, then the exchanges)."""
    names = _xc().get_calendar_names(include_aliases=False)
    return [CONTINUOUS, FX, *sorted(n for n in names if n not in _ALIASES)]


def canonical_name(name: str) -> str:
    """`name` as the calendar is known ("nyse" -> "XNYS", "24/7" -> "continuous")."""
    key = name.strip()
    if key.lower() in (CONTINUOUS, FX):
        return key.lower()
    if key.lower() in _ALIASES:
        return _ALIASES[key.lower()]
    xc = _xc()
    known = {n.upper(): n for n in xc.get_calendar_names(include_aliases=True) if n not in _ALIASES}
    if key.upper() in known:
        return str(xc.resolve_alias(known[key.upper()]))
    choices = {**known, "CONTINUOUS": CONTINUOUS, "FX": FX}
    close = difflib.get_close_matches(key.upper(), list(choices), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(choices[c] for c in close)}?" if close else ""
    raise ValueError(
        f"unknown trading calendar {name!r}{hint} (continuous, fx or an exchange_calendars"
        " code such as XNYS; trader.market.calendars.calendar_names() lists them)"
    )


class CalendarBuilder:
    """Builds calendars and keeps them for reuse: a caller that builds many holds one."""

    def __init__(self) -> None:
        self._kept: dict[str, list[TradingCalendar]] = {}
        self.exchange_builds = 0  # exchange_calendars constructions (~0.1-0.3 s each)

    def build(
        self, name: str, begin_ms: int, end_ms: int, anchor: Anchor = "clock"
    ) -> TradingCalendar:
        """`name`'s calendar over whole UTC years around [begin, end), as far as its exchange
        can be built; continuous has no span."""
        canonical = canonical_name(name)
        if canonical == CONTINUOUS:
            return TradingCalendar.always_open(CONTINUOUS)
        begin, end = self._span(canonical, begin_ms, end_ms)
        for kept in self._kept.get(canonical, ()):
            if kept.covers(begin, end):
                return kept.with_anchor(anchor)
        calendar = _fx(begin, end) if canonical == FX else self._exchange(canonical, begin, end)
        self._kept.setdefault(canonical, []).append(calendar)
        return calendar.with_anchor(anchor)

    def _span(self, name: str, begin_ms: int, end_ms: int) -> tuple[int, int]:
        """[begin, end) widened to whole UTC years, clipped to what the exchange allows."""
        end_ms = max(end_ms, begin_ms + 1)
        begin = _ms(datetime(_utc(begin_ms).year, 1, 1, tzinfo=UTC))
        end = _ms(datetime(_utc(end_ms - 1).year + 1, 1, 1, tzinfo=UTC))
        if name == FX:
            return begin, end
        factory = _factory(name)
        low = factory.bound_min() if factory is not None else None
        high = factory.bound_max() if factory is not None else None
        if low is not None:
            low_ms = _ms(datetime.combine(low.date(), time(), UTC))
            if begin_ms < low_ms:
                raise ValueError(
                    f"{_utc(begin_ms):%Y-%m-%d} is before {name}'s first known session"
                    f" ({low:%Y-%m-%d}): exchange_calendars cannot build {name} earlier"
                )
            begin = max(begin, low_ms)
        last = (
            datetime.combine(high.date() + timedelta(days=1), time(), UTC)
            if high is not None
            else _FAR_END
        )
        end = min(end, _ms(last))
        if begin_ms >= end:
            raise ValueError(
                f"{_utc(begin_ms):%Y-%m-%d} is after the last date exchange_calendars can build"
                f" {name} for ({_utc(end - 1):%Y-%m-%d})"
            )
        return begin, end

    def _exchange(self, name: str, begin: int, end: int) -> TradingCalendar:
        xc = _xc()
        factory = _factory(name)
        first = _utc(begin) - _PAD
        last = _utc(end) + _PAD
        if factory is not None and factory.bound_min() is not None:
            first = max(first, datetime.combine(factory.bound_min().date(), time(), UTC))
        if factory is not None and factory.bound_max() is not None:
            last = min(last, datetime.combine(factory.bound_max().date(), time(), UTC))
        built = xc.get_calendar(name, start=first.date().isoformat(), end=last.date().isoformat())
        self.exchange_builds += 1
        schedule = built.schedule
        opens = _column_ms(schedule["open"])
        closes = _column_ms(schedule["close"])
        break_starts = _column_ms(schedule["break_start"])
        break_ends = _column_ms(schedule["break_end"])
        lunch = (break_starts != _NAT) & (break_ends != _NAT) & (break_starts < break_ends)
        # A session with a break is two intervals: [open, break start) and [break end, close).
        intervals = np.stack(
            [
                opens,
                np.where(lunch, break_starts, closes),
                np.where(lunch, break_ends, _NAT),
                np.where(lunch, closes, _NAT),
            ],
            axis=1,
        ).reshape(-1, 2)
        intervals = intervals[intervals[:, 0] != _NAT]
        labels = (
            np.asarray(schedule.index.values, dtype="datetime64[D]")
            .astype("datetime64[ms]")
            .astype(np.int64)
        )
        return TradingCalendar(
            name,
            str(built.tz.key),
            intervals,
            labels,
            begin,
            end,
            has_breaks=bool(lunch.any()),
        )


_NAT = np.iinfo(np.int64).min


def _column_ms(column: Any) -> Int64s:
    """A schedule column (UTC datetimes, NaT where absent) as epoch ms; NaT stays int64 min."""
    values = np.asarray(column.values).astype("datetime64[ms]")
    return np.where(np.isnat(values), _NAT, values.astype(np.int64)).astype(np.int64)


def _factory(name: str) -> Any:
    """The exchange's calendar class, for its buildable bounds without building it.

    exchange_calendars has no public name -> class map; without one the build itself reports
    an out-of-bounds span."""
    calendar_utils = importlib.import_module("exchange_calendars.calendar_utils")
    factories = getattr(calendar_utils, "_default_calendar_factories", {})
    return factories.get(name)


def build_calendar(
    name: str, begin_ms: int, end_ms: int, anchor: Anchor = "clock"
) -> TradingCalendar:
    """`name`'s calendar covering [begin, end) (widened to whole UTC years).

    Case-insensitive; "24/7" is continuous, "24/5" and "forex" are fx, exchange_calendars'
    aliases ("NYSE") work too. A caller building repeatedly should hold a CalendarBuilder."""
    return CalendarBuilder().build(name, begin_ms, end_ms, anchor)


def _fx(begin: int, end: int) -> TradingCalendar:
    """The FX week: Sunday 17:00 to Friday 17:00 New York, closed from 17:00 the day before
    Christmas Day and New Year's Day until 17:00 on the day. A session's label is the New York
    date at its 17:00 close."""
    zone = ZoneInfo(FX_ZONE)
    day = (_utc(begin) - _PAD).date()
    stop = (_utc(end) + _PAD).date()
    labels: list[int] = []
    intervals: list[list[int]] = []
    while day <= stop:
        if day.weekday() < 5 and (day.month, day.day) not in _FX_CLOSED:
            close = _ms(datetime.combine(day, _FX_ROLL, zone))
            open_ = _ms(datetime.combine(day - timedelta(days=1), _FX_ROLL, zone))
            if intervals and intervals[-1][1] == open_:
                intervals[-1][1] = close  # the days of a week run into one interval
            else:
                intervals.append([open_, close])
            labels.append(_ms(datetime.combine(day, time(), UTC)))
        day += timedelta(days=1)
    return TradingCalendar(FX, FX_ZONE, intervals, labels, begin, end)


# -- fitting calendars to data --------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CalendarFit:
    """A calendar checked against a file's bars."""

    calendar: TradingCalendar
    starts_ms: Int64s  # the data's bar starts as the calendar reads them, in the data's order
    timezone: str  # the zone naive times were read in: "UTC" unless restamped
    label: Label  # whether the data's times are bar starts or bar ends
    in_session: float  # share of the data's bars on expected starts
    expected: int  # expected bars inside the data's first..last span
    missing: int  # expected bars absent from the data
    explanation: str


@dataclass(frozen=True, eq=False)
class _Trial:
    calendar: TradingCalendar
    timezone: str
    label: Label
    starts: Int64s
    bars: int  # distinct bars in the data
    on: int  # of which on expected starts
    expected: int

    @property
    def in_session(self) -> float:
        return self.on / self.bars

    @property
    def missing(self) -> int:
        return self.expected - self.on

    @property
    def missing_share(self) -> float:
        return self.missing / self.expected if self.expected else 1.0

    @property
    def plain(self) -> bool:
        return self.timezone == "UTC" and self.label == "start" and self.calendar.anchor == "clock"

    def qualifies(self) -> bool:
        return self.expected > 0 and self.in_session >= QUALIFIES


def _trial(
    calendar: TradingCalendar,
    starts: Int64s,
    bars: Int64s,
    timeframe: Timeframe,
    zone: str,
    label: Label,
) -> _Trial:
    """`starts` read against `calendar`; `bars` are the same times sorted and distinct."""
    if calendar.span_ms is not None:
        lo, hi = np.searchsorted(bars, calendar.span_ms)
        inside = bars[lo:hi]
    else:
        inside = bars
    on = int(calendar.expected_mask(timeframe, inside).sum()) if inside.size else 0
    expected = (
        calendar.count_bar_starts(timeframe, int(inside[0]), int(inside[-1]) + 1)
        if inside.size
        else 0
    )
    return _Trial(
        calendar=calendar,
        timezone=zone,
        label=label,
        starts=starts,
        bars=int(bars.size),
        on=on,
        expected=expected,
    )


def _distinct(times: Int64s) -> Int64s:
    ordered = np.sort(times)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def wall_to_utc(wall_ms: ArrayLike, zone: str) -> Int64s:
    """Naive wall-clock times in `zone` (epoch ms as if UTC) as true UTC epoch ms.

    One zone lookup per distinct day, and per quarter hour (every offset change falls on one)
    only inside days where the offset changes. A repeated hour at the end of summer time reads
    as its first occurrence; a skipped one as if the clock had not changed yet."""
    times = np.asarray(wall_ms, dtype=np.int64).reshape(-1)
    if zone == "UTC" or times.size == 0:
        return times.copy()
    tz = ZoneInfo(zone)
    days, day_of = np.unique(times // DAY_MS, return_inverse=True)
    day_of = day_of.reshape(-1)
    at_start = np.array([_offset_ms(int(d) * DAY_MS, tz) for d in days], dtype=np.int64)
    at_end = np.array([_offset_ms((int(d) + 1) * DAY_MS, tz) for d in days], dtype=np.int64)
    offsets = at_start[day_of]
    changing = np.isin(day_of, np.flatnonzero(at_start != at_end))
    if changing.any():
        quarter = 15 * 60_000
        quarters, quarter_of = np.unique(times[changing] // quarter, return_inverse=True)
        exact = np.array([_offset_ms(int(q) * quarter, tz) for q in quarters], dtype=np.int64)
        offsets[changing] = exact[quarter_of.reshape(-1)]
    return (times - offsets).astype(np.int64)


_WALL_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001  # wall-clock: a zone is attached per use


def _offset_ms(wall_ms: int, zone: ZoneInfo) -> int:
    wall = _WALL_EPOCH + timedelta(milliseconds=wall_ms)
    offset = wall.replace(tzinfo=zone).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset // timedelta(milliseconds=1)


def _trials(
    builder: CalendarBuilder, name: str, starts: Int64s, timeframe: Timeframe, naive: bool
) -> list[_Trial]:
    """Every reading of the data against `name`, simplest first: zone (UTC, then the market's),
    label (start, then end), anchor (clock, then session)."""
    step = timeframe.seconds * 1000
    intraday = step < DAY_MS
    pad = 2 * DAY_MS + step  # room for reading times in another zone or as bar ends
    base = builder.build(name, int(starts.min()) - pad, int(starts.max()) + pad)
    zones = ["UTC"]
    if naive and not base.continuous and base.timezone != "UTC":
        zones.append(base.timezone)
    labels: tuple[Label, ...] = ("start", "end") if intraday else ("start",)
    anchors: tuple[Anchor, ...] = (
        ("clock", "session") if intraday and not base.continuous else ("clock",)
    )
    trials: list[_Trial] = []
    for zone in zones:
        utc = wall_to_utc(starts, zone)
        distinct = _distinct(utc)
        for label in labels:
            shift = step if label == "end" else 0
            trials.extend(
                _trial(base.with_anchor(a), utc - shift, distinct - shift, timeframe, zone, label)
                for a in anchors
            )
    return trials


def _pick(trials: Iterable[_Trial]) -> _Trial | None:
    """The qualifying trial with the fewest missing; near-ties go to the earliest."""
    qualifying = [t for t in trials if t.qualifies()]
    if not qualifying:
        return None
    best = min(t.missing_share for t in qualifying)
    return next(t for t in qualifying if t.missing_share <= best + TIE)


def _reading(trial: _Trial, plain: _Trial | None, naive: bool) -> str:
    if trial.plain:
        return ""
    ends = "bar ends" if trial.label == "end" else "bar starts"
    text = f"naive times read as {trial.timezone} {ends}" if naive else f"times read as {ends}"
    if trial.calendar.anchor == "session":
        text += ", bars anchored at session opens"
    if plain is not None:
        as_plain = "as UTC starts" if naive else "as bar starts"
        text += f" ({as_plain} only {_share(plain.on, plain.bars)} fit)"
    return "; " + text


def _share(part: int, whole: int) -> str:
    """A percentage that reads 100.0% only when it is: 4,998 of 5,000 is 99.96%."""
    text = f"{part / whole:.1%}" if whole else "0.0%"
    return f"{part / whole:.2%}" if text == "100.0%" and part < whole else text


def _summary(trial: _Trial) -> str:
    where = "on its grid" if trial.calendar.continuous else "in its sessions"
    off = f" ({trial.bars - trial.on:,} outside)" if trial.on < trial.bars else ""
    return (
        f"{_share(trial.on, trial.bars)} of {trial.bars:,} bars {where}{off}, {trial.missing:,}"
        f" of {trial.expected:,} expected bars missing"
    )


def _fit(trial: _Trial, explanation: str) -> CalendarFit:
    return CalendarFit(
        calendar=trial.calendar,
        starts_ms=trial.starts,
        timezone=trial.timezone,
        label=trial.label,
        in_session=trial.in_session,
        expected=trial.expected,
        missing=trial.missing,
        explanation=explanation,
    )


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
) -> CalendarFit:
    """The calendar named `name`, checked against the data; with naive times, also read in
    the market's zone and as bar ends, keeping the best reading. A poor fit is returned all the
    same (the caller warns), its explanation saying so."""
    starts = _as_starts(starts_ms)
    trials = _trials(builder or CalendarBuilder(), name, starts, timeframe, naive)
    chosen = _pick(trials)
    poor = chosen is None
    if chosen is None:
        chosen = max(trials, key=lambda t: t.in_session)  # max keeps the first of equals
    plain = trials[0] if trials[0] is not chosen else None
    text = f"{chosen.calendar.name} as named: {_summary(chosen)}{_reading(chosen, plain, naive)}"
    if poor:
        outside = _share(chosen.bars - chosen.on, chosen.bars)
        text += f"; a poor fit: {outside} of the bars fall outside its sessions"
    return _fit(chosen, text)


def infer_calendar(
    starts_ms: ArrayLike,
    timeframe: Timeframe,
    *,
    naive: bool,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    builder: CalendarBuilder | None = None,
) -> CalendarFit:
    """The calendar the data follows: continuous when at most 1% of its bars are missing,
    otherwise the candidate reading with the fewest missing among those holding >= 99.5% of the
    bars in their sessions; continuous (said so) when none does."""
    starts = _as_starts(starts_ms)
    always = TradingCalendar.always_open(CONTINUOUS)
    continuous = _trial(always, starts, _distinct(starts), timeframe, "UTC", "start")
    if continuous.qualifies() and continuous.missing_share <= CONTINUOUS_MISSING:
        return _fit(continuous, f"continuous inferred: {_summary(continuous)}")
    builder = builder or CalendarBuilder()
    trials: list[_Trial] = []
    for name in candidates:
        try:
            found = _trials(builder, name, starts, timeframe, naive)
        except ValueError:  # the exchange cannot be built over the data's span, or no such
            continue  # timeframe there (2d): it cannot be this data's calendar
        trials.extend(found)
        if any(t.qualifies() and t.missing_share <= TIE for t in found):
            break  # no later candidate can win: the best it could do is a tie, which this wins
    chosen = _pick(trials)
    if chosen is None:
        nearest = max(trials, key=lambda t: t.in_session, default=None)
        near = (
            f" (nearest: {nearest.calendar.name},"
            f" {_share(nearest.on, nearest.bars)} of bars in its sessions)"
            if nearest is not None
            else ""
        )
        return _fit(
            continuous,
            f"no calendar fits{near}; treated as continuous: {continuous.missing:,} of"
            f" {continuous.expected:,} expected bars missing ({continuous.missing_share:.1%})",
        )
    first = next(t for t in trials if t.calendar.name == chosen.calendar.name)
    plain = first if first is not chosen else None
    return _fit(
        chosen,
        f"{chosen.calendar.name} inferred: {_summary(chosen)}{_reading(chosen, plain, naive)}",
    )
