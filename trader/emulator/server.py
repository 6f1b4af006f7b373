"""Serve the emulator on loopback: `async with EmulatorServer(market) as server: ...`."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Literal

from aiohttp import web

from trader.emulator.alpaca import AlpacaApi
from trader.emulator.alpaca_feeds import DataPlan
from trader.emulator.binance import BinanceSpotApi, RateLimit
from trader.emulator.faults import FaultPlan
from trader.emulator.market import EmulatedMarket
from trader.emulator.sessions import Sessions
from trader.emulator.signed import SignedApi
from trader.emulator.venue import Venue


class EmulatorServer:
    def __init__(
        self,
        market: EmulatedMarket,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: FaultPlan | None = None,
        weight_limit_per_minute: int | None = None,
        klines_cap: int = 1000,
        venue: Venue | None = None,
        secrets: dict[str, str] | None = None,
        on_clock: Callable[[bool], None] | None = None,
        dialect: Literal["binance", "alpaca"] = "binance",
        sessions: Sessions | None = None,
        data_plan: DataPlan | None = None,
        account_type: Literal["margin", "cash"] = "margin",
    ) -> None:
        """`venue` and `secrets` (API key -> secret) serve the signed trading endpoints; the
        venue trades on `market`. `dialect`: whose API it speaks; Alpaca's needs the venue,
        and `sessions` when it lists stocks; `data_plan`: its market data subscription
        (default Algo Trader Plus, IEX sparse as `alpaca_feeds` says); `account_type`: an
        Alpaca paper margin account, or a cash account."""
        if venue is not None and venue.market is not market:
            raise ValueError("the venue must trade on the market the emulator serves")
        self.venue = venue
        self.api: BinanceSpotApi | AlpacaApi
        if dialect == "alpaca":
            if venue is None:
                raise ValueError("the Alpaca emulator needs a venue (its API is all accounts)")
            self.api = AlpacaApi(venue, dict(secrets or {}), faults or FaultPlan(), sessions,
                                 on_clock, data_plan or DataPlan(),
                                 account_type=account_type)  # fmt: skip
        else:
            self.api = self._binance(
                market, faults, weight_limit_per_minute, klines_cap, venue, secrets, on_clock
            )
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self.port = port

    @staticmethod
    def _binance(
        market: EmulatedMarket,
        faults: FaultPlan | None,
        weight_limit_per_minute: int | None,
        klines_cap: int,
        venue: Venue | None,
        secrets: dict[str, str] | None,
        on_clock: Callable[[bool], None] | None,
    ) -> BinanceSpotApi:
        return BinanceSpotApi(
            market,
            faults or FaultPlan(),
            RateLimit(per_minute=weight_limit_per_minute),
            klines_cap=klines_cap,
            signed=SignedApi(venue, dict(secrets or {})) if venue is not None else None,
            on_clock=on_clock,
        )

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def faults(self) -> FaultPlan:
        return self.api.faults

    @property
    def requests(self) -> list[str]:
        return self.api.requests

    async def start(self) -> None:
        self._runner = web.AppRunner(self.api.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        server = site._server  # aiohttp exposes the bound port only here
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> EmulatorServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
