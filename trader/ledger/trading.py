"""The trading record: orders and their transitions, fills, positions and cash, ticks,
forecasts, decisions, equity and the trading state.

Every write that changes money is one transaction: the fills, the orders they fill, the
positions and cash they imply, and the market cursor (which bars the fills came from). A crash
leaves all of it or none of it, and `load` checks that positions and cash equal what the fills
imply before anything trades.
"""

from __future__ import annotations

import json
import operator
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from trader.domain import (
    Fill,
    Forecast,
    Liquidity,
    Lot,
    Order,
    OrderStatus,
    OrderType,
    Portfolio,
    Position,
    Quote,
    Side,
    Signal,
)
from trader.domain.execution import Execution
from trader.ledger.codec import (
    SORTED,
    compact_json,
    money_text,
    optional_money,
    optional_time,
    parse_time,
    sorted_seconds_json,
    time_text,
)
from trader.ledger.database import Database, LedgerError, Statements, transaction
from trader.ledger.fees import derive_portfolio
from trader.ledger.forecast_rows import forecast_row
from trader.ledger.funding import PerpRows, with_funding, write_perp_rows
from trader.ledger.tick_rows import DECISION_QUOTES, RISK_REFUSALS, quote_rows, refusal_rows
from trader.ledger.trading_state import (
    SET_STATE,
    read_status,
    state_row,
    write_status,
    write_status_event,
)
from trader.ledger.write_failure import refused_writes
from trader.risk.engine import Verdict
from trader.risk.marks import DayMarks
from trader.risk.state import TradingStatus

_TERMINAL = tuple(s.value for s in OrderStatus if s.is_terminal)
_MOVE_CURSOR = (
    "INSERT INTO market_cursor VALUES (?, ?) ON CONFLICT (symbol) DO UPDATE "
    "SET last_bar_start = excluded.last_bar_start"
)
_UPSERT_ORDER = """
    INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (client_order_id) DO UPDATE SET status = excluded.status,
        filled_amount = excluded.filled_amount, exchange_order_id = excluded.exchange_order_id,
        updated_at = excluded.updated_at
"""
# Statements that keep one row per key, updated in place: only the last write of each key
# counts, in the order the keys were first written (a buffered ledger keeps no more).
LATEST_ONLY: dict[str, Callable[[Sequence[Any]], object]] = {
    _MOVE_CURSOR: operator.itemgetter(0),  # by symbol
    SET_STATE: lambda row: 1,  # the one row
    # By client order id: an order's later rows differ from its first only in the columns the
    # upsert updates (its status, filled amount, exchange id, time), so the last row is the
    # order as it ended, at the place its first took.
    _UPSERT_ORDER: operator.itemgetter(0),
}


@dataclass(frozen=True)
class LedgerState:
    """What a restart resumes from."""

    portfolio: Portfolio
    starting_cash: Decimal
    open_orders: list[Order]
    fill_counts: dict[str, int]
    cursor: dict[str, datetime]  # per symbol: the last bar whose fills are booked
    status: TradingStatus | None
    day: DayMarks | None
    last_tick: datetime | None
    # Orders created since the last completed tick: the only ones a re-run can meet again.
    recent_orders: dict[str, OrderStatus]


@dataclass(frozen=True)
class TickRecord:
    at: datetime
    outcome: str
    ready: int
    skipped: Mapping[str, str]
    timings: Mapping[str, float]
    forecasts: Sequence[Forecast]
    decisions: Sequence[Signal]
    equity: Decimal
    cash: Decimal
    exposure: Decimal
    drawdown: float
    status: TradingStatus
    day: DayMarks | None
    # The quotes the tick priced with (each decision's is kept), and what the risk checks
    # refused, by symbol (`tick_rows`).
    quotes: Mapping[str, Quote] = field(default_factory=dict)
    refusals: Sequence[tuple[str, Verdict]] = ()


def _order_row(order: Order, at: datetime) -> tuple[object, ...]:
    return (
        order.client_order_id, order.strategy, order.symbol, order.side.value, order.type.value,
        money_text(order.amount),
        money_text(order.limit_price) if order.limit_price is not None else None,
        time_text(order.created_at),
        time_text(order.expires_at) if order.expires_at is not None else None,
        order.status.value, money_text(order.filled_amount), order.exchange_order_id,
        time_text(at),
    )  # fmt: skip


