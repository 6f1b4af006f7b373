"""What a daemon's ledger says it did, read without writing to it (a running daemon may hold
it): the account, its starts with their settings, the bars it decided on, its ticks, forecasts,
decisions and the quotes they were made on, its orders and fills, and its trading state's
changes. The same reader reads the replay's ledger, which has the same schema."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from trader.domain import Fill, Liquidity, Order, OrderStatus, OrderType, Quote, QuoteSource, Side
from trader.ledger.codec import optional_money, optional_time, parse_time
from trader.ledger.database import reading
from trader.ledger.migrations import MIGRATIONS
from trader.ledger.runs import DaemonRun, LateTick, read_late, read_runs, read_settings

# The schema that records what a replay needs (settings, runs, decision quotes).
RECORDING_SCHEMA = 10

Row = tuple[Any, ...]


class UnreadableLedger(Exception):
    """The ledger cannot be compared as it is: the message says why, first."""


@dataclass(frozen=True)
class TickRow:
    at: datetime
    outcome: str
    ready: int
    skipped: Mapping[str, str]


@dataclass(frozen=True)
class DecisionRow:
    tick: datetime
    symbol: str
    strategy: str
    direction: str
    reason: str
    inputs: str  # the stored JSON, compared as written

    @property
    def key(self) -> tuple[datetime, str, str]:
        return (self.tick, self.symbol, self.strategy)


@dataclass(frozen=True)
class StateEvent:
    at: datetime
    state: str
    reason: str


@dataclass(frozen=True)
class LedgerRecord:
    path: Path
    schema: int
    currency: str
    starting_cash: Decimal
    runs: list[DaemonRun]
    settings: dict[str, dict[str, Any]]  # recorded settings by digest
    bars: dict[str, list[Row]]  # per symbol: (start ms, o, h, l, c, v, quote volume) by time
    timeframes: dict[str, str]
    ticks: list[TickRow]
    forecasts: list[Row]  # (tick, symbol, model, as_of, steps, fields, levels, q, mean)
    decisions: list[DecisionRow]
    quotes: dict[tuple[datetime, str], Quote]  # the quote each decision was made on
    orders: list[Order]
    fills: list[Fill]
    events: list[StateEvent]
    equity: list[tuple[datetime, Decimal]] = field(default_factory=list)
    late: list[LateTick] = field(default_factory=list)  # ticks run late, or missed
    cash: list[tuple[datetime, Decimal]] = field(default_factory=list)  # as each tick booked it
    final_cash: Decimal | None = None  # after everything booked, the last tick's fills too
    refusals: list[tuple[datetime, str, str]] = field(default_factory=list)  # tick, symbol, rule
    _quote_times: dict[str, list[datetime]] = field(default_factory=dict, repr=False)

    def quote_times(self, symbol: str) -> list[datetime]:
        """The ticks with a decision quote for `symbol`, in order (worked out once)."""
        cache = self._quote_times
        if not cache:
            for tick, each in sorted(self.quotes):
                cache.setdefault(each, []).append(tick)
        return cache.get(symbol, [])

    def period(self) -> tuple[datetime, datetime] | None:
        """The first and last tick booked."""
        return (self.ticks[0].at, self.ticks[-1].at) if self.ticks else None


def _order(row: Row) -> Order:
    cid, strategy, symbol, side, type_, amount, limit, created, expires, status, filled, eid = row
    return Order(
        cid, strategy, symbol, Side(side), OrderType(type_), Decimal(amount),
        optional_money(limit), parse_time(created), OrderStatus(status), Decimal(filled),
        optional_time(expires), eid,
    )  # fmt: skip


def _fill(row: Row) -> Fill:
    fid, cid, symbol, side, price, amount, fee, currency, liquidity, at, estimated = row
    return Fill(
        fid, cid, symbol, Side(side), Decimal(price), Decimal(amount), Decimal(fee), currency,
        Liquidity(liquidity), parse_time(at), bool(estimated),
    )  # fmt: skip


def _has(c: sqlite3.Connection, table: str) -> bool:
    found = c.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,))
    return found.fetchone() is not None


def read_ledger(path: Path) -> LedgerRecord:
    """UnreadableLedger for a file that is not a trader ledger, or one newer than this code."""
    if not path.is_file():
        raise UnreadableLedger(f"no ledger at {path}")
    try:
        with reading(path) as connection:
            return _read(connection, path)
    except (sqlite3.Error, ValueError, KeyError) as error:
        raise UnreadableLedger(f"ledger {path} cannot be read: {error}") from error


def _read(c: sqlite3.Connection, path: Path) -> LedgerRecord:
    (schema,) = c.execute("PRAGMA user_version").fetchone()
    if schema > len(MIGRATIONS):
        raise UnreadableLedger(
            f"ledger {path} has schema {schema}, newer than this trader ({len(MIGRATIONS)})"
        )
    if not _has(c, "account") or not _has(c, "ticks"):
        raise UnreadableLedger(f"{path} is not a trader ledger (no account or ticks)")
    account = c.execute("SELECT currency, starting_cash, cash FROM account").fetchone()
    if account is None:
        raise UnreadableLedger(f"ledger {path} has no account: the daemon never traded")
    recording = schema >= RECORDING_SCHEMA
    runs = read_runs(c) if recording else []
    settings = {d: json.loads(t) for d, t in read_settings(c).items()} if recording else {}
    bars: dict[str, list[Row]] = {}
    timeframes: dict[str, str] = {}
    for symbol, timeframe, *values in c.execute(
        "SELECT symbol, timeframe, start_ms, open, high, low, close, volume, quote_volume "
        "FROM bars ORDER BY symbol, timeframe, start_ms"
    ):
        if timeframes.setdefault(symbol, timeframe) != timeframe:
            raise UnreadableLedger(f"{symbol} has bars of {timeframes[symbol]} and {timeframe}")
        bars.setdefault(symbol, []).append(tuple(values))
    ticks = [
        TickRow(parse_time(at), outcome, ready, json.loads(skipped))
        for at, outcome, ready, skipped in c.execute(
            "SELECT at, outcome, ready, skipped FROM ticks ORDER BY at"
        )
    ]
    forecasts = c.execute("SELECT * FROM forecasts ORDER BY tick, symbol, model").fetchall()
    decisions = [
        DecisionRow(parse_time(t), s, st, d, r, i)
        for t, s, st, d, r, i in c.execute("SELECT * FROM decisions ORDER BY tick, symbol")
    ]
    quotes = {}
    if recording:
        for tick, symbol, bid, ask, source, at in c.execute("SELECT * FROM decision_quotes"):
            quote = Quote(symbol, Decimal(bid), Decimal(ask), parse_time(at), QuoteSource(source))
            quotes[(parse_time(tick), symbol)] = quote
    orders = [
        _order(r)
        for r in c.execute(
            "SELECT client_order_id, strategy, symbol, side, type, amount, limit_price, "
            "created_at, expires_at, status, filled_amount, exchange_order_id FROM orders "
            "ORDER BY rowid"
        )
    ]
    fills = [
        _fill(r)
        for r in c.execute(
            "SELECT fill_id, client_order_id, symbol, side, price, amount, fee, fee_currency, "
            "liquidity, at, fee_estimated FROM fills ORDER BY rowid"
        )
    ]
    events = [
        StateEvent(parse_time(at), state, reason)
        for at, state, reason in c.execute(
            "SELECT at, state, reason FROM trading_state_events ORDER BY id"
        )
    ]
    booked = c.execute("SELECT at, equity, cash FROM equity ORDER BY at").fetchall()
    return LedgerRecord(
        path, schema, account[0], Decimal(account[1]), runs, settings, bars, timeframes, ticks,
        forecasts, decisions, quotes, orders, fills, events,
        [(parse_time(at), Decimal(e)) for at, e, _ in booked],
        read_late(c) if recording else [],
        [(parse_time(at), Decimal(cash)) for at, _, cash in booked], Decimal(account[2]),
        [(parse_time(t), s, r) for t, s, r in c.execute(
            "SELECT tick, symbol, rule FROM risk_refusals ORDER BY tick, symbol, rule"
        )] if recording else [],
    )  # fmt: skip
