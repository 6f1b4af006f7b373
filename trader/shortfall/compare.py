"""The daemon's ledger (actual) beside its replay's (modelled): tick by tick, decision by
decision, order by order.

Orders pair by client order id: it is made of the strategy, the symbol, the tick and the leg,
so the same decision gives the same id in both. A decision is a bug to report (the replay
exits non-zero) only where the daemon and the replay decided on the same forecast, the same
position and the same quote and still decided differently: anything else that differs (a live
fill that left another position, a real quote the model did not have) is a cost for the
attribution, not a fault of the code."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from trader.domain import Fill, Order, OrderType, Quote, Side
from trader.shortfall.read import DecisionRow, LedgerRecord, Row

ZERO = Decimal(0)


@dataclass(frozen=True)
class Filled:
    """One run's fills of one order."""

    fills: tuple[Fill, ...]

    @property
    def amount(self) -> Decimal:
        return sum((f.amount for f in self.fills), ZERO)

    @property
    def notional(self) -> Decimal:
        """Price times amount, summed: exact (the average price is not)."""
        return sum((f.price * f.amount for f in self.fills), ZERO)

    @property
    def fee(self) -> Decimal:
        return sum((f.fee for f in self.fills), ZERO)

    @property
    def first_at(self) -> datetime | None:
        return min((f.at for f in self.fills), default=None)

    @property
    def last_at(self) -> datetime | None:
        return max((f.at for f in self.fills), default=None)


class FillOutcome(StrEnum):
    SAME = "same"  # the same fills, to the last digit
    DIFFERENT = "different"  # both filled the same amount, at other prices, times or fees
    PARTIAL = "partial"  # the venue filled less than the model
    OVERFILLED = "overfilled"  # the venue filled more than the model
    MISSED = "missed"  # the model filled, the venue did not
    EXTRA = "extra"  # the venue filled, the model did not
    NEITHER = "neither"  # nobody filled it
    ONLY_ACTUAL = "only_actual"  # an order the replay never placed
    ONLY_MODELLED = "only_modelled"  # an order the daemon never placed


@dataclass(frozen=True)
class OrderComparison:
    """One order as the daemon had it (actual) and as the replay did (modelled): what the
    attribution (`trader.domain.shortfall`) reads, fill against modelled fill."""

    client_order_id: str
    symbol: str
    side: Side
    type: OrderType
    decided_at: datetime  # the tick whose decision placed it
    actual_order: Order | None
    modelled_order: Order | None
    actual: Filled
    modelled: Filled
    quote: Quote | None  # the quote the daemon decided on (its source says real or not)
    modelled_quote: Quote | None  # the replay's, from its spread model

    @property
    def outcome(self) -> FillOutcome:
        if self.actual_order is None or self.modelled_order is None:
            return (
                FillOutcome.ONLY_MODELLED
                if self.actual_order is None
                else (FillOutcome.ONLY_ACTUAL)
            )
        a, m = self.actual.amount, self.modelled.amount
        if ZERO in (a, m):
            return _one_filled(a, m)
        if a != m:
            return FillOutcome.PARTIAL if a < m else FillOutcome.OVERFILLED
        same = [_fill_key(f) for f in self.actual.fills] == [
            _fill_key(f) for f in self.modelled.fills
        ]
        return FillOutcome.SAME if same else FillOutcome.DIFFERENT

    @property
    def terms_differ(self) -> bool:
        """Both placed it, with another amount, limit or expiry."""
        a, m = self.actual_order, self.modelled_order
        return a is not None and m is not None and _terms(a) != _terms(m)


def _terms(order: Order) -> tuple[object, ...]:
    return (order.side, order.type, order.amount, order.limit_price, order.expires_at)


def _one_filled(actual: Decimal, modelled: Decimal) -> FillOutcome:
    """Where at least one of them filled nothing."""
    if actual == modelled:
        return FillOutcome.NEITHER
    return FillOutcome.MISSED if actual == ZERO else FillOutcome.EXTRA


def _fill_key(fill: Fill) -> tuple[object, ...]:
    return (fill.price, fill.amount, fill.fee, fill.at)


@dataclass(frozen=True)
class DecisionDifference:
    tick: datetime
    symbol: str
    strategy: str
    actual: DecisionRow | None
    modelled: DecisionRow | None
    same_forecast: bool
    same_position: bool
    same_quote: bool
    same_settings: bool  # False where the user overrode a setting for the replay

    @property
    def unexplained(self) -> bool:
        """The same forecast, position, quote and settings, and another decision: a bug."""
        both = self.actual is not None and self.modelled is not None
        same = self.same_forecast and self.same_position and self.same_quote
        return both and same and self.same_settings

    def describe(self) -> str:
        a, m = self.actual, self.modelled

        def said(row: DecisionRow | None) -> str:
            if row is None:
                return "no decision"
            if a is not None and m is not None and (a.direction, a.reason) == (
                m.direction, m.reason,
            ):  # fmt: skip
                return f"{row.direction} ({row.reason}) with inputs {row.inputs}"
            return f"{row.direction} ({row.reason})"

        return (
            f"tick {self.tick.isoformat()} {self.symbol} {self.strategy}: the daemon decided "
            f"{said(self.actual)}, the replay {said(self.modelled)}"
        )


@dataclass(frozen=True)
class Comparison:
    ticks_both: int
    ticks_only_actual: list[datetime]  # the daemon ran them, the replay could not
    ticks_only_modelled: list[datetime]  # the replay ran them, the daemon skipped them
    decisions_compared: int  # made by both, at the same tick, for the same symbol
    decision_differences: list[DecisionDifference]
    orders: list[OrderComparison]

    @property
    def first_unexplained(self) -> DecisionDifference | None:
        return next((d for d in self.decision_differences if d.unexplained), None)


