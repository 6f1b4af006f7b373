"""The broker port: paper and live brokers answer the same calls with the same results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from trader.domain import Bar, Order, Quote
from trader.domain.execution import Execution
from trader.domain.reconciliation import LedgerBook, ReconcileReport


class BrokerHalt(Exception):
    """The venue refuses our credentials: trading must stop until a person fixes them."""


class Broker(Protocol):
    # True when orders leave this process (a live exchange): the engine then records each
    # order durably before sending it, so a crash can never leave one unaccounted for.
    external: bool
    name: str  # "paper", "binance", ... for reports and logs

    def restore(self, orders: Sequence[Order], fill_counts: Mapping[str, int]) -> None:
        """Forget any state and take the ledger's open orders (at start, after a rollback)."""
        ...

    async def submit(self, order: Order, quote: Quote, at: datetime) -> Execution:
        """Send a PENDING order; it comes back open, filled or rejected (UNKNOWN for a live
        send whose answer was lost and could not be looked up yet)."""
        ...

    async def cancel(self, order: Order, at: datetime) -> Execution | None:
        """The order cancelled, or what ended it first (filled, with the fills); None when
        it had already ended and nothing is new."""
        ...

    async def replace(
        self, order: Order, replacement: Order, quote: Quote, at: datetime
    ) -> list[Execution]:
        """Amend as cancel-and-replace: cancel `order`, then send `replacement` (PENDING) only
        if `order` ended cancelled with nothing filled meanwhile (else it is not sent)."""
        ...

    async def on_market(
        self, bars: Sequence[Bar], quotes: Mapping[str, Quote], at: datetime
    ) -> list[Execution]:
        """What happened to resting orders since the last call: fills and expiries."""
        ...

    async def reconcile(
        self, book: LedgerBook, at: datetime, *, dry_run: bool = False
    ) -> ReconcileReport:
        """The broker's account against the ledger's; changes the ledger has not booked come
        back as executions for the engine to book. `dry_run` changes nothing at the venue."""
        ...

    def open_orders(self) -> list[Order]: ...

    def close(self) -> None:
        """Let go of what the broker holds (its instance locks); the daemon is stopping."""
        ...
