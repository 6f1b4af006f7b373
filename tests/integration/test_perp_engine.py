"""Perpetuals in the kernel: the engine itself pays funding, values on the mark price and
liquidates, in a backtest, a replay and a paper daemon that restarts.

Sources of the rules checked here (each test computes what it expects itself, never from the
engine's code):
- funding = mark x signed position x rate, positive paid by the account (Binance, USDⓈ-M
  "Introduction to Binance Futures Funding Rates": funding amount = position value x funding
  rate, position value = mark price x size; longs pay shorts when the rate is positive);
- liquidation when margin balance <= maintenance margin on the mark price, the liquidation
  price by Binance's formula (FAQ "How to Calculate Liquidation Price of USDⓈ-M Futures
  Contracts", https://www.binance.com/en/support/faq/b3c689c1f50a44cabb3a84e663b81d93), the
  position closed at the bankruptcy price through a gap and a liquidation fee on the notional
  (Binance "Liquidation Protocol", docs.traderwagon.com/faq/futures-trading-introduction/
  liquidation-protocol; here broker.liquidation_fee_bps), taken only out of the margin left
  (our model, trader.domain.perp.liquidation_fill);
- isolated margin at opening = notional / leverage (Binance "Isolated margin").
"""

from __future__ import annotations

import asyncio
import csv
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_UP, Decimal, localcontext
from pathlib import Path

import pytest
import structlog

from tests.integration.daemon import paper_run
from tests.integration.test_backtest_equivalence import ledger as ledger_rows
from trader.backtest.funding import Closes, book_funding, load_perp_data
from trader.backtest.report import terminal_summary
from trader.backtest.run import Backtest, run_backtest
from trader.clock import SimulatedClock
from trader.config.schema import Settings
from trader.domain import Direction, Fill, Side, Signal, Timeframe
from trader.domain.perp import MarginState, liquidation_price
from trader.domain.perp.default_brackets import default_brackets
from trader.forecast import BaselineForecaster
from trader.ledger import Database
from trader.ledger.funding import read_funding, read_liquidations
from trader.ledger.trading import TradingLedger
from trader.market.files.funding import MarkCandle, MarkPrices
from trader.market.quotes import FixedSpread
from trader.market.replay import Recording, ReplayMarketData, read_recording
from trader.market.replay_perp import PerpRecordings, PerpTape
from trader.runner import build_engine, run_replay, tick_times
from trader.strategy.base import AtMarket, Decision

pytestmark = pytest.mark.integration

PERP = Path(__file__).parents[1] / "data" / "perp"
BARS = PERP / "SOLUSDT_1h.csv.gz"
HOUR_MS = 3_600_000
STEP = Decimal("0.00000001")
LONG_SHORT = {
    "market": {"kind": "perp", "context_bars": 32, "min_contiguous_bars": 16},
    "forecast": {"model": "baseline", "horizon": 2, "baseline_lookback": 16},
    "strategy": {"allow_short": True, "position_fraction": 0.5},
    "risk": {"min_edge_bps": 0, "max_drawdown": 1.0, "max_daily_loss": 1.0},
}


def _funding_file() -> list[tuple[int, Decimal, Decimal | None]]:
    with (PERP / "funding" / "SOLUSDT_1h.csv").open(newline="") as f:
        return [
            (int(r["fundingTime"]), Decimal(r["fundingRate"]), Decimal(r["markPrice"] or "NaN"))
            for r in csv.DictReader(f)
        ]


def _mark_closes() -> dict[int, Decimal]:
    """Each mark candle's close by its close time."""
    with (PERP / "mark" / "SOLUSDT_1h.csv").open(newline="") as f:
        return {int(r["timestamp"]) + HOUR_MS: Decimal(r["close"]) for r in csv.DictReader(f)}


