"""/readyz's checks beyond start-up and the exchange: fresh data and a trading state that is
not halted. Each answers (ok, why) in words an operator can act on."""

from __future__ import annotations

from datetime import timedelta

from trader.domain import to_epoch_ms
from trader.market.calendars.known_end import readiness
from trader.market.hygiene import SkipReason
from trader.risk.state import TradingState
from trader.service.parts import Parts
from trader.telemetry.readiness import Verdict


def data_check(parts: Parts) -> tuple[bool, str]:
    """Fresh: the tick that is due not later than the settle delay and misfire grace (live),
    no skipped symbol, a good quote for every symbol (live), every perpetual valued on a mark
    read at the last tick (live)."""
    venue, report, settings = parts.venue, parts.last_report, parts.settings
    assert venue is not None
    problems: list[str] = []
    if report is None:
        if venue.kind == "replay":
            problems.append("no tick yet")
    else:
        # The data step's words where it has them ("gap: 12 of 16 bars in a row ...").
        status = parts.engine.market.status if parts.engine is not None else {}
        problems += [f"{s}: {status.get(s, r)}" for s, r in report.skipped.items()]
        problems += [
            f"{s}: valued on the mark read at {read.isoformat()} (the venue's mark could not be "
            "read at the last tick)" if read is not None else f"{s}: no mark read yet"
            for s, read in report.stale_marks.items()
        ]  # fmt: skip
        # Late against the tick that is due, not the last one run: a market closed for the
        # night, a weekend or a holiday has no tick due, and is not stale for it.
        schedule = settings.schedule
        allowed = timedelta(seconds=schedule.settle_delay_s + schedule.misfire_grace_s)
        due = parts.ticks.due if parts.ticks is not None else None
        if venue.kind == "live" and due is not None and venue.clock.now() - due > allowed:
            problems.append(
                f"no tick since {report.at.isoformat()} (one was due {due.isoformat()})"
            )
    if venue.kind == "live":
        for symbol in settings.market.symbols:
            quote = parts.quotes.get(symbol)
            if quote is None:
                problems.append(f"{symbol}: no quote yet")
            elif isinstance(quote, SkipReason):
                problems.append(f"{symbol}: quote {quote}")
    unique = list(dict.fromkeys(problems))
    return (not unique, "; ".join(unique) or "fresh")


def calendar_check(parts: Parts) -> tuple[bool, str]:
    """Always ok (the daemon trades on the regular week past a calendar's known sessions),
    but says so, and what to do."""
    venue = parts.venue
    assert venue is not None
    return True, readiness(venue.calendars.known_ends(), to_epoch_ms(venue.clock.now()))


def trading_state_check(parts: Parts) -> tuple[bool, str]:
    engine = parts.engine
    assert engine is not None
    status = engine.risk.status
    return (status.state is not TradingState.HALTED, f"{status.state}: {status.reason}")


def publish_verdict(parts: Parts, verdict: Verdict) -> None:
    """Each /readyz answer (and each heartbeat) sets the readiness metric."""
    if parts.metrics is not None:
        parts.metrics.ready.set(verdict.ready)
