"""A replay's calendars: each recording's market, named in the settings or inferred from its
bars, and the recording as that market reads it.

Inference is said out loud (the log, and the backtest's report): which calendar, how well the
bars fit it, and whether naive times had to be read in the market's own zone or as bar ends
(the A-share file stamps bars with Beijing wall-clock end times).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from trader.config.market_settings import MarketSettings
from trader.logging import get_logger
from trader.market.calendars.fit import CalendarFit, fit_calendar, infer_calendar
from trader.market.calendars.per_symbol import SymbolCalendars
from trader.market.calendars.registry import CalendarBuilder
from trader.market.hygiene import bad_rows
from trader.market.replay import Recording, log_reading

GOOD_FIT = 0.995  # share of bars on the calendar's expected starts


@dataclass(frozen=True)
class ReplayCalendars:
    recordings: dict[str, Recording]  # restamped where the calendar read the times otherwise
    calendars: SymbolCalendars
    fits: dict[str, CalendarFit]

    def explanations(self) -> list[str]:
        """Each symbol's calendar and how well its bars fit it."""
        return [f"{symbol}: {fit.explanation}" for symbol, fit in self.fits.items()]

    def warnings(self) -> list[str]:
        """Calendars that fit their bars poorly: gaps and ticks will be off."""
        return [
            f"{symbol}: only {fit.in_session:.1%} of its bars fall in {fit.calendar.name}'s "
            "sessions: name its calendar (market.calendars) or check the file's time zone "
            "(--timezone)"
            for symbol, fit in self.fits.items()
            if fit.in_session < GOOD_FIT
        ]


def replay_calendars(
    settings: MarketSettings, recordings: Mapping[str, Recording]
) -> ReplayCalendars:
    log = get_logger("trader.market")
    builder = CalendarBuilder()  # one exchange calendar serves every symbol it fits
    restamped: dict[str, Recording] = {}
    fits: dict[str, CalendarFit] = {}
    for symbol, recording in recordings.items():
        name = settings.calendars.get(symbol, settings.calendar)
        starts = np.array(recording.starts, dtype=np.int64)
        naive, timeframe = recording.naive_times, recording.timeframe
        bad = bad_rows(recording.rows, symbol, timeframe)  # counted missing, as the step will
        if name == "auto":
            fit = infer_calendar(starts, timeframe, naive=naive, builder=builder, bad=bad)
        else:
            fit = fit_calendar(name, starts, timeframe, naive=naive, builder=builder, bad=bad)
        fits[symbol] = fit
        restamped[symbol] = _restamp(recording, fit)
        log_reading(restamped[symbol])  # as the calendar finally reads it
        level = log.info if fit.in_session >= GOOD_FIT else log.warning
        level("calendar", symbol=symbol, calendar=fit.calendar.name, fit=fit.explanation)
    calendars = SymbolCalendars({s: f.calendar for s, f in fits.items()})
    return ReplayCalendars(restamped, calendars, fits)


def _restamp(recording: Recording, fit: CalendarFit) -> Recording:
    """The recording with its bars' start times as the calendar reads them (its report says
    how naive times were read in the end)."""
    starts_ms = fit.starts_ms
    if np.array_equal(starts_ms, recording.starts):
        return recording
    rows = [(int(start), *row[1:]) for start, row in zip(starts_ms, recording.rows, strict=True)]
    report = recording.report
    if report is not None:
        ends = ", stamped at bar ends" if fit.label == "end" else ""
        zone = f"naive times read as {fit.timezone}{ends} ({fit.calendar.name}'s reading)"
        report = replace(report, zone=zone)
    return replace(recording, rows=rows, report=report, naive_times=False)