def _signed(fill: Fill) -> Decimal:
    return fill.amount if fill.side is Side.BUY else -fill.amount


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _held(fills: Sequence[Fill], at_ms: int, *, maker_first: bool) -> Decimal:
    """The position at `at_ms`: fills stamped before it, and (maker_first) the resting fills
    stamped then, which filled during the bar that ended then."""
    held = Decimal(0)
    for fill in fills:
        stamped = _ms(fill.at)
        maker = fill.liquidity.value == "maker"
        if stamped < at_ms or (maker_first and maker and stamped == at_ms):
            held += _signed(fill)
    return held


@pytest.fixture(scope="module")
def long_short(tmp_path_factory: pytest.TempPathFactory) -> tuple[Backtest, Path]:
    folder = tmp_path_factory.mktemp("perp-engine")
    settings = Settings(**LONG_SHORT, backtest={"cache_dir": folder / "cache"})
    recording = read_recording(BARS)
    perp = load_perp_data([recording], HOUR_MS)
    result = asyncio.run(
        run_backtest(
            settings,
            {"SOL/USDT": recording},
            strategies=["simple"],
            perp=perp,
            ledgers=folder / "ledgers",
        )
    )
    return result, folder / "ledgers" / "ledger-simple.sqlite3"


def test_the_engine_books_the_funding_rate_x_mark_x_position_at_each_funding_time(long_short):
    result, ledger = long_short
    fills = result.runs["simple"].fills
    with sqlite3.connect(ledger) as c:
        booked = read_funding(c)
    marks = _mark_closes()
    first, last = int(result.ticks_ms[0]), int(result.ticks_ms[-1])
    expected = []
    for at, rate, record_mark in _funding_file():
        if not first < at <= last:
            continue
        held = _held(fills, at, maker_first=True)
        if held == 0:
            continue
        mark = record_mark if record_mark.is_finite() else marks[max(t for t in marks if t <= at)]
        expected.append((at, rate, mark, held, mark * held * rate))
    assert [(_ms(r.at), r.rate, r.mark, r.position, r.paid) for r in booked] == expected
    assert {r.source for r in booked} == {"modelled"}
    positions = [held for *_, held, _ in expected]
    assert min(positions) < 0 < max(positions)  # long and short both paid and received
    # The after-the-run computation (helper C's, from the fills alone) as an oracle.
    perp = load_perp_data([read_recording(BARS)], HOUR_MS).symbols["SOL/USDT"]
    closes = Closes.of(result.closes["SOL/USDT"])
    oracle = book_funding(list(fills), perp, closes, first, last)
    assert sum((p.paid for p in oracle), Decimal(0)) == sum((r.paid for r in booked), Decimal(0))
    # The report's funding line is the engine's.
    assert result.funding is not None
    assert result.funding.totals("simple").net == sum((r.paid for r in booked), Decimal(0))
    summary = terminal_summary(result)
    assert "simple: funding paid/received:" in summary
    assert "booked after each strategy's run" not in summary


def test_the_ledger_s_equity_values_the_position_on_the_mark(long_short):
    result, ledger = long_short
    fills = result.runs["simple"].fills
    marks = _mark_closes()
    with sqlite3.connect(ledger) as c:
        rows = c.execute("SELECT at, equity, cash FROM equity ORDER BY at").fetchall()
    held_ticks = 0
    for at, equity, cash in rows:
        at_ms = _ms(datetime.fromisoformat(at))
        held = sum((_signed(f) for f in fills if _ms(f.at) <= at_ms), Decimal(0))
        if held == 0:
            continue
        held_ticks += 1
        mark = marks[max(t for t in marks if t <= at_ms)]
        assert Decimal(equity) - Decimal(cash) == held * mark, at
    assert held_ticks > 100


# --- a replay whose mark falls through the liquidation price -----------------------------------

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WICK, CRASH = 36, 39  # the bar whose last price alone dips; the bar whose mark falls