def _order(row: Sequence[Any]) -> Order:
    (cid, strategy, symbol, side, type_, amount, limit, created, expires, status, filled,
     exchange_id) = row[:12]  # fmt: skip
    return Order(
        cid, strategy, symbol, Side(side), OrderType(type_), Decimal(amount),
        optional_money(limit), parse_time(created), OrderStatus(status), Decimal(filled),
        optional_time(expires), exchange_id,
    )  # fmt: skip


def _fill_row(fill: Fill) -> tuple[object, ...]:
    return (
        fill.fill_id, fill.client_order_id, fill.symbol, fill.side.value, money_text(fill.price),
        money_text(fill.amount), money_text(fill.fee), fill.fee_currency, fill.liquidity.value,
        time_text(fill.at), int(fill.fee_estimated),
    )  # fmt: skip


def _fill(row: Sequence[Any]) -> Fill:
    fid, cid, symbol, side, price, amount, fee, currency, liquidity, at, estimated = row
    return Fill(
        fid, cid, symbol, Side(side), Decimal(price), Decimal(amount), Decimal(fee), currency,
        Liquidity(liquidity), parse_time(at), bool(estimated),
    )  # fmt: skip


def _write_orders(
    c: Statements, orders: Sequence[Order], at: datetime, detail: str | Sequence[str]
) -> None:
    """Each order's new state, and an event for it (callers pass only orders that changed);
    `detail` says why, once for all or one per order."""
    when = time_text(at)
    details = [detail] * len(orders) if isinstance(detail, str) else detail
    c.executemany(_UPSERT_ORDER, [_order_row(order, at) for order in orders])
    c.executemany(
        "INSERT INTO order_events (client_order_id, at, status, detail) VALUES (?, ?, ?, ?)",
        [
            (order.client_order_id, when, order.status.value, why)
            for order, why in zip(orders, details, strict=True)
        ],
    )


def _write_portfolio(c: Statements, portfolio: Portfolio, symbols: Iterable[str]) -> None:
    """Cash, fees, and the positions of `symbols` (those the fills touched)."""
    c.execute(
        "UPDATE account SET cash = ?, fees_paid = ?",
        (money_text(portfolio.cash), money_text(portfolio.fees_paid)),
    )
    rows = []
    for symbol in sorted(set(symbols)):
        position = portfolio.position(symbol)
        lots = json.dumps([[str(lot.amount), str(lot.price)] for lot in position.lots])
        realized = portfolio.realized_pnl.get(symbol, Decimal(0))
        rows.append((symbol, money_text(position.amount), lots, money_text(realized)))
    c.executemany("INSERT OR REPLACE INTO positions VALUES (?, ?, ?, ?)", rows)


