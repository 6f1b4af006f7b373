"""The shortfall: the actual run's P&L minus the modelled run's, split into named parts that
add up to it exactly (inputs: `trader.domain.shortfall_records`).

Each run's P&L over the period is, exactly, with P0 and P1 a symbol's start and end marks:

    E1 - E0 = sum over symbols of pos0 * (P1 - P0)
            + sum over fills of side * q * (P1 - price) - fee          (+ what fills don't explain)

(`side` is +1 for a buy; `fee` is the fee in cash, or a fee taken in the base asset times P1,
since it left the position that much smaller). D = actual's (E1 - E0) - modelled's. Every part
below is a sum of products of exact decimals, so the parts add up to D to the last digit.

Orders are matched by client order id and taken in the order of their decisions. For each
order, the first q_c = min(q_actual, q_modelled) units filled of each run are compared price
by price; the units one run filled beyond the other's are valued whole, at P1.

Compared units. A fill's price is cut, per unit, at the decision's quote (mid m, half-spread
h), the market's mid when it filled (m_f; taken as m where not measured) as
`side * price = side * m + h + side * (m_f - m) + r`, r the rest. Then, summed over the
compared units of the order (q units each run), with A the actual and M the modelled run:

    quote (or late ticks) = -side * q * (m_A - m_M)   the real mid at the decision against the
                                                      modelled one; at a tick the daemon ran
                                                      late, the later mid is the late tick's
    spread    = -sum q * (h_A - h_M)                  half the quoted spread, paid crossing it
    delay     = -sum side * q * ((m_f - m)_A - (m_f - m)_M)   the move from decision to fill
    slippage  = -sum q * (r_A - r_M)                  the price beyond the quote and the move
    fees      = -(sum fee_A - sum fee_M)

(a cut fill's fee is shared pro rata, worked out to 1e-18, the other piece keeping the rest).

Units one run filled beyond the other, x = q_actual - q_modelled (they open a position
difference of side * x), are valued `side * q * (P1 - price) - fee` piece by piece, added when
the actual run filled them and subtracted when the modelled run did. Their cause, from the
order's amount (sigma = amount_A - amount_M, zero for an order a run has not) and its unfilled
rest (phi = unfilled_M - unfilled_A), x = sigma + phi:

    sigma: an order the actual run has not: skipped ticks (no record of the tick, or skipped),
           halts (ran halted), risk actions (its risk checks refused it); amounts that differ
           with a risk action in either run at that tick and symbol: risk actions; otherwise a
           follow-on (below)
    phi:   the venue gave less than the model: missed fills (the actual order filled nothing)
           or partial fills; gave more: extra fills
    sigma and phi of one sign: the first |sigma| units go to sigma's cause, the rest to phi's;
    of opposite signs, all |x| units go to the larger one's cause.

A follow-on is an order sized differently only because the runs held different positions (or
equity) by then: e.g. after a skipped buy the daemon buys at the next tick what the model had
already bought. Per symbol a gap of lots holds the position difference by the cause that
opened it (starting positions, skipped ticks, ...); a follow-on closes lots of the other sign,
oldest first, and the units it closes are valued as that cause's (a skipped buy caught up a
tick later costs the skipped part the price moved in between, the change in fees included).
What no lot explains is sizing (the strategy sized from a different equity), which opens a
sizing lot.

    starting positions = sum over symbols of (pos0_A - pos0_M) * (P1 - P0)
    remainder = D - every other part: zero when each run's recorded equities are what its
                fills and the marks make them; otherwise it says by how much each run's are not
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType

from trader.domain.errors import DomainError
from trader.domain.money import ZERO, exact
from trader.domain.order import OrderType
from trader.domain.shortfall_pieces import Gap, Piece, cut, fee_value, total
from trader.domain.shortfall_records import (
    OrderRecord,
    Period,
    Run,
    TickRecord,
    TickStatus,
)
from trader.domain.side import Side


class Part(StrEnum):
    QUOTE = "quote"
    LATE_TICKS = "late_ticks"
    SPREAD = "spread"
    DELAY = "delay"
    SLIPPAGE = "slippage"
    FEES = "fees"
    MISSED_FILLS = "missed_fills"
    PARTIAL_FILLS = "partial_fills"
    EXTRA_FILLS = "extra_fills"
    SKIPPED_TICKS = "skipped_ticks"
    HALTS = "halts"
    RISK_ACTIONS = "risk_actions"
    SIZING = "sizing"
    STARTING_POSITIONS = "starting_positions"
    REMAINDER = "remainder"

    @property
    def label(self) -> str:
        return self.value.replace("_", " ")


@dataclass(frozen=True)
class OrderShare:
    """What one order (of either run or both) added to each part; parts it did not touch are
    left out."""

    key: str
    symbol: str
    side: Side
    type: OrderType
    decided_at: datetime
    parts: Mapping[Part, Decimal]


@dataclass(frozen=True)
class Attribution:
    """`parts` holds every part, in `Part`'s order, zeros included; they add up to
    `difference` exactly. `start_equity` is the actual run's: percentages are of it."""

    currency: str
    start_equity: Decimal
    actual_pnl: Decimal
    modelled_pnl: Decimal
    parts: Mapping[Part, Decimal]
    orders: tuple[OrderShare, ...]
    remainder_reason: str | None = None

    @property
    def difference(self) -> Decimal:
        with exact():
            return self.actual_pnl - self.modelled_pnl

    def as_dict(self) -> dict[str, object]:
        """Plain JSON data; amounts as decimal strings, so they stay exact."""
        return {
            "currency": self.currency,
            "start_equity": str(self.start_equity),
            "actual_pnl": str(self.actual_pnl),
            "modelled_pnl": str(self.modelled_pnl),
            "difference": str(self.difference),
            "parts": {str(part): str(value) for part, value in self.parts.items()},
            "remainder_reason": self.remainder_reason,
            "orders": [
                {
                    "key": share.key,
                    "symbol": share.symbol,
                    "side": str(share.side),
                    "type": str(share.type),
                    "decided_at": share.decided_at.isoformat(),
                    "parts": {str(part): str(value) for part, value in share.parts.items()},
                }
                for share in self.orders
            ],
        }


