"""The orders the live broker has at the venue, or may have.

- Open: every order not yet ended (SUBMITTED, UNKNOWN, OPEN, PARTIALLY_FILLED), by client id;
  an order leaves when it ends.
- Looking: an order whose answer was lost (UNKNOWN), or sent when the process died
  (SUBMITTED), has a window: until the request's recvWindow (plus a second for clock skew)
  has passed since it was sent, it may still arrive, so not finding it proves nothing yet.
  A venue without a recvWindow (Alpaca: `exchange.has["recvWindow"]` is False) may process
  a request late, so no poll ever concludes: the order stays UNKNOWN, looked up by its client
  id every poll, and only a reconciliation at least `LATE_S` after it was sent may call it
  never arrived.
- Recorded: orders the ledger holds PENDING at a restart were recorded, perhaps sent, before
  the process died: the first thing done with one is to look it up, never to send it again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trader.domain import Order, OrderStatus

CLOCK_SKEW_S = 1.0  # allowance between our clock and the venue's
# Without a recvWindow: an order a venue took shows by its client id within seconds; a
# reconciliation this long after the send that still does not find it may give up on it.
LATE_S = 60.0
LIVE = frozenset(
    {OrderStatus.SUBMITTED, OrderStatus.UNKNOWN, OrderStatus.OPEN, OrderStatus.PARTIALLY_FILLED}
)
LOOKING = frozenset({OrderStatus.SUBMITTED, OrderStatus.UNKNOWN})  # sent, no answer yet


def lost_order_window_ms(exchange: object, recv_window_ms: int) -> int | None:
    """The venue's recvWindow (ms) for lost orders, None for a venue that has none."""
    has = getattr(exchange, "has", None) or {}
    return None if has.get("recvWindow") is False else recv_window_ms


class OpenOrders:
    def __init__(self, monotonic: Callable[[], float], recv_window_ms: int | None) -> None:
        """`recv_window_ms`: the venue's recvWindow; None when it has none."""
        self._monotonic = monotonic
        # None: no window; not finding the order proves nothing until reconciliation.
        self.window_s = recv_window_ms / 1000 + CLOCK_SKEW_S if recv_window_ms else None
        self._open: dict[str, Order] = {}
        self._deadline: dict[str, float] = {}  # UNKNOWN order -> when not-found is final
        self._recorded: set[str] = set()  # PENDING at a restart: maybe sent, look first

    def restore(self, orders: Sequence[Order]) -> None:
        now = self._monotonic()
        self._open = {o.client_order_id: o for o in orders if o.status in LIVE}
        self._recorded = {o.client_order_id for o in orders if o.status is OrderStatus.PENDING}
        for cid, order in self._open.items():
            if order.status in LOOKING:
                # A send from before the restart may still be in flight for a recvWindow.
                self._deadline.setdefault(cid, now + self._wait_s)
        self._deadline = {c: t for c, t in self._deadline.items() if c in self._open}

    def all(self) -> list[Order]:
        return list(self._open.values())

    def get(self, order: Order) -> Order | None:
        """The latest state of `order`, None once it has ended (or was never open here)."""
        return self._open.get(order.client_order_id)

    def by_client_id(self, client_order_id: str) -> Order | None:
        """The open order with that client id, None once it has ended (or was never ours)."""
        return self._open.get(client_order_id)

    def latest(self, order: Order) -> Order:
        """The latest state of `order`: as tracked here while open, else `order` itself."""
        return self._open.get(order.client_order_id, order)

    def track(self, order: Order) -> None:
        cid = order.client_order_id
        if order.status.is_terminal:
            self._open.pop(cid, None)
            self._deadline.pop(cid, None)
        else:
            self._open[cid] = order

    def take_recorded(self, order: Order) -> bool:
        """Whether `order` was recorded before a restart and not looked up since (it is
        looked up now: this answers True once)."""
        recorded = order.client_order_id in self._recorded
        self._recorded.discard(order.client_order_id)
        return recorded

    @property
    def _wait_s(self) -> float:
        return self.window_s if self.window_s is not None else LATE_S

    def sent_now(self, order: Order) -> None:
        """`order` left just now without an answer: its window starts."""
        self._deadline[order.client_order_id] = self._monotonic() + self._wait_s

    def window_passed(self, order: Order, *, reconciling: bool = False) -> bool:
        """Whether `order`, not found at the venue, can no longer arrive there (its window
        starts now if it had none). Without a recvWindow only a reconciliation decides."""
        deadline = self._deadline.setdefault(
            order.client_order_id, self._monotonic() + self._wait_s
        )
        if self.window_s is None and not reconciling:
            return False
        return self._monotonic() >= deadline