class TradingLedger:
    def __init__(self, database: Database) -> None:
        self._db = database
        # The trading state's row as last written, and what it was made of: most ticks
        # write the same (immutable) status and day marks again.
        self._state: tuple[TradingStatus | None, DayMarks | None, tuple[object, ...]] = (
            None, None, (),
        )  # fmt: skip

    @property
    def database(self) -> Database:
        return self._db

    async def open(self, currency: str, starting_cash: Decimal) -> LedgerState:
        """The ledger's state, creating the account on first use. An existing account keeps
        its own history: a changed currency is an error, a changed starting cash is ignored."""

        def ensure(c: sqlite3.Connection) -> None:
            row = c.execute("SELECT currency FROM account").fetchone()
            if row is None:
                with transaction(c):
                    c.execute(
                        "INSERT INTO account VALUES (1, ?, ?, ?, '0')",
                        (currency, money_text(starting_cash), money_text(starting_cash)),
                    )
            elif row[0] != currency:
                raise LedgerError(
                    f"the ledger's account is in {row[0]}, the settings say {currency}: "
                    "use another ledger.path for another currency"
                )

        await self._db.run(ensure)
        return await self.load()

    async def load(self) -> LedgerState:
        return await self._db.run(_load)

    async def _write(self, work: Callable[[Statements], object], *, durable: bool = True) -> None:
        """One transaction; a write the disk refuses comes out as `LedgerWriteFailed`."""
        with refused_writes(self._db.path):
            await self._db.write(work, durable=durable)

    async def record_orders(self, orders: Sequence[Order], at: datetime, detail: str) -> None:
        if orders:
            await self._write(lambda c: _write_orders(c, orders, at, detail))

    async def commit_tick(
        self,
        executions: Sequence[Execution],
        portfolio: Portfolio,
        cursor: Mapping[str, datetime],
        record: TickRecord,
        change: TradingStatus | None,
        perp: PerpRows | None = None,
    ) -> None:
        """Everything a tick did, in one transaction: its fills, the orders they touched, the
        positions and cash after them (and a perp's funding and liquidations: `funding`), how
        far the market was read, and the tick's record. A
        crash leaves the tick whole or absent, never half-booked. A tick that moved no order
        and no money is not forced to disk: losing it to a power cut only means re-running it."""

        state = self._state_row(record)

        def write(c: Statements) -> None:
            _write_executions(c, executions, portfolio, record.at)
            if perp:
                write_perp_rows(c, perp, portfolio)
            c.executemany(_MOVE_CURSOR, [(s, time_text(t)) for s, t in cursor.items()])
            _write_tick(c, record, state)
            if change is not None:
                write_status_event(c, change)

        await self._write(write, durable=bool(executions) or bool(perp) or change is not None)

    async def commit_quiet_ticks(
        self,
        records: Sequence[TickRecord],
        cursor: Mapping[str, datetime],
        change: TradingStatus | None,
    ) -> None:
        """`commit_tick` for ticks that moved no order and no money (a backtest's quiet
        stretch), in one transaction: the market read as far as `cursor`, each tick's
        record, and a change of the trading state at the last of them."""
        states = [self._state_row(records[-1])]  # the row is kept in place: the last tick's

        def write(c: Statements) -> None:
            c.executemany(_MOVE_CURSOR, [(s, time_text(t)) for s, t in cursor.items()])
            _write_ticks(c, records, states)
            if change is not None:
                write_status_event(c, change)

        await self._write(write, durable=change is not None)

    def _state_row(self, record: TickRecord) -> tuple[object, ...]:
        """The trading state's row for `record` (made again only when it changed)."""
        status, day, state = self._state
        if record.status is not status or record.day is not day:
            state = state_row(record.status, record.day)
            self._state = (record.status, record.day, state)
        return state

    async def record_status(self, status: TradingStatus, day: DayMarks | None) -> None:
        def write(c: Statements) -> None:
            write_status(c, status, day)
            write_status_event(c, status)

        await self._write(write)

    async def last_tick(self) -> datetime | None:
        """The last tick that completed, if any (None on a fresh ledger)."""
        row = await self._db.run(lambda c: c.execute("SELECT max(at) FROM ticks").fetchone())
        return parse_time(row[0]) if row and row[0] else None

    async def fills(self) -> list[Fill]:
        rows = await self._db.run(
            lambda c: c.execute("SELECT * FROM fills ORDER BY rowid").fetchall()
        )
        return [_fill(row) for row in rows]

    async def orders(self) -> list[Order]:
        rows = await self._db.run(
            lambda c: c.execute("SELECT * FROM orders ORDER BY rowid").fetchall()
        )
        return [_order(row) for row in rows]


def _write_executions(
    c: Statements,
    executions: Sequence[Execution],
    portfolio: Portfolio,
    at: datetime,
    detail: str = "execution",
) -> None:
    if not executions:
        return
    _write_orders(c, [e.order for e in executions], at, [e.reason or detail for e in executions])
    c.executemany(
        "INSERT INTO fills VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [_fill_row(fill) for e in executions for fill in e.fills],
    )
    touched = {fill.symbol for e in executions for fill in e.fills}
    if touched:
        _write_portfolio(c, portfolio, touched)


def _write_tick(c: Statements, record: TickRecord, state: tuple[object, ...]) -> None:
    """The tick's rows; `state`: the trading state's row (`_state_row`)."""
    _write_ticks(c, [record], [state])