class LongOnce:
    """Goes long at the first tick and holds; flat once its position is gone."""

    name = "long_once"

    def __init__(self) -> None:
        self.opened = False

    def decide(self, ctx) -> Decision:
        held = ctx.position != 0
        direction = Direction.LONG if held or not self.opened else Direction.FLAT
        self.opened = self.opened or held
        signal = Signal(self.name, ctx.symbol, ctx.at, direction, "test")
        return Decision(
            signal, AtMarket(direction), 1000.0 if direction is Direction.LONG else None
        )


def _liquidation_tape() -> tuple[Recording, PerpTape]:
    rows, candles = [], []
    for n in range(44):
        start = int((T0 + timedelta(hours=n)).timestamp() * 1000)
        low = 70.0 if n == WICK else 99.5  # a wick in the trades alone
        rows.append((start, 100.0, 100.5, low, 100.0, 1e6, None))
        mark_low = Decimal(85) if n == CRASH else Decimal("99.8")
        candles.append(MarkCandle(start, Decimal(100), Decimal("100.2"), mark_low, Decimal(100)))
    recording = Recording("SOL/USDT", Timeframe("1h"), rows, Path("SOLUSDT_1h.csv"))
    tape = PerpTape("SOL/USDT", (), MarkPrices(tuple(candles), HOUR_MS))
    return recording, tape


async def test_a_mark_through_the_liquidation_price_closes_at_the_bankruptcy_price(tmp_path):
    settings = Settings(
        market={"kind": "perp", "symbols": ["SOL/USDT"], "context_bars": 32,
                "replay_amount_step": "0.001"},
        strategy={"position_fraction": 0.25},
        risk={"max_leverage": 10, "min_edge_bps": 0, "max_order_notional": 5000},
        broker={"margin_mode": "isolated", "liquidation_fee_bps": 50},
        ledger={"path": tmp_path / "ledger.sqlite3"},
    )  # fmt: skip
    recording, tape = _liquidation_tape()
    recordings = {"SOL/USDT": recording}
    times = tick_times(recordings, 32)
    clock = SimulatedClock(times[0])
    feed = ReplayMarketData(recordings, clock, FixedSpread(5))
    database = await Database.open(settings.ledger.path)
    engine = await build_engine(
        settings, feed, database, times[0], forecasters=[BaselineForecaster(32)],
        perp_tapes=PerpRecordings({"SOL/USDT": tape}),
    )  # fmt: skip
    engine.strategies = {"SOL/USDT": LongOnce()}
    reports = []
    with structlog.testing.capture_logs() as logs:
        for at in times:
            await clock.sleep_until(at)
            reports.append(await engine.tick(at))
    engine.close()
    ledger = TradingLedger(database)
    fills = await ledger.fills()
    liquidations = await database.run(read_liquidations)
    state = await ledger.load()
    await database.close()

    (opened, *_), closed = fills[:-1], fills[-1]
    assert all(f.side is Side.BUY for f in fills[:-1])
    size = sum((f.amount for f in fills[:-1]), Decimal(0))
    cost = sum((f.amount * f.price for f in fills[:-1]), Decimal(0))
    with localcontext(prec=60):  # the domain's quotients carry 50 digits
        entry, wallet = cost / size, cost / 10
    # The wick: the last price fell to 70 with the mark at 99.8: nothing happened then.
    wick_close = T0 + timedelta(hours=WICK + 1)
    assert closed.at > wick_close
    assert closed.at == T0 + timedelta(hours=CRASH + 1)  # the tick the mark's bar closed
    # The liquidation price two ways: A's formula, and margin balance = maintenance margin
    # solved by hand (isolated wallet = cost / leverage; first bracket: MMR 0.4%, cum 0).
    formula = liquidation_price(MarginState(size, entry, wallet), default_brackets("SOL/USDT"))
    assert formula is not None
    mmr = Decimal("0.004")
    with localcontext(prec=60):  # wallet + size (P - entry) = size P mmr
        by_hand = (cost - wallet) / (size * (1 - mmr))
        bankrupt = entry - wallet / size
    assert abs(formula - by_hand) < Decimal("1e-20")
    assert Decimal(85) < by_hand < Decimal("99.8")
    # The mark's 85 gapped through the bankruptcy price (where wallet + size (P - entry) = 0):
    # closed there, rounded to 1e-8 in the account's favour (our model,
    # trader.domain.perp.liquidation_fill); the fee, 50 bps of the notional, only out of what
    # the isolated margin has left, in whole 1e-8.
    assert bankrupt > Decimal(85)
    price = bankrupt.quantize(STEP, ROUND_CEILING)
    with localcontext(prec=60):
        left = wallet + size * (price - entry)
    fee = min((size * price * Decimal(50) / 10_000).quantize(STEP, ROUND_UP),
              left.quantize(STEP, ROUND_FLOOR))  # fmt: skip
    assert fee < Decimal("0.0001")  # not the 50 bps of the whole notional
    assert (closed.side, closed.amount, closed.price, closed.fee) == (Side.SELL, size, price, fee)
    assert state.portfolio.amount("SOL/USDT") == 0
    spent = sum((f.amount * f.price + f.fee for f in fills[:-1]), Decimal(0))
    assert state.portfolio.cash == Decimal(10_000) - spent + size * price - fee
    # The isolated margin alone was lost: the rest of the account is as it was, to 1e-8.
    opening_fees = sum((f.fee for f in fills[:-1]), Decimal(0))
    assert abs(state.portfolio.cash - (Decimal(10_000) - opening_fees - wallet)) < STEP
    (row,) = liquidations
    assert (row.fill_id, row.position, row.trigger_mark, row.fee) == (
        closed.fill_id, size, Decimal(85), fee,
    )  # fmt: skip
    assert row.margin_mode == "isolated"
    assert opened.price > 100  # bought at the ask
    said = [e for e in logs if e["event"] == "liquidated"]
    assert len(said) == 1
    assert said[0]["symbol"] == "SOL/USDT"


