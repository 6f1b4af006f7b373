"""Wiring: the parts of the engine built from the settings, and the replay runner that drives
it over recorded bars on a simulated clock. A replay resumes from the ledger's last tick, so a
run that was killed carries on where it stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from trader.broker.factory import build_broker
from trader.clock import Clock, SimulatedClock
from trader.config.schema import Settings
from trader.daemon.ticks import BarCloseTicks, RecordedTicks, TickLoop, TickTimes
from trader.domain import Instrument, Timeframe, account_currency, from_epoch_ms
from trader.domain.capital_ramp import LiveCapital
from trader.engine.perps import PerpTapeLike, perp_book
from trader.engine.pipeline import Engine
from trader.engine.planning import Planner
from trader.engine.report import EngineHooks, TickReport
from trader.forecast.build import ModelUnavailable, build_forecaster
from trader.forecast.device_choice import DeviceChoice
from trader.forecast.protocol import Forecaster
from trader.ledger.bars import BarStore
from trader.ledger.database import Database
from trader.ledger.trading import TradingLedger
from trader.ledger.write_failure import LedgerWriteFailed
from trader.logging import get_logger
from trader.market.calendars.calendar import TradingCalendar
from trader.market.calendars.per_symbol import SymbolCalendars
from trader.market.feed import MarketData
from trader.market.live_perp_tape import live_perp_tapes
from trader.market.live_source import calendar_names, exchange_feed, venue_clock
from trader.market.quotes import FixedSpread, HighLowSpread, SpreadModel
from trader.market.replay import Recording, ReplayMarketData
from trader.market.replay_calendars import ReplayCalendars, replay_calendars
from trader.market.replay_perp import PerpRecordings, perp_recordings
from trader.market.step import MarketDataStep
from trader.risk.engine import HaltPolicy, RiskEngine
from trader.risk.state import TradingState, TradingStatus
from trader.strategy.select import strategies_for
from trader.strategy.shorts import account_short_refusal


def model_names(settings: Settings) -> list[str]:
    """The primary model and, with the consensus gate on, the second one."""
    names: list[str] = [settings.forecast.model]
    if settings.strategy.consensus and settings.strategy.consensus_model not in names:
        names.append(settings.strategy.consensus_model)
    return names


def model_device(settings: Settings) -> DeviceChoice:
    """Where the models run, logged once (a fallback to the CPU as a warning). Raises
    DeviceUnavailable with the reason and the fix."""
    if model_names(settings) == ["baseline"]:  # torch is never loaded for it
        return DeviceChoice("cpu", "float32", "the baseline runs on the CPU")
    # torch loads only where a model or its device needs it
    from trader.forecast.device import choose_device  # noqa: PLC0415

    device = choose_device(settings.forecast.device, settings.forecast.precision)
    log = get_logger("trader.forecast")
    if device.fallback:
        log.warning("models run on the CPU", **device.describe())
    else:
        log.info("model device", **device.describe())
    return device


def forecasters_for(settings: Settings) -> list[Forecaster]:
    """The forecasters the settings ask for, built on the device they choose (none for the
    baseline alone: it needs neither a device nor torch)."""
    names = model_names(settings)
    if names == ["baseline"]:
        return [build_forecaster("baseline", settings.forecast, None)]
    from trader.forecast.device_choice import DeviceUnavailable  # noqa: PLC0415

    try:
        device = model_device(settings)
    except DeviceUnavailable as error:
        raise ModelUnavailable(str(error)) from error
    return [build_forecaster(name, settings.forecast, device) for name in names]


class FeedInstruments(Mapping[str, Instrument]):
    """The symbols' trading rules, asked of the feed when first needed: a daemon that starts
    while the exchange is unreachable builds its engine before the market list is loaded."""

    def __init__(self, feed: MarketData, symbols: Sequence[str]) -> None:
        self._feed, self._symbols = feed, list(symbols)
        self._known: dict[str, Instrument] = {}

    def __getitem__(self, symbol: str) -> Instrument:
        if symbol not in self._symbols:
            raise KeyError(symbol)
        if symbol not in self._known:
            self._known[symbol] = self._feed.instrument(symbol)
        return self._known[symbol]

    def __iter__(self) -> Iterator[str]:
        return iter(self._symbols)

    def __len__(self) -> int:
        return len(self._symbols)


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
    inference: Executor | None = None,
    start_market: bool = True,
    halt_policy: HaltPolicy = "wait",
    calendars: SymbolCalendars | None = None,
    market: MarketDataStep | None = None,
    quiet_ticks: bool = False,
    perp_tapes: Mapping[str, PerpTapeLike] | None = None,
) -> Engine:
    """Every part of the engine, recovered from the ledger at `database`. With
    `start_market=False` the caller starts `engine.market` itself (the daemon does, after
    reconciling, and keeps trying while the exchange is unreachable). `market`: the data
    step, when not the one fetching from `feed` (a backtest's plays a plan); `quiet_ticks`:
    see `engine.quiet` (a backtest's engine takes the short way; never a perpetual's, whose
    every tick may move money); `perp_tapes`: a perpetual's recorded funding and mark prices
    (`engine.perps`)."""
    market = market or MarketDataStep(
        feed,
        settings.market,
        store=BarStore(
            database, settings.market.context_bars * 2, settings.ledger.bar_retention_days
        ),
        calendars=calendars,
    )
    instruments: Mapping[str, Instrument] = FeedInstruments(feed, settings.market.symbols)
    if start_market:
        await market.start(now)
        instruments = {s: feed.instrument(s) for s in settings.market.symbols}
    ledger = TradingLedger(database)
    # Paper or live (broker.mode); live takes its instance locks here (StartRefused if held).
    broker, starting_cash = await build_broker(settings, feed, instruments, database, now)
    try:
        state = await ledger.open(settings.broker.currency, starting_cash)
    except BaseException:
        broker.close()
        raise
    risk = RiskEngine(
        settings.risk,
        maker_fee_bps=float(settings.broker.maker_fee_bps),
        taker_fee_bps=float(settings.broker.taker_fee_bps),
        max_quote_age=timedelta(seconds=settings.market.max_quote_age_s),
        status=state.status or TradingStatus(TradingState.ACTIVE, "started", now),
        day=state.day,
        halt_policy=halt_policy,
        opening=state.starting_cash,  # the first day's loss and the first peak start from it
    )
    if perp_tapes is None and settings.market.kind == "perp":  # a live feed: read through ccxt
        perp_tapes = live_perp_tapes(
            feed, settings.market.symbols, Timeframe(settings.market.timeframe), database,
            get_logger("trader.perp_tape"),
        )  # fmt: skip
    perps = perp_book(settings, broker, perp_tapes, get_logger("trader.engine"))
    if perps is not None:
        await perps.restore(database)  # isolated funding since each position opened
    return Engine(
        settings=settings,
        market=market,
        forecasters=forecasters if forecasters is not None else forecasters_for(settings),
        strategies=strategies_for(
            settings.strategy,
            settings.market.symbols,
            both_sides=settings.exchange.rests_both_sides,
            short_refusal=account_short_refusal(settings),
        ),
        risk=risk,
        broker=broker,
        ledger=ledger,
        instruments=instruments,
        state=state,
        hooks=hooks,
        inference=inference,
        quiet_ticks=quiet_ticks and settings.market.kind != "perp",
        perps=perps,
    )


def replay_perp_tapes(
    settings: Settings, recordings: Mapping[str, Recording] | None
) -> PerpRecordings | None:
    """A replayed perpetual's funding and mark files beside its bars (None: spot, or no
    replay). PerpDataError (a ValueError) for bars without a funding file."""
    if settings.market.kind != "perp" or recordings is None:
        return None
    return perp_recordings(recordings.values())


@dataclass(frozen=True)
class ReplaySummary:
    ticks: int
    first: datetime | None
    last: datetime | None
    resumed_after: datetime | None
    equity: Decimal


def tick_times(
    recordings: Mapping[str, Recording],
    context: int,
    calendars: Mapping[str, TradingCalendar] | None = None,
) -> list[datetime]:
    """The replay's ticks: every close of a bar some symbol's market expects (in its
    sessions, a bar missing from the file included), from when every symbol could first have
    a full window to the last recorded close. No calendars: markets open around the clock."""
    calendars = calendars or SymbolCalendars.continuous(list(recordings))
    ends: set[int] = set()
    first_full, last = [], []
    for symbol, recording in recordings.items():
        starts = recording.starts
        if len(starts) < context:
            return []
        step = recording.timeframe.seconds * 1000
        first_full.append(starts[context - 1] + step)
        last.append(starts[-1] + step)
        expected = calendars[symbol].bar_starts(recording.timeframe, starts[0], starts[-1] + 1)
        ends.update((expected + step).tolist())
    begin, end = max(first_full), max(last)
    return [from_epoch_ms(t) for t in sorted(ends) if begin <= t <= end]


def replay_settings(settings: Settings, recordings: Mapping[str, Recording]) -> Settings:
    """The settings with the recordings' symbols and timeframe, and an account in their quote
    currency (ValueError for files that cannot share one run)."""
    timeframes = {r.timeframe for r in recordings.values()}
    if len(timeframes) != 1:
        raise ValueError(f"replay files have different timeframes: {sorted(map(str, timeframes))}")
    (timeframe,) = timeframes
    symbols = list(recordings)
    currency = account_currency(symbols)  # a DomainError (a ValueError) for mixed quotes
    market = settings.market.model_copy(
        update={"symbols": symbols, "timeframe": Timeframe(timeframe.text).text}
    )
    chosen = settings.strategy.per_symbol
    strategy = settings.strategy.model_copy(
        update={"per_symbol": {s: n for s, n in chosen.items() if s in recordings}}
    )
    broker = settings.broker.model_copy(update={"currency": currency})
    updated = settings.model_copy(update={"market": market, "strategy": strategy, "broker": broker})
    return type(settings).model_validate(updated.model_dump())


def replay_times(
    settings: Settings,
    replay: ReplayCalendars,
    last: datetime | None,
    *,
    begin: datetime | None = None,
    end: datetime | None = None,
) -> list[datetime]:
    """The replay's tick times still to run: after the ledger's `last`, inside [begin, end]."""
    return [
        t
        for t in tick_times(replay.recordings, settings.market.context_bars, replay.calendars)
        if (last is None or t > last)
        and (begin is None or t >= begin)
        and (end is None or t <= end)
    ]


@dataclass(frozen=True)
class Venue:
    """Where the engine meets the market: the feed, the clock it runs on, and when its ticks
    fall. Live: an exchange on the wall clock, ticks at bar close + settle delay. Replay:
    recorded bars on a simulated clock, ticks at the recorded bar closes."""

    kind: str  # "live" or "replay"
    feed: MarketData
    clock: Clock
    times: TickTimes
    resume_after: datetime | None  # the ledger's last tick: later ones are still to run
    calendars: SymbolCalendars  # each symbol's market: which bars to expect, and when


def replay_venue(
    settings: Settings,
    replay: ReplayCalendars,
    times: Sequence[datetime],
    speed: float | None,
    *,
    resume_after: datetime | None,
) -> Venue:
    """`settings` are the replay's (`replay_settings`); `times` are not empty."""
    clock = SimulatedClock(times[0], speed)
    recordings = replay.recordings
    rules = Instrument(
        next(iter(recordings)), settings.market.replay_price_step,
        settings.market.replay_amount_step, Decimal(0), settings.market.replay_min_notional,
    )  # fmt: skip
    feed = ReplayMarketData(recordings, clock, spread_model(settings), rules)
    return Venue("replay", feed, clock, RecordedTicks(times), resume_after, replay.calendars)


