"""The broker port: paper and live brokers answer the same calls with the same results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from trader.domain import Bar, Fill, Order, Quote


@dataclass(frozen=True)
class Execution:
    """An order after something happened to it, and the fills that came with it."""

    order: Order
    fills: tuple[Fill, ...] = ()


class Broker(Protocol):
    # True when orders leave this process (a live exchange): the engine then records each
    # order durably before sending it, so a crash can never leave one unaccounted for.
    external: bool

    def restore(self, orders: Sequence[Order], fill_counts: Mapping[str, int]) -> None:
        """Forget any state and take the ledger's open orders (at start, after a rollback)."""
        ...

    async def submit(self, order: Order, quote: Quote, at: datetime) -> Execution:
        """Send a PENDING order; it comes back open, filled or rejected."""
        ...

    async def cancel(self, order: Order, at: datetime) -> Execution | None:
        """The order cancelled, or None when it had already ended (filled, expired)."""
        ...

    async def on_market(
        self, bars: Sequence[Bar], quotes: Mapping[str, Quote], at: datetime
    ) -> list[Execution]:
        """What happened to resting orders since the last call: fills and expiries."""
        ...

    def open_orders(self) -> list[Order]: ...
