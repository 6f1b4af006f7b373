"""Alpaca's two stock feeds as the emulator serves them, and the data plan that decides which
an account may read.

- `sip`: every exchange's trades (the consolidated tape): every bar the recording has.
- `iex`: the Investors Exchange alone. Its bars are built from IEX's own trades, so a minute in
  which nothing traded on IEX has no bar at all ("Minute bars are based on the trades from
  IEX", Alpaca's real-time data docs, free plan), and its volume is IEX's share of the tape.
- The Free plan reads IEX in real time and SIP only 15 minutes late: a SIP request that
  reaches the last 15 minutes is refused with HTTP 403 "subscription does not permit querying
  recent SIP data" (docs.alpaca.markets/docs/market-data-faq, "Why am I getting HTTP 403";
  the body is `{"message": ...}` with no code, as users' logs of it show), and the latest
  endpoints serve it no SIP at all ("About Market Data API": "This includes the latest
  endpoints, where SIP is not available to Free users at all"). Algo Trader Plus reads both.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from trader.domain import Bar

# IEX's share of the tape, from the one day Alpaca's market data FAQ shows on both feeds
# (AAPL, 2023-09-29, daily bar): volume 923,134 on iex against 51,861,083 on sip; trades
# 12,630 against 535,134.
IEX_VOLUME_SHARE = 923_134 / 51_861_083
IEX_TRADE_SHARE = 12_630 / 535_134
# The share of a session's minutes with no IEX trade. A choice, not a measurement: a mid-cap
# with about 470 IEX trades a session (390 minutes) averages 1.2 a minute, and a Poisson count
# with that mean is 0 in e^-1.2 = 30 % of minutes. AAPL (12,630 a day: 32 a minute) has
# practically none; a thin small-cap has most minutes empty.
DEFAULT_IEX_SPARSITY = 0.3
SIP_DELAY = timedelta(minutes=15)  # the Free plan's "Historical data delay"
FEEDS = ("iex", "sip")
_LONG_BAR_MINUTES = 60  # a bar this long always had an IEX trade (0.3^60 is nothing)
_HASH_SPAN = float(2**64)


@dataclass(frozen=True)
class DataPlan:
    """The emulated account's market data subscription. `free`: Alpaca's Free plan (the
    default plan of every new account, paper or live); False: Algo Trader Plus.
    `iex_sparsity`: the share of minutes with no IEX trade (0: IEX bars are complete)."""

    free: bool = False
    iex_sparsity: float = DEFAULT_IEX_SPARSITY

    def __post_init__(self) -> None:
        if not 0 <= self.iex_sparsity < 1:
            raise ValueError(f"iex_sparsity must be in [0, 1), got {self.iex_sparsity}")

    @property
    def default_feed(self) -> str:
        """The feed a request that names none gets: the best the plan allows."""
        return "iex" if self.free else "sip"

    def refuses(self, feed: str, end: datetime | None, now: datetime) -> bool:
        """Whether a request of `feed` data up to `end` (None: up to now) is refused now."""
        if feed != "sip" or not self.free:
            return False
        return end is None or end > now - SIP_DELAY

    def no_iex_trade(self, symbol: str, minute: datetime) -> bool:
        """Whether `symbol` had no IEX trade in the minute starting at `minute`: the same
        answer for the same minute every time, whoever asks."""
        if self.iex_sparsity <= 0:
            return False
        stamp = f"{symbol}|{minute:%Y-%m-%dT%H:%M}"
        digest = hashlib.sha256(stamp.encode()).digest()
        return int.from_bytes(digest[:8], "big") / _HASH_SPAN < self.iex_sparsity

    def on_iex(self, bar: Bar) -> Bar | None:
        """The bar as IEX has it: None when no minute of it had an IEX trade, else the same
        prices with IEX's share of the volume (a share or more: the bar exists because
        something traded)."""
        minutes = int(bar.timeframe.duration / timedelta(minutes=1))
        if 0 < minutes < _LONG_BAR_MINUTES and all(
            self.no_iex_trade(bar.symbol, bar.start + timedelta(minutes=m)) for m in range(minutes)
        ):
            return None
        volume = max(1.0, round(bar.volume * IEX_VOLUME_SHARE)) if bar.volume > 0 else 0.0
        return replace(bar, volume=volume, quote_volume=None)


def trade_count(feed: str | None) -> int:
    """Trades in a bar (`n`): the emulator has no trades, so a tape's worth, IEX's share."""
    return max(1, round(100 * IEX_TRADE_SHARE)) if feed == "iex" else 100
