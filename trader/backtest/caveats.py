"""What a backtest does with data that lacks something the engine can use, said before the
figures: a file without volume (an index) is traded, and each part that would read its volume
says what it does instead, rather than read an unknown volume as "nothing traded"."""

from __future__ import annotations

from collections.abc import Mapping

from trader.config.market_settings import ExchangeSettings
from trader.market.replay import Recording

VOLUME_UNKNOWN = (
    "volume unknown ({file} has no volume column): resting limit orders fill in full when a "
    "bar trades through them (broker.max_volume_share caps a fill by the bar's volume, which "
    "this file does not give); Kronos reads its volume and amount as 0, as its reference "
    "predictor fills a file without volume; no figure of this report uses volume"
)


def volume_caveats(recordings: Mapping[str, Recording]) -> list[str]:
    """One warning per symbol whose file has no volume."""
    return [
        f"{symbol}: " + VOLUME_UNKNOWN.format(file=recording.path.name)
        for symbol, recording in recordings.items()
        if recording.report is not None and not recording.report.volume_known
    ]


def venue_notes(exchange: ExchangeSettings) -> list[str]:
    """What the venue the run trades as forbids, where it changes the strategies' orders."""
    if exchange.rests_both_sides:
        return []
    why = (
        "exchange.venue = alpaca"
        if exchange.resting_both_sides == "auto"
        else "exchange.resting_both_sides = forbidden"
    )
    return [
        f"resting both sides of a symbol is forbidden ({why}, as Alpaca's wash-trade check "
        "refuses an order opposite a resting one): maxdiff rests one side at a time"
    ]