def attribute(period: Period) -> Attribution:
    """The actual run's P&L minus the modelled run's, in parts (the module's formulas)."""
    parts = dict.fromkeys(Part, ZERO)
    gaps: dict[str, Gap[Part]] = {}
    _starting_positions(period, parts, gaps)
    ticks = {tick.at: tick for tick in period.actual_ticks}
    risked = {
        (a.at, a.symbol) for run in (period.actual, period.modelled) for a in run.risk_actions
    }
    modelled = {record.key: record for record in period.modelled.orders}
    actual = {record.key: record for record in period.actual.orders}
    shares = []
    for key in sorted(modelled.keys() | actual.keys(), key=_decision(modelled, actual)):
        model_order, actual_order = modelled.get(key), actual.get(key)
        one = _Order(period, model_order, actual_order, ticks, risked)
        symbol = one.symbol
        share = one.attribute(gaps.setdefault(symbol, Gap()))
        with exact():
            for part, amount in share.items():
                parts[part] += amount
        first = actual_order or model_order
        assert first is not None  # the key came from one of the two
        shares.append(
            OrderShare(
                key,
                symbol,
                one.side,
                first.order.type,
                first.order.created_at,
                MappingProxyType({p: v for p, v in share.items() if v}),
            )
        )
    with exact():
        actual_pnl = period.actual.end_equity - period.actual.start_equity
        modelled_pnl = period.modelled.end_equity - period.modelled.start_equity
        parts[Part.REMAINDER] = actual_pnl - modelled_pnl - sum(parts.values(), ZERO)
    return Attribution(
        period.currency,
        period.actual.start_equity,
        actual_pnl,
        modelled_pnl,
        MappingProxyType(parts),
        tuple(shares),
        _remainder_reason(period) if parts[Part.REMAINDER] else None,
    )


