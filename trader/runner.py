"""Wiring: the parts of the engine built from the settings, and the replay runner that drives
it over recorded bars on a simulated clock. A replay resumes from the ledger's last tick, so a
run that was killed carries on where it stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import torch

from trader.broker.paper import PaperBroker
from trader.clock import Clock, SimulatedClock
from trader.config.schema import Settings
from trader.domain import Instrument, Timeframe, from_epoch_ms
from trader.engine.pipeline import Engine, EngineHooks
from trader.forecast.build import ModelUnavailable, build_forecaster
from trader.forecast.device import DeviceChoice, DeviceUnavailable, choose_device
from trader.forecast.protocol import Forecaster
from trader.ledger.bars import BarStore
from trader.ledger.database import Database
from trader.ledger.trading import TradingLedger
from trader.logging import get_logger
from trader.market.feed import MarketData
from trader.market.quotes import FixedSpread, HighLowSpread, SpreadModel
from trader.market.replay import Recording, ReplayMarketData
from trader.market.step import MarketDataStep
from trader.risk.engine import RiskEngine
from trader.risk.state import TradingState, TradingStatus
from trader.strategy.select import strategies_for


def forecasters_for(settings: Settings) -> list[Forecaster]:
    """The primary forecaster and, with the consensus gate on, the second model; the device
    decision is logged once, a fallback to the CPU as a warning."""
    names = [settings.forecast.model]
    if settings.strategy.consensus and settings.strategy.consensus_model not in names:
        names.append(settings.strategy.consensus_model)
    if names == ["baseline"]:
        device = DeviceChoice(torch.device("cpu"), "float32", "the baseline runs on the CPU")
    else:
        try:
            device = choose_device(settings.forecast.device, settings.forecast.precision)
        except DeviceUnavailable as error:
            raise ModelUnavailable(str(error)) from error
        log = get_logger("trader.forecast")
        if device.fallback:
            log.warning("models run on the CPU", **device.describe())
        else:
            log.info("model device", **device.describe())
    return [build_forecaster(name, settings.forecast, device) for name in names]


def spread_model(settings: Settings) -> SpreadModel:
    bps = settings.market.replay_spread_bps
    return HighLowSpread(bps) if settings.market.replay_spread == "high_low" else FixedSpread(bps)


async def build_engine(
    settings: Settings,
    feed: MarketData,
    database: Database,
    now: datetime,
    *,
    forecasters: Sequence[Forecaster] | None = None,
    hooks: EngineHooks | None = None,
) -> Engine:
    """Every part of the engine, recovered from the ledger at `database`."""
    market = MarketDataStep(
        feed, settings.market, store=BarStore(database, keep=settings.market.context_bars * 2)
    )
    await market.start(now)
    instruments = {s: feed.instrument(s) for s in settings.market.symbols}
    ledger = TradingLedger(database)
    state = await ledger.open(settings.broker.currency, settings.broker.starting_cash)
    risk = RiskEngine(
        settings.risk,
        maker_fee_bps=float(settings.broker.maker_fee_bps),
        taker_fee_bps=float(settings.broker.taker_fee_bps),
        max_quote_age=timedelta(seconds=settings.market.max_quote_age_s),
        status=state.status or TradingStatus(TradingState.ACTIVE, "started", now),
        day=state.day,
    )
    return Engine(
        settings=settings,
        market=market,
        forecasters=forecasters if forecasters is not None else forecasters_for(settings),
        strategies=strategies_for(settings.strategy, settings.market.symbols),
        risk=risk,
        broker=PaperBroker(settings.broker, instruments),
        ledger=ledger,
        instruments=instruments,
        state=state,
        hooks=hooks,
    )


@dataclass(frozen=True)
class ReplaySummary:
    ticks: int
    first: datetime | None
    last: datetime | None
    resumed_after: datetime | None
    equity: Decimal


def tick_times(recordings: Mapping[str, Recording], context: int) -> list[datetime]:
    """Bar close times once every symbol could have a full window: the replay's ticks."""
    ends: set[int] = set()
    first_full = []
    for recording in recordings.values():
        step = recording.timeframe.seconds * 1000
        starts = recording.starts
        ends.update(start + step for start in starts)
        if len(starts) > context:
            first_full.append(starts[context])
    begin = max(first_full) if first_full else None
    return [from_epoch_ms(end) for end in sorted(ends) if begin is not None and end >= begin]


def replay_settings(settings: Settings, recordings: Mapping[str, Recording]) -> Settings:
    """The settings with the recordings' symbols and timeframe."""
    timeframes = {r.timeframe for r in recordings.values()}
    if len(timeframes) != 1:
        raise ValueError(f"replay files have different timeframes: {sorted(map(str, timeframes))}")
    (timeframe,) = timeframes
    market = settings.market.model_copy(
        update={"symbols": list(recordings), "timeframe": Timeframe(timeframe.text).text}
    )
    return settings.model_copy(update={"market": market})


async def run_replay(
    settings: Settings,
    recordings: Mapping[str, Recording],
    *,
    speed: float | None = None,
    max_ticks: int | None = None,
    stop: asyncio.Event | None = None,
    forecasters: Sequence[Forecaster] | None = None,
    hooks: EngineHooks | None = None,
) -> ReplaySummary:
    """Drive the engine over `recordings`, resuming after the ledger's last completed tick."""
    log = get_logger("trader.replay")
    settings = replay_settings(settings, recordings)
    database = await Database.open(settings.ledger.path)
    try:
        last = (
            (await TradingLedger(database).last_tick()) if settings.ledger.path.exists() else None
        )
        times = [
            t
            for t in tick_times(recordings, settings.market.context_bars)
            if last is None or t > last
        ]
        if not times:
            return ReplaySummary(0, None, None, last, Decimal(0))
        clock: Clock = SimulatedClock(times[0], speed)
        rules = Instrument(
            next(iter(recordings)), settings.market.replay_price_step,
            settings.market.replay_amount_step, Decimal(0), settings.market.replay_min_notional,
        )  # fmt: skip
        feed = ReplayMarketData(recordings, clock, spread_model(settings), rules)
        engine = await build_engine(
            settings, feed, database, times[0], forecasters=forecasters, hooks=hooks
        )
        log.info(
            "replay",
            ticks=len(times),
            first=times[0].isoformat(),
            resumed_after=last and last.isoformat(),
        )
        done = 0
        report = None
        try:
            for at in times[: max_ticks if max_ticks is not None else len(times)]:
                if stop is not None and stop.is_set():
                    break
                await clock.sleep_until(at)
                report = await engine.tick(at)
                done += 1
        finally:
            engine.close()
        equity = report.equity if report is not None else Decimal(0)
        return ReplaySummary(done, times[0], times[done - 1] if done else None, last, equity)
    finally:
        await database.close()
