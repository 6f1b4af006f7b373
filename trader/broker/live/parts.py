"""What placing, cancelling and polling orders all work with: the venue client, the open
orders, fill booking and the resolver of lost answers (one of each per broker)."""

from __future__ import annotations

from dataclasses import dataclass

from trader.broker.live.book import OpenOrders
from trader.broker.live.fills import FillBooking
from trader.broker.live.unknown import OutcomeResolver
from trader.broker.live.venue import VenueClient


@dataclass(frozen=True)
class OrderParts:
    """The fields placing, cancelling and polling each take (they extend it)."""

    client: VenueClient
    orders: OpenOrders
    booking: FillBooking
    resolver: OutcomeResolver
