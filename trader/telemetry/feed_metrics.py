"""The metrics of what the market data feed is like, apart from what is wrong with it
(`metrics.Metrics` counts skips and missing bars)."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter


class FeedMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._no_trade_seen: dict[str, int] = {}
        self.no_trade_bars = Counter(
            "trader_feed_no_trade_bars_total",
            "Bars a sparse feed (Alpaca's IEX) had none of, nothing having traded: made with "
            "the last close and volume 0", ["symbol", "feed"], registry=registry,
        )  # fmt: skip

    def observe_no_trade(self, counts: Mapping[str, int], feeds: Mapping[str, str]) -> None:
        """The data step's running count of no-trade bars of each symbol on a sparse feed
        (`feeds`: symbol -> feed; each such symbol shows, at 0 until its first)."""
        for symbol, feed in feeds.items():
            total, counted = counts.get(symbol, 0), self._no_trade_seen.get(symbol, 0)
            self.no_trade_bars.labels(symbol, feed).inc(max(0, total - counted))
            self._no_trade_seen[symbol] = max(total, counted)
