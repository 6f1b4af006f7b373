"""When Alpaca works a stock order: the regular session, the extended hours around it, and
the session a closed-market order waits for.

Alpaca's "Orders at Alpaca" (alpacahq/alpaca-docs content/trading/orders.md, and the
blog post "Alpaca Introduces Stock Trading from 4 am to 8 pm ET"): pre-market 04:00-09:30
ET and after-hours 16:00-20:00 ET on trading days; on a half day the extended session ends
at 17:00, four hours after the 13:00 close, so after-hours is the four hours after each
session's close. "Orders not eligible for extended hours submitted after 4:00pm ET will be
queued up for release the next trading day"; an extended-hours order submitted outside
04:00-20:00 ET waits for the next pre-market (the older text of the same page: "queued and
will be eligible for execution from the beginning of the next available supported
pre-market hours"). A day order ends with its session: at the close, or at the end of
after-hours when it is an extended-hours order.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from trader.domain import from_epoch_ms, to_epoch_ms
from trader.emulator.sessions import NEW_YORK, Sessions

PRE_MARKET = time(4)
AFTER_HOURS = timedelta(hours=4)


@dataclass(frozen=True)
class Session:
    open: datetime
    close: datetime

    @property
    def pre_market(self) -> datetime:
        return datetime.combine(self.open.astimezone(NEW_YORK).date(), PRE_MARKET, NEW_YORK)

    @property
    def after_hours_end(self) -> datetime:
        return self.close + AFTER_HOURS


@dataclass(frozen=True)
class Timing:
    """When an order starts to work (None: now) and when a day order ends."""

    release_at: datetime | None
    expires_at: datetime | None


def _session(sessions: Sessions, i: int) -> Session | None:
    if 0 <= i < len(sessions.opens):
        return Session(from_epoch_ms(sessions.opens[i]), from_epoch_ms(sessions.closes[i]))
    return None


def timing(sessions: Sessions, now: datetime, *, extended: bool, day: bool) -> Timing | None:
    """The order's timing; None when no session of the calendar is left to work it in."""
    i = bisect.bisect_right(sessions.opens, to_epoch_ms(now)) - 1
    for candidate in (i, i + 1, i + 2):
        session = _session(sessions, candidate)
        if session is None:
            continue
        start = session.pre_market if extended else session.open
        end = session.after_hours_end if extended else session.close
        if now < end:
            release = start if now < start else None
            return Timing(release, end if day else None)
    return None
