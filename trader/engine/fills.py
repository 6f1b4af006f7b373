"""The tick's fills stage: the orders resting with the broker meet the bars that closed since the
last tick (and the real quotes). Each symbol's cursor remembers the last bar its fills were
booked with, so no bar fills an order twice, also when a tick is re-run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from trader.broker.protocol import Broker
from trader.domain import Bar
from trader.engine.account import Account
from trader.engine.report import TickReport
from trader.market.step import MarketDataStep, TickData


@dataclass(frozen=True)
class RestingFills:
    market: MarketDataStep
    broker: Broker
    account: Account

    async def run(self, data: TickData, at: datetime, report: TickReport) -> None:
        """Resting orders meet the bars that closed since the last tick (and real quotes)."""
        account = self.account
        fresh: list[Bar] = []
        cursor: dict[str, datetime] = {}
        for symbol, window in self.market.windows.items():
            last = account.cursor.get(symbol)
            # With no cursor yet nothing rests on this symbol: only the newest bar matters.
            new = window.since(last) if last is not None else window.since(None)[-1:]
            if new:
                fresh += new
                cursor[symbol] = new[-1].start
        quotes = {s: d.quote for s, d in data.ready.items()}
        account.book(await self.broker.on_market(fresh, quotes, at), report)
        account.cursor_moves.update(cursor)