def implied_pnl(run: Run, period: Period) -> Decimal:
    """A run's P&L as its start positions, its fills and the period's marks make it."""
    with exact():
        pnl = sum(
            (
                amount * (period.end_marks[s] - period.start_marks[s])
                for s, amount in run.start_positions.items()
                if amount
            ),
            ZERO,
        )
        for record in run.orders:
            end = period.end_marks.get(record.order.symbol, ZERO)
            pnl += sum((p.value(end) for p in _pieces(record, period)), ZERO)
    return pnl


def _remainder_reason(period: Period) -> str:
    said = []
    for name, run in (("actual", period.actual), ("modelled", period.modelled)):
        with exact():
            beyond = run.end_equity - run.start_equity - implied_pnl(run, period)
        if beyond:
            said.append(f"the {name} run's equity moved {beyond} {period.currency} beyond it")
    return (
        "what the fills and the marks do not explain: "
        + "; ".join(said)
        + " (funding, fee postings, transfers, or an equity valued at other marks)"
    )


def _starting_positions(
    period: Period, parts: dict[Part, Decimal], gaps: dict[str, Gap[Part]]
) -> None:
    actual, modelled = period.actual.start_positions, period.modelled.start_positions
    for symbol in sorted(actual.keys() | modelled.keys()):
        with exact():
            apart = actual.get(symbol, ZERO) - modelled.get(symbol, ZERO)
            if not apart:
                continue
            move = period.end_marks[symbol] - period.start_marks[symbol]
            parts[Part.STARTING_POSITIONS] += apart * move
        gaps.setdefault(symbol, Gap()).open(Part.STARTING_POSITIONS, apart)


def _decision(
    modelled: Mapping[str, OrderRecord], actual: Mapping[str, OrderRecord]
) -> Callable[[str], tuple[datetime, str, str]]:
    def key(order_key: str) -> tuple[datetime, str, str]:
        record = actual.get(order_key) or modelled[order_key]
        return record.order.created_at, record.order.symbol, order_key

    return key


def _pieces(record: OrderRecord, period: Period) -> list[Piece]:
    quote = record.quote
    with exact():
        half_spread = (quote.ask - quote.bid) / 2
    end = period.end_marks.get(record.order.symbol, ZERO)
    return [
        Piece(
            fill.side,
            fill.amount,
            fill.price,
            fee_value(fill, period.currency, end),
            quote.mid,
            half_spread,
            record.mids_at_fill.get(fill.fill_id),
            fill.at,
        )
        for fill in sorted(record.fills, key=lambda f: (f.at, f.fill_id))
    ]


