"""`trader sandbox --venue alpaca`: the Alpaca emulator served as a live venue on loopback,
for the daemon's Alpaca adapter (`exchange.venue = "alpaca"`) end to end.

Alpaca's shortest bars are a minute long, so the sandbox runs on an accelerated clock: its
time runs `timeframe / bar_seconds` times as fast as the wall clock (a minute bar a second by
default), from the wall-clock instant it starts (or `hold_s` later: until then it stands at
`start`, time for a daemon to start up), showing `start` then (default: the wall clock's
time). The daemon keeps the same clock from three settings the sandbox prints
(`exchange.clock`): each side computes it from the wall clock, so they agree without talking,
and a daemon killed and restarted finds the same time again.

Each recording becomes a crypto pair (`BTC/USD`), or a US stock when it is given its
exchange's calendar (`AAPL/USD` with XNYS): its bars are laid on that exchange's sessions,
the market is open only then (Alpaca's clock and calendar say so), and stocks trade free
while crypto pays Alpaca's fees. One account, funded with test dollars, trades them all.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from trader.clock import ScaledClock
from trader.domain import Timeframe
from trader.emulator.alpaca_fees import STOCK_FEES, crypto_fees
from trader.emulator.market import EmulatedMarket, Instrument
from trader.emulator.sandbox_replay import (
    SPAN_MARGIN,
    SandboxClock,
    SandboxSettings,
    daemon_command,
    recorded_bars,
    restamped,
)
from trader.emulator.server import EmulatorServer
from trader.emulator.sessions import Sessions
from trader.emulator.venue import Venue
from trader.market.alpaca.wire import STOCK_STEP, alpaca_timeframe
from trader.market.calendars.fx import FX
from trader.market.calendars.registry import CONTINUOUS, canonical_name

CRYPTO_FEES = crypto_fees(tier=1)  # Alpaca's first tier; stocks pay regulatory fees on sales
US_STOCKS = "XNYS"  # Alpaca's clock and calendar: the US stock market's sessions
MISFIRE_BARS = 3  # a tick later than this many bars is missed (the daemon is far behind)


@dataclass
class AlpacaSandbox:
    server: EmulatorServer
    clock: SandboxClock
    api_key: str
    api_secret: str
    symbols: list[str]
    timeframe: Timeframe
    calendars: dict[str, str]  # each stock's
    scaled: ScaledClock
    bar_seconds: float
    ends: datetime

    def daemon_settings(self) -> dict[str, str]:
        """The daemon's settings for this sandbox, in live mode: its test keys (a sandbox's
        own, nothing to protect), its clock, a settle delay and a misfire grace measured in
        the venue's time, the baseline model (no weights needed), any free metrics port and
        a ledger of its own in the current folder."""
        speed, clock = self.scaled.speed, self.scaled
        settle = min(5.0, self.bar_seconds / 5) * speed
        settings = {
            "TRADER_EXCHANGE__VENUE": "alpaca",
            "ALP_KEY_ID": self.api_key,
            "ALP_SECRET_KEY": self.api_secret,
            "TRADER_EXCHANGE__API_BASE_URL": self.server.base_url,
            "TRADER_EXCHANGE__CLOCK__SPEED": f"{speed:g}",
            "TRADER_EXCHANGE__CLOCK__WALL_ORIGIN": clock.wall_origin.isoformat(),
            "TRADER_EXCHANGE__CLOCK__ORIGIN": clock.origin.isoformat(),
            "TRADER_MARKET__SYMBOLS": ",".join(self.symbols),
            "TRADER_MARKET__TIMEFRAME": self.timeframe.text,
            "TRADER_BROKER__CURRENCY": "USD",
            "TRADER_SCHEDULE__SETTLE_DELAY_S": f"{settle:g}",
            "TRADER_SCHEDULE__MISFIRE_GRACE_S": f"{self.timeframe.seconds * MISFIRE_BARS:g}",
            "TRADER_FORECAST__MODEL": "baseline",
            "TRADER_METRICS__PORT": "0",
            "TRADER_LEDGER__PATH": "var/sandbox.sqlite3",
            "TRADER_BROKER__MODE": "live",
            "TRADER_BROKER__LIVE_CONFIRMATION": "true",
        }
        if self.calendars:
            settings["TRADER_MARKET__CALENDARS"] = json.dumps(self.calendars)
        return settings

    def instructions(self) -> str:
        url = self.server.base_url
        stocks = ", ".join(f"{s} ({c})" for s, c in self.calendars.items()) or "none"
        return "\n".join([
            f"sandbox: Alpaca emulator at {url}, replaying {', '.join(self.symbols)} as "
            f"{self.timeframe} bars, {self.scaled.speed:g} times as fast as the wall clock "
            f"(now {self.clock.now():%Y-%m-%d %H:%M} UTC there), until "
            f"{self.ends:%Y-%m-%d %H:%M} UTC; stocks: {stocks}",
            "run the daemon against it in live mode (its ledger: var/sandbox.sqlite3 here):",
            f"  {daemon_command(self.daemon_settings())}",
            f"account and orders: {url}/__emulator__/account; faults: POST "
            f"{url}/__emulator__/faults",
        ])  # fmt: skip

    def ready(self) -> dict[str, Any]:
        """What the ready file holds: the address, the test keys, the daemon's settings."""
        return {
            "venue": "alpaca",
            "base_url": self.server.base_url,
            "api_key": self.api_key,
            "api_secret": self.api_secret,
            "symbols": self.symbols,
            "timeframe": self.timeframe.text,
            "env": self.daemon_settings(),
        }


