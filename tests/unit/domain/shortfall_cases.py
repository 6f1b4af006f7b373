"""Builders for shortfall tests: orders, their quotes and fills, and a period whose recorded
equities come from the real `Portfolio` (so a remainder means the attribution lost money)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from trader.domain import (
    Fill,
    Liquidity,
    Order,
    OrderType,
    Portfolio,
    Quote,
    QuoteSource,
    Side,
)
from trader.domain.shortfall_records import (
    OrderRecord,
    Period,
    RiskAction,
    Run,
    TickRecord,
    TickStatus,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
TICK = timedelta(hours=1)
SOL = "SOL/USDT"
START = Decimal(10_000)


def tick(n: int) -> datetime:
    return T0 + n * TICK


def order(
    n: int,
    side: Side,
    amount: str,
    *,
    symbol: str = SOL,
    leg: str = "main",
    limit: str | None = None,
) -> Order:
    return Order.create(
        strategy="simple",
        symbol=symbol,
        side=side,
        type=OrderType.MARKET if limit is None else OrderType.LIMIT,
        amount=Decimal(amount),
        limit_price=None if limit is None else Decimal(limit),
        tick_time=tick(n),
        leg=leg,
    )


def record(
    sent: Order,
    bid: str,
    ask: str,
    fills: Sequence[tuple[str, str, str] | tuple[str, str, str, str]] = (),
    *,
    mids: Sequence[str | None] = (),
    synthetic: bool = False,
    liquidity: Liquidity = Liquidity.TAKER,
) -> OrderRecord:
    """`fills`: (price, amount, fee[, fee currency]), the n-th one n seconds after the tick;
    `mids`: the market's mid at each fill (None or missing: not measured)."""
    source = QuoteSource.SYNTHETIC if synthetic else QuoteSource.REAL
    quote = Quote(sent.symbol, Decimal(bid), Decimal(ask), sent.created_at, source)
    made = []
    mids_at_fill = {}
    for n, (price, amount, fee, *currency) in enumerate(fills):
        fill_id = f"{sent.client_order_id}-{n}"
        made.append(
            Fill(
                fill_id,
                sent.client_order_id,
                sent.symbol,
                sent.side,
                Decimal(price),
                Decimal(amount),
                Decimal(fee),
                currency[0] if currency else "USDT",
                liquidity,
                sent.created_at + timedelta(seconds=n + 1),
            )
        )
        if n < len(mids) and mids[n] is not None:
            mids_at_fill[fill_id] = Decimal(mids[n])
    return OrderRecord(sent, quote, tuple(made), mids_at_fill)


def end_equity(
    records: Iterable[OrderRecord],
    start_cash: Decimal,
    marks: Mapping[str, Decimal],
    start_positions: Mapping[str, Decimal] | None = None,
    start_marks: Mapping[str, Decimal] | None = None,
) -> tuple[Decimal, Decimal]:
    """A run's (start, end) equity as the ledger's portfolio values it: cash plus positions
    at the marks, the start positions bought at their start marks before the period."""
    opening = [
        Fill(f"open-{s}", f"open-{s}", s, Side.BUY if a > 0 else Side.SELL,
             (start_marks or {})[s], abs(a), Decimal(0), "USDT", Liquidity.TAKER, T0 - TICK)
        for s, a in (start_positions or {}).items() if a
    ]  # fmt: skip
    fills = sorted((f for r in records for f in r.fills), key=lambda f: (f.at, f.fill_id))
    before = Portfolio.from_fills("USDT", start_cash, opening)
    after = Portfolio.from_fills("USDT", start_cash, [*opening, *fills])
    return before.equity(start_marks or {}), after.equity(marks)


def period(
    modelled: Sequence[OrderRecord],
    actual: Sequence[OrderRecord],
    *,
    end: Mapping[str, str],
    ticks: Mapping[int, TickStatus] | None = None,
    risk: Sequence[RiskAction] = (),
    modelled_risk: Sequence[RiskAction] = (),
    start_positions: tuple[Mapping[str, Decimal], Mapping[str, Decimal]] = ({}, {}),
    start_marks: Mapping[str, str] | None = None,
    drift: Decimal = Decimal(0),
) -> Period:
    """The two runs, each starting with `START` cash (and `start_positions`: modelled's,
    actual's); `ticks`: the actual run's tick statuses by tick number (by default every tick
    of an actual order ran); `drift`: money the actual run's equity moved beyond its fills."""
    marks = {s: Decimal(p) for s, p in end.items()}
    opened = {s: Decimal(p) for s, p in (start_marks or {}).items()}
    statuses = dict(ticks) if ticks is not None else {}
    for r in actual:
        n = int((r.order.created_at - T0) / TICK)
        statuses.setdefault(n, TickStatus.RAN)
    runs = []
    for records, positions, actions in (
        (modelled, start_positions[0], modelled_risk),
        (actual, start_positions[1], risk),
    ):
        e0, e1 = end_equity(records, START, marks, positions, opened)
        runs.append(Run(e0, e1, tuple(records), positions, tuple(actions)))
    runs[1] = Run(
        runs[1].start_equity,
        runs[1].end_equity + drift,
        runs[1].orders,
        runs[1].start_positions,
        runs[1].risk_actions,
    )
    return Period(
        "USDT",
        opened,
        marks,
        runs[0],
        runs[1],
        tuple(
            TickRecord(tick(n), status, None if status is TickStatus.SKIPPED else tick(n))
            for n, status in sorted(statuses.items())
        ),
    )