def live_calendars(settings: Settings, now: datetime) -> SymbolCalendars:
    """Each symbol's calendar by name (`calendar_names`). Raises ValueError for a calendar no
    library knows."""
    market = settings.market
    timeframe = Timeframe(market.timeframe)
    return SymbolCalendars.named(calendar_names(market), now, timeframe, market.context_bars * 2)


def live_venue(
    settings: Settings, resume_after: datetime | None, on_error: Callable[[str], None]
) -> Venue:
    """The configured exchange on its clock (`trader.market.live_source`): the wall clock,
    or the accelerated one of a sandbox. Nothing is sent before the daemon starts the
    market."""
    clock = venue_clock(settings.exchange)
    calendars = live_calendars(settings, clock.now())
    feed = exchange_feed(settings.exchange, clock, settings.market, on_error)
    times = BarCloseTicks(
        Timeframe(settings.market.timeframe),
        timedelta(seconds=settings.schedule.settle_delay_s),
        calendars,
    )
    return Venue("live", feed, clock, times, resume_after, calendars)


async def run_replay(
    settings: Settings,
    recordings: Mapping[str, Recording],
    *,
    speed: float | None = None,
    max_ticks: int | None = None,
    stop: asyncio.Event | None = None,
    forecasters: Sequence[Forecaster] | None = None,
    hooks: EngineHooks | None = None,
    begin: datetime | None = None,
    end: datetime | None = None,
    durable: bool = True,
    inference: Executor | None = None,
    halt_policy: HaltPolicy = "wait",
    calendars: ReplayCalendars | None = None,
    ticks: Sequence[datetime] | None = None,
    capital: LiveCapital | None = None,
) -> ReplaySummary:
    """Drive the engine over `recordings`, resuming after the ledger's last completed tick.
    `begin`/`end` keep the ticks in that span (bars before it still fill the first windows);
    `durable=False` keeps the ledger off the disk's critical path (a backtest's); `inference`
    runs the forecasters (default: a worker thread); `halt_policy`: what ends a stop of the
    loss or drawdown limit (a backtest's `on_halt`; the daemon's waits for a person);
    `calendars`: the recordings' markets, when already worked out (else inferred or built from
    the settings); `ticks`: the tick times to run instead of the recordings' bar closes (a
    daemon's own, settle delay and all: `trader shortfall`); `capital`: the share of equity
    sizing may use, a live daemon's (`trader shortfall` replays it on the paper broker). A
    write the ledger's disk refuses ends the replay at that tick with `LedgerWriteFailed` (run
    it again once there is space: it resumes)."""
    log = get_logger("trader.replay")
    settings = replay_settings(settings, recordings)
    replay = calendars or replay_calendars(settings.market, recordings)
    database = await Database.open(settings.ledger.path, durable=durable)
    try:
        last = (
            (await TradingLedger(database).last_tick()) if settings.ledger.path.exists() else None
        )
        times = replay_times(settings, replay, last, begin=begin, end=end)
        if ticks is not None:
            full = replay_times(settings, replay, None)  # from every symbol's first full window
            times = [
                t for t in ticks
                if full and t >= full[0] and (last is None or t > last)
                and (begin is None or t >= begin) and (end is None or t <= end)
            ]  # fmt: skip
        if not times:
            return ReplaySummary(0, None, None, last, Decimal(0))
        venue = replay_venue(settings, replay, times, speed, resume_after=last)
        tapes = replay_perp_tapes(settings, recordings)
        engine = await build_engine(
            settings, venue.feed, database, times[0], forecasters=forecasters, hooks=hooks,
            inference=inference, halt_policy=halt_policy, calendars=venue.calendars,
            perp_tapes=tapes,
        )  # fmt: skip
        if capital is not None:
            engine.planner = Planner(settings.strategy, settings.risk, capital)
        log.info(
            "replay",
            ticks=len(times),
            first=times[0].isoformat(),
            resumed_after=last and last.isoformat(),
        )
        reports: list[TickReport] = []

        async def tick(at: datetime) -> TickReport:
            report = await engine.tick(at)
            reports[:] = [report]
            return report

        stop = stop or asyncio.Event()
        refused: list[str] = []

        def stop_at_once(reason: str) -> None:  # nobody is there to free the space
            refused.append(reason)
            stop.set()

        engine.write_outage.on_start = stop_at_once
        loop = TickLoop(tick, venue.times, venue.clock, grace_s=None)
        try:
            done = await loop.run(stop, after=last, max_ticks=max_ticks)
        finally:
            engine.close()
        if refused:
            raise LedgerWriteFailed(refused[0])
        equity = reports[0].equity if reports else Decimal(0)
        return ReplaySummary(done, times[0], times[done - 1] if done else None, last, equity)
    finally:
        await database.close()
