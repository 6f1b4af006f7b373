"""One strategy over history: the daemon's own engine (`trader.runner.run_replay`) on the replay
feed, the paper broker and a ledger of its own, then what that ledger recorded.

Nothing here decides or fills anything: the engine does, tick by tick, seeing at each tick only
the bars closed by then. The run's ledger is the record every statistic is computed from.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import numpy as np
from tqdm import tqdm

from trader.backtest.no_trade import reason_kind
from trader.config.schema import Settings
from trader.domain import Fill, to_epoch_ms
from trader.engine.forecasting import InlineExecutor
from trader.engine.report import TickReport
from trader.forecast.protocol import Forecaster
from trader.ledger.codec import parse_time
from trader.ledger.database import Database
from trader.ledger.funding import FundingRow, LiquidationRow, read_funding, read_liquidations
from trader.ledger.trading import TradingLedger
from trader.market.replay_calendars import ReplayCalendars
from trader.risk.state import TradingStatus
from trader.runner import run_replay

T = TypeVar("T")


@dataclass(frozen=True)
class StateChange:
    at: datetime
    state: str
    reason: str


@dataclass(frozen=True)
class StrategyRun:
    """What the engine did with one strategy, read back from its ledger."""

    strategy: str
    starting_cash: float
    ticks_ms: np.ndarray  # close time of every tick, epoch ms
    equity: np.ndarray  # after each tick (marked at the quotes' mid)
    fills: tuple[Fill, ...]
    outcomes: Mapping[str, int]  # ticks by outcome: ok, degraded, failed
    skipped: Mapping[str, int]  # symbol-ticks skipped, by reason
    decisions: Mapping[str, int]  # by direction
    orders: Mapping[str, int]  # by final status
    states: tuple[StateChange, ...]  # trading state changes (REDUCING, HALTED, ...)
    ledger: Path
    seconds: float  # wall time of the simulation
    refusals: Mapping[str, int] = field(default_factory=dict)  # orders refused, by risk rule
    # Per symbol: its skipped ticks by reason, and the first tick it was ready to trade.
    skipped_by_symbol: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    first_ready: Mapping[str, int] = field(default_factory=dict)  # epoch ms
    # Decisions to hold no position, by the reason's kind (`no_trade.reason_kind`); read
    # only for a run that never filled, the one whose findings say why.
    flat_reasons: Mapping[str, int] = field(default_factory=dict)
    # A perpetual's: the funding the engine booked, and the positions it liquidated.
    funding: tuple[FundingRow, ...] = ()
    liquidations: tuple[LiquidationRow, ...] = ()


class _Watch:
    """Engine hooks: move the progress bar, count what the ledger does not keep (orders the
    risk checks refused, by rule)."""

    def __init__(self, bar: tqdm) -> None:
        self.bar = bar
        self.refusals: Counter[str] = Counter()

    def on_tick(self, report: TickReport) -> None:
        self.refusals.update(verdict.rule for _, verdict in report.refusals)
        self.bar.update(1)

    def on_state(self, status: TradingStatus) -> None:
        self.bar.set_postfix_str(f"{status.state}: {status.reason}"[:60])


def remove_ledger(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def strategy_settings(settings: Settings, strategy: str, ledger: Path) -> Settings:
    """`settings` for a run of `strategy` on every symbol, with its own ledger, which keeps
    only the windows' bars (its bars are the files': nothing will replay them from it)."""
    return settings.model_copy(
        update={
            "strategy": settings.strategy.model_copy(update={"name": strategy, "per_symbol": {}}),
            "ledger": settings.ledger.model_copy(update={"path": ledger, "bar_retention_days": 0}),
        }
    )


def progress_bar(strategy: str, ticks: int, progress: bool | None) -> tqdm:
    return tqdm(
        total=ticks, unit="bar", desc=f"backtest {strategy}", leave=False,
        disable=None if progress is None else not progress,
    )  # fmt: skip


async def replay_strategy(
    settings: Settings,
    replay: ReplayCalendars,
    forecasters: Sequence[Forecaster],
    strategy: str,
    ledger: Path,
    *,
    begin: datetime | None,
    end: datetime | None,
    ticks: int,
    progress: bool | None = None,
) -> StrategyRun:
    """Run `strategy` as the daemon replays history (`trader.runner.run_replay`): the data
    step fetching and judging rows each tick, a ledger transaction each tick. The backtest
    runs `trader.backtest.session.simulate` instead, which must agree with this exactly
    (tests/integration/test_backtest_equivalence.py)."""
    remove_ledger(ledger)
    run_settings = strategy_settings(settings, strategy, ledger)
    bar = progress_bar(strategy, ticks, progress)
    watch = _Watch(bar)
    began = time.perf_counter()
    with bar:
        await run_replay(
            run_settings, replay.recordings, forecasters=forecasters, hooks=watch,
            begin=begin, end=end, durable=False, inference=InlineExecutor(),
            halt_policy=settings.backtest.on_halt, calendars=replay,
        )  # fmt: skip
    seconds = time.perf_counter() - began
    symbols = run_settings.market.symbols
    run = await read_run(strategy, ledger, seconds, symbols)
    return replace(run, refusals=watch.refusals)


@dataclass(frozen=True)
class TickSeries:
    """A run's ticks as the ledger's `ticks` and `equity` tables hold them."""

    ticks_ms: np.ndarray  # close time of every tick, epoch ms
    equity: np.ndarray  # after each tick
    outcomes: Mapping[str, int]
    skipped: Mapping[str, int]
    skipped_by_symbol: Mapping[str, Mapping[str, int]]
    first_ready: Mapping[str, int]


async def read_run(
    strategy: str,
    path: Path,
    seconds: float = 0.0,
    symbols: Sequence[str] = (),
    series: TickSeries | None = None,
) -> StrategyRun:
    """A run as its ledger at `path` recorded it; `series`: its ticks as they were booked,
    when the caller kept them (else read from the ledger too)."""
    database = await Database.open(path, durable=False)
    try:
        fills = await TradingLedger(database).fills()
        starting_cash, decisions, orders, states = await database.run(_read_books)
        # Read for what a run with no fill says (`findings`): a scan of every decision.
        flat = await database.run(_flat_reasons) if not fills else Counter[str]()
        if series is None:
            series = await database.run(lambda c: _read_series(c, symbols))
        funding = await database.run(read_funding)
        liquidations = await database.run(read_liquidations)
    finally:
        await database.close()
    return StrategyRun(
        strategy, starting_cash, series.ticks_ms, series.equity,
        tuple(sorted(fills, key=lambda f: f.at)), series.outcomes, series.skipped, decisions,
        orders, states, path, seconds, skipped_by_symbol=series.skipped_by_symbol,
        first_ready=series.first_ready, flat_reasons=flat, funding=tuple(funding),
        liquidations=tuple(liquidations),
    )  # fmt: skip


def _read_series(c: sqlite3.Connection, symbols: Sequence[str]) -> TickSeries:
    """Ticks by outcome, symbol-ticks skipped by reason, and per symbol: its skipped ticks by
    reason and the first tick it was not skipped; the equity after each tick."""
    outcomes: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    by_symbol: dict[str, Counter[str]] = {s: Counter() for s in symbols}
    first_ready: dict[str, int] = {}
    for at, outcome, skips in c.execute("SELECT at, outcome, skipped FROM ticks ORDER BY at"):
        outcomes[outcome] += 1
        reasons = json.loads(skips)
        skipped.update(reasons.values())
        for symbol in symbols:
            if symbol in reasons:
                by_symbol[symbol][reasons[symbol]] += 1
            elif symbol not in first_ready:
                first_ready[symbol] = to_epoch_ms(parse_time(at))
    rows = c.execute("SELECT at, equity FROM equity ORDER BY at").fetchall()
    ticks = np.array([to_epoch_ms(parse_time(at)) for at, _ in rows], dtype=np.int64)
    equity = np.array([float(Decimal(e)) for _, e in rows], dtype=np.float64)
    return TickSeries(ticks, equity, outcomes, skipped, by_symbol, first_ready)


def _flat_reasons(c: sqlite3.Connection) -> Counter[str]:
    """Decisions to hold no position, by the reason's kind."""
    kinds: Counter[str] = Counter()
    for reason, n in c.execute(
        "SELECT reason, count(*) FROM decisions WHERE direction = 'flat' GROUP BY reason"
    ):
        kinds[reason_kind(reason)] += n
    return kinds


def _read_books(
    c: sqlite3.Connection,
) -> tuple[float, Counter[str], Counter[str], tuple[StateChange, ...]]:
    account = c.execute("SELECT starting_cash FROM account").fetchone()
    starting = account[0] if account else 0  # none: stopped before it booked anything
    decisions = Counter(
        dict(c.execute("SELECT direction, count(*) FROM decisions GROUP BY direction").fetchall())
    )
    orders = Counter(
        dict(c.execute("SELECT status, count(*) FROM orders GROUP BY status").fetchall())
    )
    states = tuple(
        StateChange(parse_time(at), state, reason)
        for at, state, reason in c.execute(
            "SELECT at, state, reason FROM trading_state_events ORDER BY id"
        )
    )
    return float(Decimal(starting)), decisions, orders, states
