"""`trader sandbox`: the emulator as a venue to trade against live, without an account.

Recorded bars are replayed on the wall clock, each compressed to `bar_seconds` of real time
(served as Binance `<n>s` klines), and shifted so that `warmup` of them have already closed
when the sandbox starts (the daemon's first window is full at once). One account, funded with
test cash, trades on the path through the signed endpoints, with the emulator's matching,
fees and faults. A daemon pointed at it (`exchange.api_base_url`, the printed test keys,
`market.timeframe = "<n>s"`) runs in live mode end to end.

`POST /__emulator__/clock {"paused": true}` freezes the market (nothing fills while paused),
for a test that compares the daemon's ledger with the account at one instant.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shlex
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from trader.domain import Bar, Timeframe
from trader.emulator.market import EmulatedMarket, Instrument
from trader.emulator.server import EmulatorServer
from trader.emulator.venue import Fees, Venue
from trader.market.hygiene import parse_row
from trader.market.replay import Recording
from trader.private_files import write_private


@dataclass
class SandboxClock:
    """The wall clock, which can be frozen."""

    wall: Callable[[], datetime] = field(default_factory=lambda: lambda: datetime.now(UTC))
    frozen: datetime | None = None

    def now(self) -> datetime:
        return self.frozen if self.frozen is not None else self.wall()

    def pause(self, paused: bool) -> None:
        self.frozen = self.now() if paused else None


def live_bars(recording: Recording, bar_seconds: int, warmup: int, now: datetime) -> list[Bar]:
    """The recording's bars, `bar_seconds` long each, the `warmup`-th opening at `now`'s bar."""
    timeframe = Timeframe(f"{bar_seconds}s")
    origin = timeframe.floor(now) - timeframe.duration * warmup
    bars = []
    for row in recording.rows:
        bar = parse_row(row, recording.symbol, recording.timeframe)
        if isinstance(bar, Bar):
            bars.append(bar)
    return [
        Bar(b.symbol, timeframe, origin + timeframe.duration * i, b.open, b.high, b.low,
            b.close, b.volume, b.quote_volume)
        for i, b in enumerate(bars)
    ]  # fmt: skip


@dataclass(frozen=True)
class SandboxSettings:
    recordings: Sequence[Recording]
    bar_seconds: int = 1
    warmup: int = 600
    host: str = "127.0.0.1"
    port: int = 0
    cash: Decimal = Decimal(10_000)
    currency: str = "USDT"
    api_key: str | None = None
    api_secret: str | None = None
    fees: Fees = field(default_factory=Fees)
    liquidity_share: Decimal = Decimal("0.1")


@dataclass
class Sandbox:
    server: EmulatorServer
    clock: SandboxClock
    api_key: str
    api_secret: str
    symbols: list[str]
    timeframe: str
    ends: datetime

    def daemon_command(self) -> str:
        """A shell command that runs the daemon against this sandbox in live mode, as printed:
        the test keys in its environment (a sandbox's own, nothing to protect), a settle delay
        shorter than a bar, the baseline model (no weights needed), any free metrics port and
        a ledger of its own in the current folder."""
        settle = min(5.0, int(self.timeframe.removesuffix("s")) / 5)
        settings = {
            "TRADER_EXCHANGE__API_KEY": self.api_key,
            "TRADER_EXCHANGE__API_SECRET": self.api_secret,
            "TRADER_EXCHANGE__API_BASE_URL": self.server.base_url,
            "TRADER_MARKET__SYMBOLS": ",".join(self.symbols),
            "TRADER_MARKET__TIMEFRAME": self.timeframe,
            "TRADER_SCHEDULE__SETTLE_DELAY_S": f"{settle:g}",
            "TRADER_FORECAST__MODEL": "baseline",
            "TRADER_METRICS__PORT": "0",
            "TRADER_LEDGER__PATH": "var/sandbox.sqlite3",
            "TRADER_BROKER__MODE": "live",
            "TRADER_BROKER__LIVE_CONFIRMATION": "true",
        }
        assignments = " ".join(f"{name}={shlex.quote(value)}" for name, value in settings.items())
        return f"{assignments} trader run"

    def instructions(self) -> str:
        url = self.server.base_url
        return "\n".join(
            [
                f"sandbox: Binance spot emulator at {url}, replaying "
                f"{', '.join(self.symbols)} as {self.timeframe} bars "
                f"until {self.ends:%H:%M:%S} UTC",
                "test keys (for this sandbox only):",
                f"  TRADER_EXCHANGE__API_KEY={self.api_key}",
                f"  TRADER_EXCHANGE__API_SECRET={self.api_secret}",
                "run the daemon against it in live mode (its ledger: var/sandbox.sqlite3 here):",
                f"  {self.daemon_command()}",
                f"account and orders: {url}/__emulator__/account; faults: POST "
                f"{url}/__emulator__/faults",
            ]
        )


async def open_sandbox(settings: SandboxSettings) -> Sandbox:
    clock = SandboxClock()
    now = clock.now()
    market = EmulatedMarket(clock.now)
    ends = now
    for recording in settings.recordings:
        bars = live_bars(recording, settings.bar_seconds, settings.warmup, now)
        if len(bars) <= settings.warmup:
            raise ValueError(
                f"{recording.path}: {len(bars)} bars, not more than the warm-up {settings.warmup}"
            )
        market.add_listing(Instrument(recording.symbol), bars)
        ends = max(ends, bars[-1].end)
    venue = Venue(market, settings.fees, settings.liquidity_share)
    key = settings.api_key or "sandbox-" + secrets.token_hex(8)
    secret = settings.api_secret or secrets.token_hex(24)
    assets = {settings.currency: settings.cash}
    assets |= {r.symbol.split("/")[0]: Decimal(0) for r in settings.recordings}
    venue.open_account(key, assets)
    server = EmulatorServer(
        market,
        host=settings.host,
        port=settings.port,
        venue=venue,
        secrets={key: secret},
        on_clock=clock.pause,
    )
    await server.start()
    return Sandbox(
        server, clock, key, secret, [r.symbol for r in settings.recordings],
        f"{settings.bar_seconds}s", ends,
    )  # fmt: skip


async def serve_sandbox(settings: SandboxSettings, ready_file: Path | None = None) -> int:
    """Serve until SIGTERM/SIGINT; the instructions go to stdout (and `ready_file`, as JSON)."""
    try:
        sandbox = await open_sandbox(settings)
    except ValueError as error:
        sys.stderr.write(f"trader sandbox: {error}\n")
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        sys.stdout.write(sandbox.instructions() + "\n")
        sys.stdout.flush()
        if ready_file is not None:
            ready = {
                "base_url": sandbox.server.base_url,
                "api_key": sandbox.api_key,
                "api_secret": sandbox.api_secret,
                "symbols": sandbox.symbols,
                "timeframe": sandbox.timeframe,
            }
            # Written whole under another name first: a reader never sees half of it.
            part = ready_file.with_name(ready_file.name + ".part")
            await asyncio.to_thread(write_private, part, json.dumps(ready))  # test keys: 0600
            await asyncio.to_thread(part.replace, ready_file)
        await stop.wait()
    finally:
        await sandbox.server.stop()
    return 0