async def open_alpaca_sandbox(settings: SandboxSettings) -> AlpacaSandbox:
    """Raises ValueError for settings it cannot serve (the message says why)."""
    timeframe = Timeframe(settings.timeframe)
    alpaca_timeframe(timeframe)  # ValueError: Alpaca has no such bars
    names = {s: canonical_name(c) for s, c in settings.calendars.items()}
    unknown = set(names) - {r.symbol for r in settings.recordings}
    if unknown:
        raise ValueError(f"--calendar for a symbol without data: {', '.join(sorted(unknown))}")
    if len(set(names.values())) > 1 or {CONTINUOUS, FX} & set(names.values()):
        raise ValueError("the stocks must trade on one exchange's sessions (e.g. XNYS)")
    wall_origin = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=settings.hold_s)
    scaled = ScaledClock(timeframe.seconds / settings.bar_seconds, wall_origin, settings.start)
    clock = SandboxClock(scaled)
    now = clock.now()
    market = EmulatedMarket(clock.now)
    venue = Venue(
        market, CRYPTO_FEES, settings.liquidity_share, unique_client_ids=True,
        slippage_bps=settings.slippage_bps, market_fill_share=settings.market_fill_share,
    )  # fmt: skip
    begins, ends = now, now
    for recording in settings.recordings:
        calendar = names.get(recording.symbol, CONTINUOUS)
        bars = restamped(recorded_bars(recording), timeframe, settings.warmup, now, calendar)
        if len(bars) <= settings.warmup:
            raise ValueError(
                f"{recording.path}: {len(bars)} bars, not more than the warm-up {settings.warmup}"
            )
        instrument = _instrument(recording.symbol, stock=calendar != CONTINUOUS)
        market.add_listing(instrument, bars)
        if instrument.asset_class == "us_equity":
            venue.fees_by_symbol[instrument.venue_id] = STOCK_FEES
        begins, ends = min(begins, bars[0].start), max(ends, bars[-1].end)
    key = settings.api_key or "sandbox-" + secrets.token_hex(8)
    secret = settings.api_secret or secrets.token_hex(24)
    assets = {"USD": settings.cash} | {r.symbol.split("/")[0]: Decimal(0)
                                       for r in settings.recordings}  # fmt: skip
    venue.open_account(key, assets)
    exchange = next(iter(names.values()), US_STOCKS)
    sessions = Sessions.of(exchange, begins - SPAN_MARGIN, ends + SPAN_MARGIN)
    server = EmulatorServer(
        market, host=settings.host, port=settings.port, venue=venue, secrets={key: secret},
        on_clock=clock.pause, dialect="alpaca", sessions=sessions, data_plan=settings.data_plan,
    )  # fmt: skip
    await server.start()
    symbols = [r.symbol for r in settings.recordings]
    return AlpacaSandbox(
        server, clock, key, secret, symbols, timeframe, names, scaled, settings.bar_seconds, ends
    )


def _instrument(symbol: str, *, stock: bool) -> Instrument:
    """A crypto pair, or a fractionable US stock (Alpaca takes fractions of a share to nine
    places); a dollar at least, for either."""
    if not stock:
        return Instrument(symbol, min_notional=Decimal(1))
    return Instrument(
        symbol, step_size=STOCK_STEP, min_qty=STOCK_STEP, min_notional=Decimal(1),
        asset_class="us_equity", fractionable=True,
    )  # fmt: skip
