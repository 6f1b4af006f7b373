"""The dashboard's panels on the bars themselves (issues 22 and 40): bars the calendar expected
that the venue never had, how many bars in a row each symbol's window holds, and the no-trade
bars a sparse feed (Alpaca's IEX) leaves to be filled in."""

from __future__ import annotations

from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as dm
from panel_kit import AMBER, SYMBOLS, per_hour, query, sel, timeseries


def bar_panels() -> list[Builder[dm.Panel]]:
    return [
        timeseries(
            "Missing bars",
            "Bars per hour that a symbol's calendar expected and the venue never had (asked "
            "twice): the window closes the hole up; with market.gap_policy = skip the symbol "
            "waits for market.min_contiguous_bars bars in a row.",
            query(per_hour("trader_bars_missing_total", SYMBOLS, by="symbol"), "{{symbol}}"),
            bars=True,
            thresholds=[(1, AMBER)],
        ).span(8),
        timeseries(
            "Contiguous bars in the window",
            "The newest bars of each symbol's window in a row with nothing missing between "
            "them; after a hole it restarts from 0 (gap_policy = skip trades again at "
            "market.min_contiguous_bars, 16 by default).",
            query(
                f"max by (symbol) ({sel('trader_window_contiguous_bars', SYMBOLS)})", "{{symbol}}"
            ),
        )
        .min(0)
        .span(8),
        timeseries(
            "No-trade bars (sparse feed)",
            "Bars per hour a sparse feed (Alpaca's IEX) had none of because nothing traded, "
            "made with the last close and volume 0, by symbol and feed. Only symbols on such a "
            "feed have a series; many of them: consider the SIP feed.",
            query(
                per_hour("trader_feed_no_trade_bars_total", SYMBOLS, by="symbol, feed"),
                "{{symbol}} {{feed}}",
            ),
            bars=True,
        ).span(8),
    ]
