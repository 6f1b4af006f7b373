"""Alpaca's market clock (`/v2/clock`) and calendar (`/v2/calendar`) in the shapes it answers
them, from the emulated stock market's sessions.

The shapes are alpaca-py's fixtures (tests/broker/broker_client/test_misc_routes.py: a clock
with "timestamp" "2022-05-16T16:32:24.14373588-04:00", New York's time to the nanosecond; a
calendar day with "session_open" "0400" and "session_close" "2000", four hours after the close,
as the emulator's after-hours end, `alpaca_hours`) and Alpaca's documented
calendar answer, which adds "settlement_date" (1970-01-02 settles 1970-01-06: two trading days
later). Alpaca's settlement_date is a trade date's settlement: two trading days later, one
since the US moved to T+1 on 2024-05-28.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from trader.emulator.alpaca_hours import AFTER_HOURS
from trader.emulator.alpaca_wire import go_time
from trader.emulator.sessions import NEW_YORK, Sessions

T_PLUS_ONE = date(2024, 5, 28)  # the first US trade date that settled the next business day
EXTENDED_OPEN = "0400"  # Alpaca's pre-market, New York; after-hours end 4 h after the close
_SETTLEMENT_REACH = timedelta(days=14)  # far enough to find two trading days after any date


def clock_json(now: datetime, sessions: Sessions | None) -> dict[str, Any]:
    """The market clock at `now`: New York's times, as Alpaca writes them."""
    local = now.astimezone(NEW_YORK)
    if sessions is None:  # no stock market emulated: never open
        return {"timestamp": go_time(local), "is_open": False, "next_open": None,
                "next_close": None}  # fmt: skip
    upcoming = [sessions.next_open(now), sessions.next_close(now)]
    nxt = [go_time(t.astimezone(NEW_YORK)) if t else None for t in upcoming]
    return {"timestamp": go_time(local), "is_open": sessions.is_open(now),
            "next_open": nxt[0], "next_close": nxt[1]}  # fmt: skip


def calendar_json(sessions: Sessions, first: date, last: date) -> list[dict[str, Any]]:
    """Every trading day from `first` to `last`, with its settlement date."""
    days = sessions.days(first, last + _SETTLEMENT_REACH)
    dates = [d for d, _, _ in days]
    out = []
    for index, (day, opened, closed) in enumerate(days):
        if day > last:
            break
        later = 1 if day >= T_PLUS_ONE else 2
        settles = dates[index + later] if index + later < len(dates) else None
        out.append({
            "date": day.isoformat(), "open": opened.strftime("%H:%M"),
            "close": closed.strftime("%H:%M"), "session_open": EXTENDED_OPEN,
            "session_close": (closed + AFTER_HOURS).strftime("%H%M"),  # 1700 on a half day
            "settlement_date": settles.isoformat() if settles else None,
        })  # fmt: skip
    return out