def _in(at: datetime, begin: datetime | None, end: datetime | None) -> bool:
    return (begin is None or at >= begin) and (end is None or at <= end)


def _forecast_rows(rows: Iterable[Row]) -> dict[tuple[datetime, str], list[Row]]:
    from trader.ledger.codec import parse_time  # noqa: PLC0415 - beside its one use

    out: dict[tuple[datetime, str], list[Row]] = {}
    for row in rows:
        out.setdefault((parse_time(row[0]), row[1]), []).append(tuple(row[2:]))
    return out


def _positions(
    fills: Sequence[Fill], ticks: Iterable[tuple[datetime, str]]
) -> dict[tuple[datetime, str], Decimal]:
    """Each symbol's position at each asked tick, from the fills at or before it."""
    by_symbol: dict[str, list[Fill]] = {}
    for fill in sorted(fills, key=lambda f: f.at):
        by_symbol.setdefault(fill.symbol, []).append(fill)
    out = {}
    for at, symbol in ticks:
        amount = ZERO
        for fill in by_symbol.get(symbol, ()):
            if fill.at > at:
                break
            amount += fill.amount if fill.side is Side.BUY else -fill.amount
        out[(at, symbol)] = amount
    return out


def compare(
    actual: LedgerRecord,
    modelled: LedgerRecord,
    begin: datetime | None = None,
    end: datetime | None = None,
    overridden: Callable[[datetime], bool] = lambda _: False,
) -> Comparison:
    """The two ledgers over [begin, end] (ticks, decisions, the orders they placed);
    `overridden`: whether the replay ran a tick with settings the user overrode."""
    a_ticks = {t.at for t in actual.ticks if _in(t.at, begin, end)}
    m_ticks = {t.at for t in modelled.ticks if _in(t.at, begin, end)}
    a_decisions = {d.key: d for d in actual.decisions if _in(d.tick, begin, end)}
    m_decisions = {d.key: d for d in modelled.decisions if _in(d.tick, begin, end)}
    a_forecasts, m_forecasts = _forecast_rows(actual.forecasts), _forecast_rows(modelled.forecasts)
    keys = sorted(set(a_decisions) | set(m_decisions))
    asked = [(tick, symbol) for tick, symbol, _ in keys]
    a_positions = _positions(actual.fills, asked)
    m_positions = _positions(modelled.fills, asked)
    differences = []
    paired = 0
    for key in keys:
        tick, symbol, strategy = key
        a, m = a_decisions.get(key), m_decisions.get(key)
        paired += a is not None and m is not None
        if a is not None and m is not None and _same_decision(a, m):
            continue
        if (a is None and tick not in a_ticks) or (m is None and tick not in m_ticks):
            continue  # a tick only one of them ran: counted with the ticks
        aq, mq = actual.quotes.get((tick, symbol)), modelled.quotes.get((tick, symbol))
        differences.append(
            DecisionDifference(
                tick, symbol, strategy, a, m,
                same_forecast=a_forecasts.get((tick, symbol)) == m_forecasts.get((tick, symbol)),
                same_position=a_positions[(tick, symbol)] == m_positions[(tick, symbol)],
                same_quote=_same_quote(aq, mq),
                same_settings=not overridden(tick),
            )
        )  # fmt: skip
    return Comparison(
        len(a_ticks & m_ticks),
        sorted(a_ticks - m_ticks),
        sorted(m_ticks - a_ticks),
        paired,
        differences,
        compare_orders(actual, modelled, begin, end),
    )


def _same_decision(a: DecisionRow, m: DecisionRow) -> bool:
    return (a.direction, a.reason, a.inputs) == (m.direction, m.reason, m.inputs)


def _same_quote(a: Quote | None, m: Quote | None) -> bool:
    if a is None or m is None:
        return a is m
    return (a.bid, a.ask, a.source) == (m.bid, m.ask, m.source)


def compare_orders(
    actual: LedgerRecord,
    modelled: LedgerRecord,
    begin: datetime | None = None,
    end: datetime | None = None,
) -> list[OrderComparison]:
    """Every order placed in [begin, end] by either run, paired by client order id, in the
    order they were placed."""
    a_orders = {o.client_order_id: o for o in actual.orders if _in(o.created_at, begin, end)}
    m_orders = {o.client_order_id: o for o in modelled.orders if _in(o.created_at, begin, end)}
    a_fills, m_fills = _fills_by_order(actual.fills), _fills_by_order(modelled.fills)
    out = []
    for cid in sorted(set(a_orders) | set(m_orders), key=lambda c: _placed(c, a_orders, m_orders)):
        a, m = a_orders.get(cid), m_orders.get(cid)
        order = a if a is not None else m
        assert order is not None  # one of them placed it
        at = order.created_at
        out.append(
            OrderComparison(
                cid, order.symbol, order.side, order.type, at, a, m,
                Filled(tuple(a_fills.get(cid, ()))), Filled(tuple(m_fills.get(cid, ()))),
                actual.quotes.get((at, order.symbol)), modelled.quotes.get((at, order.symbol)),
            )
        )  # fmt: skip
    return out


def _placed(cid: str, *orders: Mapping[str, Order]) -> tuple[datetime, str]:
    for by_id in orders:
        if cid in by_id:
            return (by_id[cid].created_at, cid)
    raise KeyError(cid)


def _fills_by_order(fills: Iterable[Fill]) -> dict[str, list[Fill]]:
    out: dict[str, list[Fill]] = {}
    for fill in fills:
        out.setdefault(fill.client_order_id, []).append(fill)
    return out
