"""`trader sandbox`: the emulator as a venue to trade against live, without an account.

Binance here (`trader.emulator.alpaca_sandbox` serves Alpaca, `trader.emulator.perp_sandbox`
Binance USDⓈ-M and Aster perps). Recorded bars are replayed on
the wall clock, each compressed to `bar_seconds` of real time (served as Binance `<n>s`
klines), and shifted so that `warmup` of them have already closed when the sandbox starts
(the daemon's first window is full at once). One account, funded with test cash, trades on
the path through the signed endpoints, with the emulator's matching, fees and faults. A
daemon pointed at it (`exchange.api_base_url`, the printed test keys,
`market.timeframe = "<n>s"`) runs in live mode end to end.

`POST /__emulator__/clock {"paused": true}` freezes the market (nothing fills while paused),
for a test that compares the daemon's ledger with the account at one instant.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import sys
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from trader.domain import Timeframe
from trader.emulator.alpaca_sandbox import open_alpaca_sandbox
from trader.emulator.market import EmulatedMarket, Instrument
from trader.emulator.sandbox_replay import (
    SandboxAccess,
    SandboxClock,
    SandboxSettings,
    recorded_bars,
    restamped,
)
from trader.emulator.server import EmulatorServer
from trader.emulator.venue import Venue
from trader.private_files import write_private

__all__ = ["Sandbox", "SandboxSettings", "open_sandbox", "serve_sandbox"]


@dataclass
class Sandbox:
    server: EmulatorServer
    clock: SandboxClock
    api_key: str
    api_secret: str
    symbols: list[str]
    timeframe: str
    ends: datetime

    @property
    def access(self) -> SandboxAccess:
        return SandboxAccess(
            "binance", self.server.base_url, self.api_key, self.api_secret, self.symbols,
            self.timeframe,
        )  # fmt: skip

    def daemon_settings(self) -> dict[str, str]:
        return self.access.daemon_settings()

    def ready(self) -> dict[str, Any]:
        return self.access.ready()

    def instructions(self) -> str:
        url = self.server.base_url
        return "\n".join(
            [
                f"sandbox: Binance spot emulator at {url}, replaying "
                f"{', '.join(self.symbols)} as {self.timeframe} bars "
                f"until {self.ends:%H:%M:%S} UTC",
                *self.access.how_to_trade(),
                f"account and orders: {url}/__emulator__/account; faults: POST "
                f"{url}/__emulator__/faults",
            ]
        )


async def open_sandbox(settings: SandboxSettings) -> Sandbox:
    """Raises ValueError for settings it cannot serve (the message says why)."""
    if settings.bar_seconds != int(settings.bar_seconds):
        raise ValueError("Binance's shortest bars are a second long: --bar-seconds 1 or more")
    timeframe = Timeframe(f"{int(settings.bar_seconds)}s")
    clock = SandboxClock()
    now = clock.now()
    market = EmulatedMarket(clock.now)
    ends = now
    for recording in settings.recordings:
        bars = restamped(recorded_bars(recording), timeframe, settings.warmup, now)
        if len(bars) <= settings.warmup:
            raise ValueError(
                f"{recording.path}: {len(bars)} bars, not more than the warm-up {settings.warmup}"
            )
        market.add_listing(Instrument(recording.symbol), bars)
        ends = max(ends, bars[-1].end)
    venue = Venue(
        market,
        settings.fees,
        settings.liquidity_share,
        slippage_bps=settings.slippage_bps,
        market_fill_share=settings.market_fill_share,
    )
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
        server, clock, key, secret, [r.symbol for r in settings.recordings], timeframe.text, ends
    )


async def serve_sandbox(settings: SandboxSettings, ready_file: Path | None = None) -> int:
    """Serve until SIGTERM/SIGINT; the instructions go to stdout (and `ready_file`, as JSON)."""
    try:
        if settings.venue in ("binanceusdm", "aster"):
            from trader.emulator.perp_sandbox import open_perp_sandbox  # noqa: PLC0415

            sandbox: Any = await open_perp_sandbox(settings)
        else:
            opened = open_alpaca_sandbox if settings.venue == "alpaca" else open_sandbox
            sandbox = await opened(settings)
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
            # Written whole (under another name, then renamed): a reader never sees half of it.
            await asyncio.to_thread(write_private, ready_file, json.dumps(sandbox.ready()))
        await stop.wait()
    finally:
        await sandbox.server.stop()
    return 0
