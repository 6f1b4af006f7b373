"""The trading state's row: the state, its reason, and the marks the risk limits are measured
from (`risk.marks.DayMarks`), kept so that a restart measures from where it left off. And the
trading state's events, one per change."""

from __future__ import annotations

import sqlite3
from datetime import date
from decimal import Decimal

from trader.ledger.codec import money_text, parse_time, time_text
from trader.ledger.database import Statements
from trader.risk.marks import DayMarks
from trader.risk.state import TradingState, TradingStatus

SET_STATE = "INSERT OR REPLACE INTO trading_state VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)"


def state_row(status: TradingStatus, day: DayMarks | None) -> tuple[object, ...]:
    return (
        status.state.value, status.reason, time_text(status.since),
        day.day.isoformat() if day else None,
        money_text(day.start) if day else None,
        money_text(day.peak) if day else None,
        money_text(day.last) if day else None,
        money_text(day.high) if day else None,
    )  # fmt: skip


def write_status(c: Statements, status: TradingStatus, day: DayMarks | None) -> None:
    c.execute(SET_STATE, state_row(status, day))


def write_status_event(c: Statements, status: TradingStatus) -> None:
    c.execute(
        "INSERT INTO trading_state_events (at, state, reason) VALUES (?, ?, ?)",
        (time_text(status.since), status.state.value, status.reason),
    )


def read_status(c: sqlite3.Connection) -> tuple[TradingStatus | None, DayMarks | None]:
    row = c.execute(
        "SELECT state, reason, since, day, day_start_equity, day_peak_equity, last_equity, "
        "high_equity FROM trading_state"
    ).fetchone()
    if row is None:
        return None, None
    state, reason, since, day, start, peak, last, high = row
    status = TradingStatus(TradingState(state), reason, parse_time(since))
    if not day:
        return status, None
    # A ledger from before schema 7 with no equity row has no last equity or high to read:
    # its day's start and peak are the best known.
    marks = DayMarks(
        date.fromisoformat(day), Decimal(start), Decimal(peak),
        Decimal(last or start), Decimal(high or peak),
    )  # fmt: skip
    return status, marks
