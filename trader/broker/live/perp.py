"""The live broker for linear perpetuals (`market.kind = "perp"`): Binance USDⓈ-M
(`binanceusdm`) and Aster (`aster`, Binance's futures API under /fapi/v3) through ccxt.

The spot live broker's parts, unchanged (client ids, lost answers looked up, fills from the
trade history, polling, cancels), with three differences:
- `prepare()` before any order: one-way mode, the margin mode and leverage of every symbol
  set and checked back, the leverage brackets read (`perp_setup`).
- An order that only reduces or closes a position goes `reduceOnly` (`perp_positions.Sizes`).
- Reconciliation compares positions, funding and the wallet in place of spot balances
  (`perp_reconcile`).
The venue's refusals (-2019 margin, -2022 reduce-only, -4164 notional, -2027, -4061, -1021)
are classified by their code (`trader.broker.venue_errors`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import ccxt.async_support as ccxt

from trader.broker.live.broker import LiveBroker
from trader.broker.live.perp_funding import FundingLedger
from trader.broker.live.perp_positions import Sizes
from trader.broker.live.perp_reconcile import PerpReconciler, PerpState
from trader.broker.live.perp_setup import PerpTerms, prepare_perp_account
from trader.broker.live.submit import Placement
from trader.config.trading_settings import BrokerSettings
from trader.domain import Bar, Instrument, Order, Quote
from trader.domain.execution import Execution
from trader.domain.perp.from_portfolio import whole_leverage
from trader.domain.reconciliation import LedgerBook, ReconcileReport


class PerpLiveBroker(LiveBroker):
    def __init__(
        self,
        exchange: ccxt.Exchange,
        settings: BrokerSettings,
        instruments: Mapping[str, Instrument],
        *,
        max_leverage: float,
        funding: FundingLedger,
        **parts: Any,
    ) -> None:
        super().__init__(exchange, settings, instruments, **parts)
        self.max_leverage = max_leverage
        self.perp = PerpState(whole_leverage(max_leverage), settings.margin_mode, Sizes(), funding)
        old = self._placement
        self._placement = Placement(
            old.client, old.orders, old.booking, old.resolver, params_for=self._params
        )
        self._reconciler = PerpReconciler(
            old.client, old.booking, old.resolver, settings, self.perp
        )
        self.terms: PerpTerms | None = None

    async def prepare(self) -> PerpTerms:
        """Start-up: StartRefused when the account is not as the daemon needs it."""
        terms = await prepare_perp_account(
            self.exchange, self.instruments, self.settings.margin_mode, self.max_leverage
        )
        self.terms = terms
        self.perp.positions = dict(terms.positions)
        self.perp.sizes.reset(terms.positions)
        self._client.log.info(
            "perp account ready", leverage=terms.leverage, margin_mode=terms.margin_mode,
            positions={s: str(p.size) for s, p in sorted(terms.positions.items())},
        )  # fmt: skip
        return terms

    def _params(self, order: Order) -> dict[str, Any]:
        return {"reduceOnly": True} if self.perp.sizes.reduces(order) else {}

    def _booked(self, executions: Sequence[Execution | None]) -> None:
        for execution in executions:
            if execution is not None:
                self.perp.sizes.book(execution.fills)

    async def submit(self, order: Order, quote: Quote, at: datetime) -> Execution:
        done = await super().submit(order, quote, at)
        self._booked([done])
        return done

    async def cancel(self, order: Order, at: datetime) -> Execution | None:
        done = await super().cancel(order, at)
        self._booked([done])
        return done

    async def on_market(
        self, bars: Sequence[Bar], quotes: Mapping[str, Quote], at: datetime
    ) -> list[Execution]:
        done = await super().on_market(bars, quotes, at)
        self._booked(done)
        return done

    async def settle_now(self, client_order_id: str, at: datetime) -> Execution | None:
        done = await super().settle_now(client_order_id, at)
        self._booked([done])
        return done

    async def reconcile(
        self, book: LedgerBook, at: datetime, *, dry_run: bool = False
    ) -> ReconcileReport:
        # The sizes become the venue's when it reads the positions (they include what it
        # books); a reconciliation that stops before that moves them by its fills.
        reads = self.perp.reads
        report = await self._reconciler.reconcile(book, at, dry_run=dry_run)
        if self.perp.reads == reads:
            self._booked(report.executions)
        return report