async def test_the_engine_s_order_past_the_margin_is_refused_and_said(tmp_path):
    """1x, the whole equity at the ask: the initial margin (notional at the ask) plus the open
    loss (the ask above the mark, Binance's "Cost = Initial Margin + Open Loss") is more than
    the 10,000 there is: the paper broker refuses it as -2019 and the ledger says why."""
    settings = Settings(
        market={"kind": "perp", "symbols": ["SOL/USDT"], "context_bars": 32,
                "replay_amount_step": "0.001"},
        strategy={"position_fraction": 1.0},
        risk={"max_leverage": 1, "min_edge_bps": 0, "max_order_notional": 20000,
              "max_position_notional": 20000, "max_total_exposure": 20000},
        ledger={"path": tmp_path / "ledger.sqlite3"},
    )  # fmt: skip
    recording, tape = _liquidation_tape()
    recordings = {"SOL/USDT": recording}
    times = tick_times(recordings, 32)[:2]
    clock = SimulatedClock(times[0])
    database = await Database.open(settings.ledger.path)
    engine = await build_engine(
        settings, ReplayMarketData(recordings, clock, FixedSpread(5)), database, times[0],
        forecasters=[BaselineForecaster(32)], perp_tapes=PerpRecordings({"SOL/USDT": tape}),
    )  # fmt: skip
    engine.strategies = {"SOL/USDT": LongOnce()}
    for at in times:
        await clock.sleep_until(at)
        await engine.tick(at)
    engine.close()
    fills = await TradingLedger(database).fills()
    events = await database.run(
        lambda c: c.execute("SELECT status, detail FROM order_events ORDER BY id").fetchall()
    )
    await database.close()
    assert fills == []
    refused = [detail for status, detail in events if status == "rejected"]
    assert refused
    assert all(d.startswith("-2019 Margin is insufficient: SOL/USDT needs ") for d in refused)
    assert all(d.endswith(" at 1x, 10000.00000000 available") for d in refused)


