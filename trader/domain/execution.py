"""An order after something happened to it, with the fills that came with it: what a broker
answers, what reconciliation finds and what the ledger books."""

from __future__ import annotations

from dataclasses import dataclass

from trader.domain.fill import Fill
from trader.domain.order import Order


@dataclass(frozen=True)
class Execution:
    """An order after something happened to it, the fills that came with it, and why (for
    the ledger's order events), when there is more to say than the status."""

    order: Order
    fills: tuple[Fill, ...] = ()
    reason: str | None = None