class _Order:
    """One order key's share of the parts: the compared units, then the units beyond."""

    def __init__(
        self,
        period: Period,
        modelled: OrderRecord | None,
        actual: OrderRecord | None,
        ticks: Mapping[datetime, TickRecord],
        risked: AbstractSet[tuple[datetime, str]],
    ) -> None:
        either = actual or modelled
        assert either is not None
        if modelled is not None and actual is not None and _decided(modelled) != _decided(actual):
            raise DomainError(
                f"order {either.key} is not the same decision in both runs (symbol, side "
                "or tick differ)"
            )
        self.period, self.modelled, self.actual = period, modelled, actual
        self.risked = risked
        self.symbol, self.side = either.order.symbol, either.order.side
        self.at = either.order.created_at
        self.tick = ticks.get(self.at)
        if actual is not None and (self.tick is None or self.tick.status is TickStatus.SKIPPED):
            raise DomainError(
                f"order {either.key}: the actual run placed it at {self.at.isoformat()}, a "
                "tick it has no record of running"
            )

    def attribute(self, gap: Gap[Part]) -> dict[Part, Decimal]:
        share = dict.fromkeys(Part, ZERO)
        model = [] if self.modelled is None else _pieces(self.modelled, self.period)
        real = [] if self.actual is None else _pieces(self.actual, self.period)
        compared = min(total(model), total(real))
        model_compared, model_beyond = cut(model, compared)
        real_compared, real_beyond = cut(real, compared)
        self._compare(share, real_compared, model_compared)
        beyond, sign = (real_beyond, 1) if real_beyond else (model_beyond, -1)
        end = self.period.end_marks.get(self.symbol, ZERO)
        for cause, amount in self._causes(gap):
            taken, beyond = cut(beyond, amount)
            with exact():
                share[cause] += sign * sum((piece.value(end) for piece in taken), ZERO)
        return share

    def _compare(self, share: dict[Part, Decimal], real: list[Piece], model: list[Piece]) -> None:
        late = self.tick is not None and self.tick.status is TickStatus.LATE
        quote = Part.LATE_TICKS if late else Part.QUOTE
        targets = (quote, Part.SPREAD, Part.DELAY, Part.SLIPPAGE)
        with exact():
            for piece in real:
                for part, amount in zip(targets, piece.cost_parts(), strict=True):
                    share[part] -= amount
                share[Part.FEES] -= piece.fee
            for piece in model:
                for part, amount in zip(targets, piece.cost_parts(), strict=True):
                    share[part] += amount
                share[Part.FEES] += piece.fee

    def _causes(self, gap: Gap[Part]) -> list[tuple[Part, Decimal]]:
        """The units one run filled beyond the other, by cause, in the order they filled;
        the gap updated (a follow-on, None here, closes its lots first)."""
        amount_m, unfilled_m, _ = _amounts(self.modelled)
        amount_a, unfilled_a, filled_a = _amounts(self.actual)
        with exact():
            sigma, phi = amount_a - amount_m, unfilled_m - unfilled_a
            beyond = sigma + phi  # = filled_a - filled_m
        if not beyond:
            return []
        fill_cause = (
            Part.EXTRA_FILLS
            if phi > 0
            else (Part.MISSED_FILLS if not filled_a else Part.PARTIAL_FILLS)
        )
        size_cause = self._size_cause()
        segments: list[tuple[Part | None, Decimal]]
        if sigma * phi >= 0:
            segments = [(size_cause, abs(sigma)), (fill_cause, abs(phi))]
        elif abs(sigma) > abs(phi):
            segments = [(size_cause, abs(beyond))]
        else:
            segments = [(fill_cause, abs(beyond))]
        direction = self.side.sign * (1 if beyond > 0 else -1)  # of the position gap it opens
        causes: list[tuple[Part, Decimal]] = []
        for cause, units in segments:
            if not units:
                continue
            if cause is not None:
                gap.open(cause, direction * units)
                causes.append((cause, units))
                continue
            closed, left = gap.close(direction * units)
            causes.extend(closed)
            if left:
                gap.open(Part.SIZING, left)
                causes.append((Part.SIZING, abs(left)))
        return causes

    def _size_cause(self) -> Part | None:
        """Why the two runs ordered different amounts; None: a follow-on."""
        if self.actual is None:
            if self.tick is None or self.tick.status is TickStatus.SKIPPED:
                return Part.SKIPPED_TICKS
            if self.tick.status is TickStatus.HALTED:
                return Part.HALTS
        if (self.at, self.symbol) in self.risked:
            return Part.RISK_ACTIONS
        return None


def _decided(record: OrderRecord) -> tuple[str, Side, datetime]:
    return record.order.symbol, record.order.side, record.order.created_at


def _amounts(record: OrderRecord | None) -> tuple[Decimal, Decimal, Decimal]:
    """An order's amount, what of it did not fill, and what did; zeros for no order."""
    if record is None:
        return ZERO, ZERO, ZERO
    filled = record.filled
    with exact():
        return record.order.amount, record.order.amount - filled, filled