# --- a paper daemon that stops and starts again ---------------------------------------------------


def _replay_settings(path: Path) -> Settings:
    return Settings(**LONG_SHORT, ledger={"path": path})


def _books(path: Path) -> tuple[list[tuple[object, ...]], str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as c:
        funding = c.execute("SELECT * FROM funding ORDER BY at").fetchall()
        (cash,) = c.execute("SELECT cash FROM account").fetchone()
        positions = c.execute("SELECT symbol, amount FROM positions ORDER BY symbol").fetchall()
    return funding, cash, positions


async def test_a_restart_restores_cash_after_funding_and_books_no_funding_twice(tmp_path):
    recordings = {"SOL/USDT": read_recording(BARS)}
    whole = tmp_path / "whole.sqlite3"
    await run_replay(_replay_settings(whole), recordings, durable=False)
    stopped = tmp_path / "stopped.sqlite3"
    for ticks in (60, 45, None):  # stopped twice, then run to the end
        await run_replay(_replay_settings(stopped), recordings, max_ticks=ticks, durable=False)
    funding, cash, positions = _books(stopped)
    assert funding  # funding was paid across the stops
    assert (funding, cash, positions) == _books(whole)
    times = [(row[0], row[1]) for row in funding]
    assert len(times) == len(set(times))
    # Starting again at the end books nothing more.
    await run_replay(_replay_settings(stopped), recordings, durable=False)
    assert _books(stopped) == (funding, cash, positions)


def test_the_paper_daemon_stopped_and_started_again_pays_each_funding_once(cli, tmp_path):
    """`trader run --replay` (the daemon, paper broker) of the perpetual, stopped twice by
    --max-ticks and started again, against one uninterrupted run: the same funding rows, cash
    and positions (the start-up's ledger check derives cash from the fills and the funding)."""
    perp = {"TRADER_MARKET__KIND": "perp"}
    whole_dir, stopped_dir = tmp_path / "whole", tmp_path / "stopped"
    whole_dir.mkdir()
    stopped_dir.mkdir()
    whole = paper_run(cli, whole_dir, BARS, **perp)
    for ticks in ("70", "50"):
        paper_run(cli, stopped_dir, BARS, "--max-ticks", ticks, **perp)
    stopped = paper_run(cli, stopped_dir, BARS, **perp)
    funding, cash, positions = _books(stopped)
    assert len(funding) > 10
    assert (funding, cash, positions) == _books(whole)
    with sqlite3.connect(stopped) as c:
        ticks = c.execute("SELECT count(*) FROM ticks").fetchone()[0]
        (resting,) = c.execute("SELECT count(*) FROM fills WHERE liquidity = 'maker'").fetchone()
    assert ticks > 120
    assert resting > 0  # maxdiff rests limits: fills before a funding time's tick count too


def test_the_backtest_and_the_daemon_s_replay_book_the_same_perpetual(tmp_path):
    """One kernel: the backtest's own run and the daemon's replay of the perpetual (each
    tick through `runner.run_replay`, a ledger transaction each) hold the same rows in every
    table, funding and liquidations included."""
    settings = Settings(**LONG_SHORT, backtest={"cache_dir": tmp_path / "cache"})
    recordings = {"SOL/USDT": read_recording(BARS)}
    perp = load_perp_data(recordings.values(), HOUR_MS)

    def once(name: str, reference: bool) -> Backtest:
        return asyncio.run(
            run_backtest(
                settings, recordings, strategies=["simple", "maxdiff"], perp=perp,
                ledgers=tmp_path / name, progress=False, reference=reference,
            )
        )  # fmt: skip

    fast, reference = once("fast", False), once("reference", True)
    for strategy in ("simple", "maxdiff"):
        mine = ledger_rows(fast.runs[strategy].ledger)
        assert mine["funding"], strategy
        assert mine == ledger_rows(reference.runs[strategy].ledger), strategy
        assert fast.runs[strategy].funding == reference.runs[strategy].funding
