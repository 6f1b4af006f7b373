"""What every `trader sandbox` venue shares: its settings, its clock (the wall clock or an
accelerated one, which can be frozen), and recorded bars laid anew around that clock's now:
on every bar start of a continuous market, or on the sessions of a stock's exchange."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from trader.clock import Clock, WallClock
from trader.domain import Bar, Timeframe, from_epoch_ms, to_epoch_ms
from trader.emulator.alpaca_feeds import DataPlan
from trader.emulator.venue import Fees
from trader.market.calendars.registry import CONTINUOUS, build_calendar
from trader.market.hygiene import parse_row
from trader.market.replay import Recording

SPAN_MARGIN = timedelta(days=60)  # calendars reach this far past the bars (and past now)


@dataclass
class SandboxClock:
    """The venue's clock (`base`: the wall clock, or a sandbox's accelerated one), which can
    be frozen."""

    base: Clock = field(default_factory=WallClock)
    frozen: datetime | None = None

    def now(self) -> datetime:
        return self.frozen if self.frozen is not None else self.base.now()

    def pause(self, paused: bool) -> None:
        self.frozen = self.now() if paused else None


@dataclass(frozen=True)
class SandboxSettings:
    recordings: Sequence[Recording]
    bar_seconds: float = 1  # real seconds per recorded bar
    warmup: int = 600
    host: str = "127.0.0.1"
    port: int = 0
    cash: Decimal = Decimal(10_000)
    currency: str = "USDT"
    api_key: str | None = None
    api_secret: str | None = None
    fees: Fees = field(default_factory=Fees)
    liquidity_share: Decimal = Decimal("0.1")
    slippage_bps: Decimal = Decimal(0)  # takers fill this far beyond the quoted touch
    market_fill_share: Decimal = Decimal(1)  # a market order fills this share, the rest expires
    venue: Literal["binance", "alpaca", "binanceusdm", "aster"] = "binance"
    # Alpaca's: its bar length, the venue's time at the start (None: the wall clock's), how
    # long its clock stands there first, and each stock's exchange calendar (a symbol
    # without one is a crypto pair).
    timeframe: str = "1m"
    start: datetime | None = None
    hold_s: float = 0
    calendars: Mapping[str, str] = field(default_factory=dict)
    data_plan: DataPlan = field(default_factory=DataPlan)  # its market data subscription


def recorded_bars(recording: Recording) -> list[Bar]:
    """The recording's valid bars, in order."""
    bars = []
    for row in recording.rows:
        bar = parse_row(row, recording.symbol, recording.timeframe)
        if isinstance(bar, Bar):
            bars.append(bar)
    return bars


def restamped(
    bars: Sequence[Bar],
    timeframe: Timeframe,
    warmup: int,
    now: datetime,
    calendar: str = CONTINUOUS,
) -> list[Bar]:
    """`bars`, in order, `timeframe` long each, on the bar starts `calendar` expects (every
    one for a continuous market, the sessions' for an exchange's), `warmup` of them closed by
    `now` and the next one forming then. Raises ValueError when the calendar has fewer than
    `warmup` bars before now."""
    if not bars:
        return []
    # Sessions cover at least a fifth of the week's time (a week of 1m bars holds 1,950 of
    # 10,080 minutes), so seven bar lengths per bar reach far enough; a continuous market
    # has one bar per bar length.
    reach = timeframe.duration * (1 if calendar == CONTINUOUS else 7)
    begin, end = now - reach * warmup, now + reach * len(bars)
    built = build_calendar(
        calendar, to_epoch_ms(begin - SPAN_MARGIN), to_epoch_ms(end + SPAN_MARGIN)
    )
    try:
        first = built.bar_start_before(timeframe, to_epoch_ms(now), warmup)
        starts = built.bar_starts(timeframe, first, to_epoch_ms(end))
    except ValueError as error:  # CalendarRangeError: before the first session known
        raise ValueError(f"{calendar}: {error}") from None
    return [
        Bar(b.symbol, timeframe, from_epoch_ms(int(start)), b.open, b.high, b.low, b.close,
            b.volume, b.quote_volume)
        for b, start in zip(bars, starts, strict=False)
    ]  # fmt: skip


def daemon_command(settings: Mapping[str, str]) -> str:
    """A shell command that runs the daemon with `settings` in its environment, as printed."""
    assignments = " ".join(f"{name}={shlex.quote(value)}" for name, value in settings.items())
    return f"{assignments} trader run"


@dataclass(frozen=True)
class SandboxAccess:
    """What a daemon needs to trade on a ccxt sandbox (Binance spot, USDⓈ-M, Aster): the
    address, its test keys (a sandbox's own, nothing to protect), the symbols and the bars'
    timeframe, and the venue's own settings (`extra`)."""

    venue: str
    base_url: str
    api_key: str
    api_secret: str
    symbols: Sequence[str]
    timeframe: str
    extra: Mapping[str, str] = field(default_factory=dict)

    def daemon_settings(self) -> dict[str, str]:
        """The daemon's settings, in live mode: a settle delay shorter than a bar, the baseline
        model (no weights needed), any free metrics port and a ledger of its own in the
        current folder."""
        settle = min(5.0, Timeframe(self.timeframe).seconds / 5)
        return {
            **self.extra,
            "TRADER_EXCHANGE__API_KEY": self.api_key,
            "TRADER_EXCHANGE__API_SECRET": self.api_secret,
            "TRADER_EXCHANGE__API_BASE_URL": self.base_url,
            "TRADER_MARKET__SYMBOLS": ",".join(self.symbols),
            "TRADER_MARKET__TIMEFRAME": self.timeframe,
            "TRADER_SCHEDULE__SETTLE_DELAY_S": f"{settle:g}",
            "TRADER_FORECAST__MODEL": "baseline",
            "TRADER_METRICS__PORT": "0",
            "TRADER_LEDGER__PATH": "var/sandbox.sqlite3",
            "TRADER_BROKER__MODE": "live",
            "TRADER_BROKER__LIVE_CONFIRMATION": "true",
        }

    def ready(self) -> dict[str, Any]:
        """What the ready file holds: the address, the test keys, the daemon's settings."""
        return {
            "venue": self.venue, "base_url": self.base_url, "api_key": self.api_key,
            "api_secret": self.api_secret, "symbols": list(self.symbols),
            "timeframe": self.timeframe, "env": self.daemon_settings(),
        }  # fmt: skip

    def how_to_trade(self) -> list[str]:
        """The instructions' lines with the test keys and the daemon's command."""
        return [
            "test keys (for this sandbox only):",
            f"  TRADER_EXCHANGE__API_KEY={self.api_key}",
            f"  TRADER_EXCHANGE__API_SECRET={self.api_secret}",
            "run the daemon against it in live mode (its ledger: var/sandbox.sqlite3 here):",
            f"  {daemon_command(self.daemon_settings())}",
        ]
