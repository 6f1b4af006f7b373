"""Amending an order as cancel-and-replace, the one way every venue supports.

The replacement goes out only once the old order is confirmed cancelled with nothing filled
since it was last seen. When it filled while being cancelled, the replacement (already
recorded, with its amount) is not sent at all: the position it was sized for is gone, and the
next decision plans afresh. An amend never trades more than was meant.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from trader.domain import Order, OrderStatus, Quote, exact
from trader.domain.execution import Execution


class _Sends(Protocol):
    async def submit(self, order: Order, quote: Quote, at: datetime) -> Execution: ...

    async def cancel(self, order: Order, at: datetime) -> Execution | None: ...


async def cancel_and_replace(
    broker: _Sends, order: Order, replacement: Order, quote: Quote, at: datetime
) -> list[Execution]:
    if replacement.status is not OrderStatus.PENDING:
        raise ValueError(f"replacement {replacement.client_order_id} is {replacement.status}")
    cancelled = await broker.cancel(order, at)
    executions = [cancelled] if cancelled is not None else []
    final = cancelled.order if cancelled is not None else order
    if cancelled is None or final.status not in {OrderStatus.CANCELED, OrderStatus.EXPIRED}:
        why = (
            f"not sent: {order.client_order_id} is {final.status}, not cancelled"
            if cancelled is not None
            else f"not sent: {order.client_order_id} had already ended"
        )
        return [*executions, Execution(replacement.transition(OrderStatus.CANCELED), reason=why)]
    with exact():
        late = final.filled_amount - order.filled_amount  # filled while being cancelled
    if late > 0:
        why = f"not sent: {order.client_order_id} filled {late} while being cancelled"
        return [*executions, Execution(replacement.transition(OrderStatus.CANCELED), reason=why)]
    return [*executions, await broker.submit(replacement, quote, at)]
