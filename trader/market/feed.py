"""The market-data port: what every source of bars and quotes (an exchange, a recording) offers."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

from trader.domain import Instrument, Timeframe
from trader.market.hygiene import RawQuote, Row


class ExchangeCallFailed(Exception):
    """An exchange call that failed for good: retries used up, the exchange asked us to wait
    longer than we may, or an error retrying cannot fix. `kind` is a bounded label."""

    def __init__(self, what: str, kind: str, detail: str) -> None:
        super().__init__(f"{what}: {kind}: {detail}")
        self.what, self.kind = what, kind


class UnknownSymbols(Exception):
    """Symbols the source does not list, or lists but does not trade now (`inactive`); the
    message names each, an unknown one with a suggestion."""

    def __init__(
        self,
        source: str,
        unknown: Sequence[str],
        known: Iterable[str],
        inactive: Sequence[str] = (),
    ) -> None:
        known = list(known)
        parts = []
        for symbol in unknown:
            close = difflib.get_close_matches(symbol, known, n=1, cutoff=0.8)
            parts.append(f"{symbol} (did you mean {close[0]}?)" if close else symbol)
        said = [f"{source} does not list: {', '.join(parts)}"] if parts else []
        if inactive:
            said.append(f"{source} lists but does not trade: {', '.join(inactive)}")
        super().__init__("; ".join(said))
        self.unknown = [*unknown, *inactive]


class SymbolsRefused(Exception):
    """Symbols the source lists but the settings cannot trade as they are; the message says
    what to change."""


class MarketData(Protocol):
    """A source of bars and quotes. Rows come back as the source sent them (the forming bar
    included); `trader.market.hygiene` turns them into domain values or skip reasons."""

    name: str

    async def start(self, symbols: Sequence[str]) -> None:
        """Connect and check that every symbol exists; raise UnknownSymbols otherwise."""
        ...

    async def refresh_markets(self, symbols: Sequence[str]) -> None:
        """Reload the source's list of markets and check `symbols` again."""
        ...

    async def ohlcv(
        self, symbol: str, timeframe: Timeframe, since: datetime | None, limit: int
    ) -> list[Row]:
        """Up to `limit` bars starting at or after `since` (the latest ones when None)."""
        ...

    async def top_of_book(self, symbols: Sequence[str]) -> dict[str, RawQuote]:
        """The best bid and ask per symbol, where the source has them."""
        ...

    def instrument(self, symbol: str) -> Instrument:
        """The market's trading rules (price and amount steps, minimums)."""
        ...

    def no_trade_feed(self, symbol: str) -> str | None:
        """The feed's name when its bars of `symbol` exist only for intervals in which
        something traded (Alpaca's IEX feed of a stock), so that a bar missing in a session
        is one with no trade (`trader.market.no_trade`); None when a missing bar is a hole.
        Asked after `start`."""
        ...

    @property
    def page_limit(self) -> int:
        """The most bars one `ohlcv` call returns."""
        ...

    async def close(self) -> None: ...
