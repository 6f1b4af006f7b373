"""An emulated exchange listing recorded SOL/USDT bars (and a scaled copy as BTC/USDT) on a
simulated clock, for tests that drive the real ccxt client against it."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from tests.integration.conftest import clean_env
from tests.recorded import SOLUSDT_1H
from trader.clock import SimulatedClock
from trader.config.market_settings import ExchangeSettings
from trader.domain import Bar, Timeframe
from trader.emulator import EmulatedMarket, Instrument
from trader.market.ccxt_feed import CcxtMarketData, create_exchange
from trader.market.hygiene import parse_row
from trader.market.replay import read_recording
from trader.market.retry import RetryPolicy

FAST_RETRY = RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=2.0)


def recorded_bars(count: int) -> list[Bar]:
    """The first `count` recorded SOL/USDT hours."""
    recording = read_recording(SOLUSDT_1H)
    if count > len(recording.rows):
        raise ValueError(f"{SOLUSDT_1H.name} holds {len(recording.rows)} bars, not {count}")
    bars = [parse_row(row, "SOL/USDT", recording.timeframe) for row in recording.rows[:count]]
    return [b for b in bars if isinstance(b, Bar)]


def scaled(bars: list[Bar], symbol: str, factor: float) -> list[Bar]:
    return [
        Bar(symbol, b.timeframe, b.start, b.open * factor, b.high * factor, b.low * factor,
            b.close * factor, b.volume)
        for b in bars
    ]  # fmt: skip


@dataclass
class Venue:
    clock: SimulatedClock
    market: EmulatedMarket
    bars: dict[str, list[Bar]]

    def at_bar(self, index: int, seconds: float = 5) -> None:
        """Move the clock to `seconds` after bar `index` opened (bar index-1 just closed)."""
        self.clock.advance_to(self.bars["SOL/USDT"][index].start + timedelta(seconds=seconds))


def venue(count: int = 1200, start_index: int = 600, extra: int = 0) -> Venue:
    sol = recorded_bars(count)
    bars = {"SOL/USDT": sol, "BTC/USDT": scaled(sol, "BTC/USDT", 10_000)}
    for n in range(extra):
        bars[f"C{n}/USDT"] = scaled(sol, f"C{n}/USDT", 1 + n)
    clock = SimulatedClock(sol[start_index].start + timedelta(seconds=5))
    market = EmulatedMarket(clock.now)
    for symbol, series in bars.items():
        market.add_listing(Instrument(symbol), series)
    return Venue(clock, market, bars)


def ccxt_feed(
    base_url: str, clock: SimulatedClock, errors: list[str] | None = None, timeout_s: float = 2.0
) -> CcxtMarketData:
    exchange = create_exchange(ExchangeSettings(api_base_url=base_url, timeout_s=timeout_s))
    sink = errors if errors is not None else []
    return CcxtMarketData(exchange, clock, retry=FAST_RETRY, on_error=sink.append)


# --- one-second bars on the wall clock, for a daemon running live against the emulator ---

SECOND = Timeframe("1s")


def walk(symbol: str, start: datetime, n: int, price: float, seed: int) -> list[Bar]:
    rng = random.Random(seed)  # noqa: S311 - prices for a test
    bars = []
    for i in range(n):
        change = price * rng.uniform(-0.002, 0.002)
        close = price + change
        high, low = max(price, close) * 1.0005, min(price, close) * 0.9995
        bars.append(Bar(symbol, SECOND, start + timedelta(seconds=i), price, high, low, close, 5.0))
        price = close
    return bars


def live_env(base_url: str, ledger: Path, **extra: str) -> dict[str, str]:
    """The paper daemon on the emulator: one-second bars, the baseline, a small window."""
    return clean_env(
        TRADER_EXCHANGE__API_BASE_URL=base_url,
        TRADER_LEDGER__PATH=str(ledger),
        TRADER_METRICS__PORT="0",
        TRADER_FORECAST__MODEL="baseline",
        TRADER_FORECAST__BASELINE_LOOKBACK="16",
        TRADER_MARKET__CONTEXT_BARS="32",
        TRADER_MARKET__TIMEFRAME="1s",
        TRADER_SCHEDULE__SETTLE_DELAY_S="0.3",
        **extra,
    )
