"""The two ledgers as the attribution's inputs (`trader.domain.shortfall_records`): each run's
orders with the quote its decision priced with and its fills, its equity at the period's start
and end, and what the daemon did at each of the replay's ticks (ran, late, halted; a tick it
has no record of was skipped).

The marks are the ones the engine valued equity at: the mid of each symbol's quote at the
tick (the quote its decision was made on), else the close of its last bar by then."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from trader.domain import Fill, Portfolio
from trader.domain.money import exact
from trader.domain.shortfall import Attribution, attribute
from trader.domain.shortfall_records import (
    OrderRecord,
    Period,
    RiskAction,
    RiskActionKind,
    Run,
    TickRecord,
    TickStatus,
)
from trader.shortfall.read import LedgerRecord


class NotAttributable(Exception):
    """The ledgers lack what the attribution needs: the message says what."""


def _mark(record: LedgerRecord, symbol: str, at: datetime) -> Decimal | None:
    quote = record.quotes.get((at, symbol))
    if quote is not None:
        return quote.mid
    cutoff = int(at.timestamp() * 1000)
    closes = [row[4] for row in record.bars.get(symbol, ()) if row[0] < cutoff]
    return Decimal(repr(closes[-1])) if closes else None


def _marks(record: LedgerRecord, symbols: Iterable[str], at: datetime) -> dict[str, Decimal]:
    found = {s: _mark(record, s, at) for s in symbols}
    return {s: m for s, m in found.items() if m is not None}


def _equity_at(record: LedgerRecord, at: datetime | None, marks: Mapping[str, Decimal]) -> Decimal:
    """The account at the last tick at or before `at` (None: before the first), valued at
    `marks`: the cash that tick booked and the positions the fills by then made. Both runs
    are valued at the same marks (the attribution's rule): a live daemon's own marks were
    the real mids, which the replay's are not."""
    if at is None:
        return record.starting_cash
    if record.final_cash is not None and record.ticks and at >= record.ticks[-1].at:
        # The ledger's end: everything booked. A live fill's time is the venue's, which may
        # fall after the nominal time of the tick that booked it.
        cash, fills = record.final_cash, record.fills
    else:
        booked = [cash for t, cash in record.cash if t <= at]
        if not booked:
            return record.starting_cash
        cash, fills = booked[-1], [f for f in record.fills if f.at <= at]
    with exact():
        value = cash
        for symbol, amount in _positions(record, fills).items():
            if symbol not in marks:
                raise NotAttributable(f"no mark for {symbol} at {at.isoformat()}")
            value += amount * marks[symbol]
    return value


def _positions(record: LedgerRecord, fills: Iterable[Fill]) -> dict[str, Decimal]:
    """Each symbol's position after `fills`, as the ledger books them (a fee in the base
    asset comes out of the position)."""
    portfolio = Portfolio.from_fills(record.currency, record.starting_cash, fills)
    return {s: portfolio.amount(s) for s in portfolio.positions if portfolio.amount(s)}


def _run(
    record: LedgerRecord,
    ticks: list[datetime],
    begin: datetime | None,
    marks: tuple[Mapping[str, Decimal], Mapping[str, Decimal]],
    missing: _Missing,
    other: LedgerRecord | None = None,
) -> Run:
    """`record` as one run of the period; an order whose decision quote the ledger lacks
    (older than schema 10) is priced with `other`'s, where given (noted in `missing`)."""
    first, last = ticks[0], ticks[-1]
    before = [t.at for t in record.ticks if t.at < first]
    fills: dict[str, list[Fill]] = {}
    for fill in record.fills:
        fills.setdefault(fill.client_order_id, []).append(fill)
    orders = []
    for order in record.orders:
        if not first <= order.created_at <= last:
            continue
        key = (order.created_at, order.symbol)
        quote, seen = record.quotes.get(key), record
        if quote is None and other is not None and (quote := other.quotes.get(key)):
            missing.borrowed.append(order.client_order_id)
            seen = other  # the mids at its fills too: delay is measured alike in both runs
        if quote is None:
            missing.unquoted.append(order.client_order_id)
            continue
        got = tuple(fills.get(order.client_order_id, ()))
        mids = {f.fill_id: m for f in got if (m := _mid_before(seen, f)) is not None}
        orders.append(OrderRecord(order, quote, got, mids))
    refused = tuple(
        RiskAction(at, symbol, RiskActionKind.REFUSED, rule)
        for at, symbol, rule in record.refusals
        if first <= at <= last
    )
    return Run(
        start_equity=_equity_at(record, before[-1] if before else None, marks[0]),
        end_equity=_equity_at(record, last, marks[1]),
        orders=tuple(orders),
        risk_actions=refused,
        start_positions=(
            _positions(record, [f for f in record.fills if f.at < first]) if begin else {}
        ),
    )


def _mid_before(record: LedgerRecord, fill: Fill) -> Decimal | None:
    """The market's mid when `fill` happened, as the run saw it: its quote for the symbol at
    the last tick at or before the fill (the delay part measures the move to it)."""
    times = record.quote_times(fill.symbol)
    i = bisect_right(times, fill.at)
    return record.quotes[(times[i - 1], fill.symbol)].mid if i else None


def _tick_records(actual: LedgerRecord, modelled_ticks: list[datetime]) -> tuple[TickRecord, ...]:
    # A tick that skipped every symbol (the exchange unreachable, its bars stale) decided
    # nothing: what the model traded then is a skipped tick's, as if it had not run at all.
    symbols = set(actual.bars)
    ran = {t.at for t in actual.ticks if not symbols or not symbols <= set(t.skipped)}
    late = {t.at: t for t in actual.late if not t.missed}
    halted = _halted_ticks(actual, modelled_ticks)
    out = []
    for at in modelled_ticks:
        if at not in ran:
            out.append(TickRecord(at, TickStatus.SKIPPED))
        elif at in halted:
            out.append(TickRecord(at, TickStatus.HALTED, at))
        elif at in late:
            out.append(TickRecord(at, TickStatus.LATE, at + timedelta(seconds=late[at].lateness_s)))
        else:
            out.append(TickRecord(at, TickStatus.RAN, at))
    return tuple(out)


def _halted_ticks(actual: LedgerRecord, ticks: list[datetime]) -> set[datetime]:
    """The ticks at which the daemon's trading state was halted."""
    events = sorted(actual.events, key=lambda e: e.at)
    out, state, i = set(), "active", 0
    for at in ticks:
        while i < len(events) and events[i].at <= at:
            state = events[i].state
            i += 1
        if state == "halted":
            out.add(at)
    return out


@dataclass
class _Missing:
    unquoted: list[str] = field(default_factory=list)  # left out: no quote in either ledger
    borrowed: list[str] = field(default_factory=list)  # the daemon's, priced with the replay's


@dataclass(frozen=True)
class Attributed:
    attribution: Attribution
    period: Period  # what it read: `measure_costs` of each run
    unquoted: list[str]  # orders left out, by client order id: no decision quote anywhere
    # The daemon's orders priced with the replay's quote (its ledger kept none): their quote
    # and spread parts are zero, the difference shows as slippage.
    borrowed: list[str]


def attribution(
    actual: LedgerRecord,
    modelled: LedgerRecord,
    begin: datetime | None = None,
    end: datetime | None = None,
) -> Attributed:
    """The attribution over the replay's ticks in [begin, end]."""
    ticks = [
        t.at
        for t in modelled.ticks
        if (begin is None or t.at >= begin) and (end is None or t.at <= end)
    ]
    if not ticks:
        raise NotAttributable("the replay ran no tick in the period")
    symbols = sorted(set(actual.bars) | set(modelled.bars))
    start = [t.at for t in modelled.ticks if t.at < ticks[0]]
    marks = (_marks(modelled, symbols, start[-1] if start else ticks[0]),
             _marks(modelled, symbols, ticks[-1]))  # fmt: skip
    missing = _Missing()
    a_run = _run(actual, ticks, begin, marks, missing, modelled)
    m_run = _run(modelled, ticks, begin, marks, missing)
    # The daemon's ticks in the period too: one the replay did not run still placed orders.
    ran = {t.at for t in actual.ticks if ticks[0] <= t.at <= ticks[-1]}
    period = Period(
        actual.currency, *marks, m_run, a_run, _tick_records(actual, sorted(ran | set(ticks)))
    )
    return Attributed(attribute(period), period, missing.unquoted, missing.borrowed)
