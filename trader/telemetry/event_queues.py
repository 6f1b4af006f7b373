"""The MQTT link's outgoing events in two bounded queues: trading events (orders, fills, P&L,
decisions, status) and the rest (forecasts, scores, heartbeats, command answers). Each drops its
own oldest event when full, so a flood of command answers cannot push an order or a fill out;
events leave oldest first across both, so their order on the broker is the order they
happened in."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator

from trader.telemetry.events import Event
from trader.telemetry.labels import EVENT_QUEUES

TRADING_TOPICS = frozenset({"order", "fill", "pnl", "decision", "status"})


def queue_of(event: Event) -> str:
    return "trading" if event.topic in TRADING_TOPICS else "other"


class EventQueues:
    def __init__(self, size: int, on_dropped: Callable[[str, int], None]) -> None:
        self.size = size  # each queue's
        self._on_dropped = on_dropped
        self._queues: dict[str, deque[tuple[int, Event]]] = {name: deque() for name in EVENT_QUEUES}
        self._numbers = itertools.count()

    def put(self, event: Event) -> None:
        name = queue_of(event)
        queue = self._queues[name]
        if len(queue) >= self.size:
            queue.popleft()
            self._on_dropped(name, 1)
        queue.append((next(self._numbers), event))

    def oldest(self) -> Event | None:
        heads = [queue[0] for queue in self._queues.values() if queue]
        return min(heads, key=lambda head: head[0])[1] if heads else None

    def remove(self, event: Event) -> None:
        """Takes `event` off once sent, if it is still at the head of its queue (a full queue
        may have dropped it meanwhile)."""
        queue = self._queues[queue_of(event)]
        if queue and queue[0][1] is event:
            queue.popleft()

    def __len__(self) -> int:
        return sum(len(queue) for queue in self._queues.values())

    def __iter__(self) -> Iterator[Event]:
        """What is queued, oldest first."""
        queued = sorted(itertools.chain.from_iterable(self._queues.values()), key=lambda e: e[0])
        return (event for _, event in queued)

    def drop_all(self) -> None:
        """Everything queued, counted as dropped (the link is closing)."""
        for name, queue in self._queues.items():
            if queue:
                self._on_dropped(name, len(queue))
                queue.clear()
