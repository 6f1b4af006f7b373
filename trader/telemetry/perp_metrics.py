"""A perpetual account's positions and funding, for the dashboard and the liquidation alerts.

Per symbol (the settings' symbols; flat: side 0, size 0, margin 0, no liquidation price):
- `trader_perp_position_side` +1 long, -1 short, 0 flat; `trader_perp_position_size` signed,
  in the base asset;
- `trader_perp_leverage`: the leverage set on the symbol (what its initial margin is at);
- `trader_perp_margin`: what backs it, in the cash currency (isolated: its wallet; cross: its
  initial margin at the mark; `trader.domain.perp.position_risk`);
- `trader_perp_liquidation_price` (NaN: none, Binance's "--") and
  `trader_perp_liquidation_distance_ratio`, the distance from the mark as a share of it
  (+Inf: no liquidation price, the position covered down to zero; -Inf: below maintenance
  margin at any price; NaN: flat): what the alerts compare with the buffer;
- `trader_perp_unrealized_pnl`: on the mark price (never the last trade);
- `trader_perp_funding_paid_total` and `trader_perp_funding_received_total`: the funding the
  ledger booked, counters that start at the ledger's totals at start-up (a restart is no
  reset); paid minus received over a window is the net funding paid;
- `trader_perp_buffer_reductions_total`: the liquidation buffer rule's reduce-only orders;
- `trader_perp_mark_age_seconds`: on a live feed, how old the mark the last tick valued the
  position on was (0: read at that tick; the tick's time less the time of the tick that read
  it when the venue's mark could not be read; +Inf: none read yet). Such a tick is degraded.
For the account: `trader_perp_liquidation_buffer_ratio` (`risk.liquidation_buffer`, 0: the rule
is off), `trader_perp_max_leverage` (`risk.max_leverage`) and `trader_perp_account_leverage_ratio`
(the positions' notional at the marks over the margin balance, what the leverage check limits).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from trader.config.trading_settings import RiskSettings
from trader.domain import DomainError, Portfolio
from trader.domain.perp import LeverageBrackets, MarginMode
from trader.domain.perp.from_portfolio import perp_account
from trader.domain.perp.position_risk import PositionRisk, position_risks

NAN = float("nan")


class FundingBooked(Protocol):
    """A funding row as the ledger books it (`trader.ledger.funding.FundingRow`): positive
    `paid` paid, negative received."""

    @property
    def symbol(self) -> str: ...

    @property
    def paid(self) -> Decimal: ...


class PerpMetrics:
    def __init__(self, registry: CollectorRegistry, symbols: Sequence[str]) -> None:
        self.symbols = list(symbols)
        self._counted: dict[str, int] = {}
        self._terms: tuple[Mapping[str, LeverageBrackets], int, MarginMode | str] | None = None
        self._reductions: Mapping[str, int] = {}
        self._funding: Callable[[], Iterable[FundingBooked]] = tuple

        def per_symbol(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, ["symbol"], registry=registry)

        def counted(name: str, doc: str) -> Counter:
            return Counter(name, doc, ["symbol"], registry=registry)

        def account(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, registry=registry)

        self.side = per_symbol(
            "trader_perp_position_side", "Perpetual position side: 1 long, -1 short, 0 flat"
        )
        self.size = per_symbol(
            "trader_perp_position_size", "Perpetual position, signed, in the base asset"
        )
        self.leverage = per_symbol("trader_perp_leverage", "Leverage set on the symbol")
        self.margin = per_symbol(
            "trader_perp_margin", "Margin backing the position, in the cash currency "
            "(isolated: its wallet; cross: its initial margin at the mark)",
        )  # fmt: skip
        self.liquidation_price = per_symbol(
            "trader_perp_liquidation_price", "Mark price at which the position is liquidated "
            "(NaN: none)",
        )  # fmt: skip
        self.distance = per_symbol(
            "trader_perp_liquidation_distance_ratio", "Distance from the mark to the "
            "liquidation price as a share of the mark (+Inf: no liquidation price; -Inf: below "
            "maintenance at any price; NaN: flat)",
        )  # fmt: skip
        self.unrealized = per_symbol(
            "trader_perp_unrealized_pnl", "Unrealised P&L of the position on the mark price"
        )
        self.funding_paid = counted(
            "trader_perp_funding_paid_total", "Funding paid, in the cash currency (the ledger's "
            "funding rows)",
        )  # fmt: skip
        self.funding_received = counted(
            "trader_perp_funding_received_total", "Funding received, in the cash currency (the "
            "ledger's funding rows)",
        )  # fmt: skip
        self.reductions = counted(
            "trader_perp_buffer_reductions_total", "Reduce-only orders of the liquidation "
            "buffer rule",
        )  # fmt: skip
        self.mark_age = per_symbol(
            "trader_perp_mark_age_seconds", "Age of the mark price the last tick valued the "
            "position on (0: read at that tick; +Inf: none read yet)",
        )  # fmt: skip
        self.buffer = account(
            "trader_perp_liquidation_buffer_ratio", "risk.liquidation_buffer: the least "
            "distance to liquidation, as a share of the mark, the rule keeps (0: off)",
        )  # fmt: skip
        self.max_leverage = account(
            "trader_perp_max_leverage", "risk.max_leverage: the most notional per unit of "
            "margin balance",
        )  # fmt: skip
        self.account_leverage = account(
            "trader_perp_account_leverage_ratio", "Positions' notional at the marks over the "
            "margin balance (NaN: no margin balance)",
        )  # fmt: skip
        for symbol in self.symbols:
            self._flat(symbol)
            self.funding_paid.labels(symbol)
            self.funding_received.labels(symbol)
            self.reductions.labels(symbol)
            self.mark_age.labels(symbol).set(0)

    def _flat(self, symbol: str) -> None:
        for gauge in (self.side, self.size, self.margin, self.unrealized, self.leverage):
            gauge.labels(symbol).set(0)
        self.liquidation_price.labels(symbol).set(NAN)
        self.distance.labels(symbol).set(NAN)

    def set_limits(self, risk: RiskSettings) -> None:
        """The limits in force (at start-up, and after each reload)."""
        self.buffer.set(risk.liquidation_buffer)
        self.max_leverage.set(risk.max_leverage)

    def use_terms(
        self,
        brackets: Mapping[str, LeverageBrackets],
        *,
        leverage: int,
        margin_mode: MarginMode | str,
        reductions: Mapping[str, int] | None = None,
        funding: Callable[[], Iterable[FundingBooked]] | None = None,
    ) -> None:
        """A perpetual account's terms (its symbols' brackets, the leverage set on them, the
        margin mode): from now on each book observed is read as a `PerpAccount`. After each
        tick (`after_tick`) the risk engine's running count of buffer reductions
        (`RiskEngine.reductions`) and the tick's funding rows (`funding()`) are counted."""
        self._terms = (brackets, leverage, margin_mode)
        self._reductions = reductions if reductions is not None else {}
        self._funding = funding or tuple

    def after_tick(self, at: datetime, stale_marks: Mapping[str, datetime | None]) -> None:
        """A tick at `at` has been booked: its funding rows and the rule's reductions are
        counted, and the age of the marks it valued on (`TickReport.stale_marks`)."""
        self.count_reductions(self._reductions)
        self.funding_booked(self._funding())
        self.observe_mark_ages(at, stale_marks)

    def observe_portfolio(self, portfolio: Portfolio, marks: Mapping[str, Decimal]) -> None:
        """The engine's book at a tick, read as the perpetual account it is (nothing without
        `use_terms`: a spot account). A position without a mark or brackets leaves the last
        values rather than guess."""
        if self._terms is None:
            return
        brackets, leverage, mode = self._terms
        try:
            account = perp_account(portfolio, brackets, leverage=leverage, margin_mode=mode)
            risks = position_risks(account, marks)
            balance = account.margin_balance(marks)
        except DomainError:
            return
        self.observe(risks, balance)

    def observe(self, risks: Iterable[PositionRisk], margin_balance: Decimal | None) -> None:
        """The account's open positions now (`position_risks`); every other symbol is flat."""
        held = {risk.symbol: risk for risk in risks}
        for symbol in sorted(set(self.symbols) | set(held)):
            risk = held.get(symbol)
            if risk is None:
                self._flat(symbol)
                continue
            self.side.labels(symbol).set(1 if risk.size > 0 else -1)
            self.size.labels(symbol).set(float(risk.size))
            self.leverage.labels(symbol).set(risk.leverage)
            self.margin.labels(symbol).set(float(risk.margin))
            price = risk.liquidation_price
            self.liquidation_price.labels(symbol).set(NAN if price is None else float(price))
            self.distance.labels(symbol).set(risk.distance_or_bound())
            self.unrealized.labels(symbol).set(float(risk.unrealised_pnl))
        notional = sum((risk.notional for risk in held.values()), Decimal(0))
        if margin_balance is None or margin_balance <= 0:
            self.account_leverage.set(NAN if held else 0)
        else:
            self.account_leverage.set(float(notional / margin_balance))

    def funding_booked(self, rows: Iterable[FundingBooked]) -> None:
        """Funding rows the ledger booked (a tick's, or the venue's at a reconcile); at
        start-up, every row the ledger holds, so a restart continues the counters."""
        for row in rows:
            if row.paid > 0:
                self.funding_paid.labels(row.symbol).inc(float(row.paid))
            elif row.paid < 0:
                self.funding_received.labels(row.symbol).inc(float(-row.paid))

    def observe_mark_ages(self, at: datetime, stale: Mapping[str, datetime | None]) -> None:
        """A tick at `at` valued `stale`'s perpetuals on marks read at those earlier ticks
        (None: none read), every other one on a mark read at it."""
        for symbol in sorted(set(self.symbols) | set(stale)):
            if symbol not in stale:
                self.mark_age.labels(symbol).set(0)
                continue
            read = stale[symbol]
            age = math.inf if read is None else (at - read).total_seconds()
            self.mark_age.labels(symbol).set(age)

    def count_reductions(self, counted: Mapping[str, int]) -> None:
        """The risk engine's running count of buffer reductions by symbol
        (`RiskEngine.reductions`): what is new since the last call is added."""
        for symbol, total in counted.items():
            new = total - self._counted.get(symbol, 0)
            if new > 0:
                self.reductions.labels(symbol).inc(new)
                self._counted[symbol] = total