def _write_ticks(
    c: Statements, records: Sequence[TickRecord], states: Sequence[tuple[object, ...]]
) -> None:
    """The ticks' rows, table by table; `states`: trading state rows, the last kept."""
    dated = [(time_text(record.at), record) for record in records]
    c.executemany(
        "INSERT OR REPLACE INTO forecasts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [forecast_row(tick, f) for tick, r in dated for f in r.forecasts],
    )
    c.executemany(
        "INSERT OR REPLACE INTO decisions VALUES (?, ?, ?, ?, ?, ?)",
        [
            (tick, s.symbol, s.strategy, s.direction.value, s.reason, compact_json(s.inputs))
            for tick, record in dated
            for s in record.decisions
        ],
    )
    c.executemany(DECISION_QUOTES, quote_rows((t, r.decisions, r.quotes) for t, r in dated))
    c.executemany(RISK_REFUSALS, refusal_rows((t, r.refusals) for t, r in dated))
    c.executemany(
        "INSERT OR REPLACE INTO equity VALUES (?, ?, ?, ?, ?)",
        [
            (tick, money_text(r.equity), money_text(r.cash), money_text(r.exposure), r.drawdown)
            for tick, r in dated
        ],
    )
    c.executemany(SET_STATE, states[-1:])  # one row, kept in place: the last tick's
    c.executemany(
        "INSERT OR REPLACE INTO ticks VALUES (?, ?, ?, ?, ?, ?)",
        [
            (tick, tick, r.outcome, r.ready,
             SORTED.encode(dict(r.skipped)) if r.skipped else "{}",
             sorted_seconds_json(r.timings))
            for tick, r in dated
        ],
    )  # fmt: skip


def _load(c: sqlite3.Connection) -> LedgerState:
    account = c.execute("SELECT currency, starting_cash, cash, fees_paid FROM account").fetchone()
    if account is None:
        raise LedgerError("the ledger has no account yet")
    currency, starting, cash, fees = account
    rows = c.execute("SELECT rowid, * FROM fills ORDER BY rowid")
    numbered = [(row[0], _fill(row[1:])) for row in rows]
    fills = [fill for _, fill in numbered]
    derived = with_funding(c, derive_portfolio(c, currency, Decimal(starting), numbered))
    stored = Portfolio(
        currency,
        Decimal(cash),
        {s: Position(s, tuple(Lot(Decimal(a), Decimal(p)) for a, p in json.loads(lots)))
         for s, _amount, lots, _r in c.execute("SELECT * FROM positions") if json.loads(lots)},
        {s: Decimal(r) for s, _amount, _lots, r in c.execute("SELECT * FROM positions")},
        Decimal(fees),
    )  # fmt: skip
    _check_consistent(stored, derived)
    filled: dict[str, Decimal] = {}
    for fill in fills:
        filled[fill.client_order_id] = filled.get(fill.client_order_id, Decimal(0)) + fill.amount
    for cid, amount in c.execute("SELECT client_order_id, filled_amount FROM orders"):
        if Decimal(amount) != filled.get(cid, Decimal(0)):
            raise LedgerError(
                f"the ledger disagrees with its own fills: order {cid} says {amount} filled, "
                f"its fills add up to {filled.get(cid, Decimal(0))}"
            )
    placeholders = ", ".join("?" * len(_TERMINAL))
    open_rows = c.execute(
        f"SELECT * FROM orders WHERE status NOT IN ({placeholders}) ORDER BY rowid",  # noqa: S608 - placeholders only
        _TERMINAL,
    ).fetchall()
    counts = dict(
        c.execute("SELECT client_order_id, count(*) FROM fills GROUP BY client_order_id").fetchall()
    )
    cursor = {
        s: parse_time(t) for s, t in c.execute("SELECT symbol, last_bar_start FROM market_cursor")
    }
    status, day = read_status(c)
    last = c.execute("SELECT max(at) FROM ticks").fetchone()[0]
    recent = dict(
        c.execute(
            "SELECT client_order_id, status FROM orders WHERE created_at > ?", (last or "",)
        ).fetchall()
    )
    return LedgerState(
        derived, Decimal(starting), [_order(r) for r in open_rows], counts, cursor, status, day,
        parse_time(last) if last else None,
        {cid: OrderStatus(status) for cid, status in recent.items()},
    )  # fmt: skip


def _check_consistent(stored: Portfolio, derived: Portfolio) -> None:
    problems = []
    if stored.cash != derived.cash:
        problems.append(f"cash {stored.cash} but the fills imply {derived.cash}")
    if stored.fees_paid != derived.fees_paid:
        problems.append(f"fees {stored.fees_paid} but the fills imply {derived.fees_paid}")
    for symbol in sorted(set(stored.positions) | set(derived.positions)):
        if stored.position(symbol) != derived.position(symbol):
            problems.append(
                f"{symbol} position {stored.position(symbol).amount} but the fills imply "
                f"{derived.position(symbol).amount}"
            )
    if problems:
        raise LedgerError("the ledger disagrees with its own fills: " + "; ".join(problems))
