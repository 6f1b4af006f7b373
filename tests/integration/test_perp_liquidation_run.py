"""The issue's acceptance run: a short on the futures emulator whose MARK climbs step by step
towards its liquidation price, traded by the engine's live path (the orders stage with the
liquidation buffer rule, `PerpLiveBroker` on the real ccxt `binanceusdm`, a SQLite ledger, the
engine's reconciliation).

- Rule on (`risk.liquidation_buffer` 0.05): the engine sends a reduce-only order before the
  mark reaches the liquidation price; the emulator never liquidates; afterwards the position is
  outside the buffer by the venue's own liquidation price.
- Rule off (0): the emulator liquidates at the mark bar that crosses the price; after the
  engine's reconciliation the ledger's position is flat and its loss is the emulator's.

Sources:
- Binance "Liquidation Protocol" (mirror: docs.traderwagon.com/faq/futures-trading-introduction/
  liquidation-protocol) and "Leverage and Margin of USDⓈ-M Futures" (FAQ 360033162192):
  liquidation when the margin balance falls to the maintenance margin on the MARK price, the
  position closed at the bankruptcy price; cross: LP = (WB - side x size x EP) / (size x MMR -
  side x size) for one position in the first bracket (cum 0), written out in `lp_one_bracket`.
- Helper B's emulator notes (WIP-44-B.md, `trader/emulator/futures_settle.py`): the check runs
  at each closed mark bar's adverse extreme, the close is at the bankruptcy price, its fee is an
  INSURANCE_CLEAR income row (Binance "Get Income History" income types).
- Position Information V3 (developers.binance.com, USDⓈ-M): `liquidationPrice`, `markPrice`.

Each tick runs the pipeline's perp stage (`PerpBook`, on the quotes' mid as the closes), the
orders stage (the guard) and the ledger stage, with no strategy decision. The engine values a
perpetual on the mark its perp stage's tape gives it; a live daemon has no mark tape yet
(`runner.perp_book` with `tapes=None` values on the quotes' mid), so here `VenueMarkTape` reads
the venue's last closed mark candle through ccxt's `fetch_mark_ohlcv` (GET
/fapi/v1/markPriceKlines) before each tick: see WIP-44-H.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.integration.futures_setup import ETH, HOUR, START, PerpSpec
from tests.integration.perp_live_setup import PerpLive, perp_live
from trader.config.schema import Settings
from trader.domain import Bar, Quote, QuoteSource, Side
from trader.domain.order import client_order_id
from trader.domain.perp import MarginMode
from trader.emulator.market import Instrument as Listing
from trader.engine.account import Account
from trader.engine.admission import Admission
from trader.engine.booking import TickBooking
from trader.engine.liquidation_guard import LiquidationGuard
from trader.engine.perps import PerpBook, perp_book
from trader.engine.planning import Planner
from trader.engine.reconciling import reconcile_ledger
from trader.engine.report import TickReport
from trader.engine.routing import OrderRouting
from trader.engine.write_outage import WriteOutage
from trader.ledger import Database
from trader.ledger.reconciliation import ReconciliationLedger
from trader.ledger.trading import TradingLedger
from trader.logging import get_logger
from trader.market.files.funding import FundingRate
from trader.market.quotes import FixedSpread
from trader.market.replay import ReplayMarketData
from trader.market.step import MarketDataStep, SymbolData, TickData
from trader.risk import RiskEngine, TradingState, TradingStatus

pytestmark = pytest.mark.integration
D = Decimal
WALLET = D(1000)
SIZE = D(20)  # the short: 20 ETH at 100, 2,000 notional, 5x
RISE_FROM, STEP = 10, 1.02  # the mark (and the last price with it) +2% an hour from 10:00
MMR = D("0.004")  # Binance BTCUSDT's first bracket (the emulator's default), cum 0


def price(hour: int) -> float:
    return 100.0 if hour < RISE_FROM else round(100.0 * STEP ** (hour - RISE_FROM + 1), 2)


def rising(symbol: str, spread: float) -> list[Bar]:
    """Hourly bars whose close climbs 2% an hour from 10:00; the high is the close (+spread)."""
    return [
        Bar(symbol, HOUR, START + n * HOUR.duration, price(n - 1) if n else 100.0,
            price(n) + spread, min(price(n - 1) if n else 100.0, price(n)) - spread,
            price(n), 1000.0)
        for n in range(48)
    ]  # fmt: skip


def eth_rising() -> PerpSpec:
    return PerpSpec(
        Listing("ETH/USDT", min_notional=D(20)), rising("ETH/USDT", 0.05), rising("ETH/USDT", 0)
    )


def lp_one_bracket(side: int, entry: Decimal, size: Decimal, wallet: Decimal) -> Decimal:
    """Binance's liquidation price of one position in the first bracket (cum 0)."""
    return (wallet - side * size * entry) / (size * MMR - side * size)


@dataclass
class VenueMarkTape:
    """A live perp stage's tape (`PerpTapeLike`): the venue's last closed mark candle, read
    before each tick; no recorded funding (the venue books it, reconciliation brings it)."""

    latest: Decimal | None = None

    def funding_due(self, after: datetime | None, until: datetime) -> list[FundingRate]:
        return []

    def mark(self, at: datetime) -> Decimal | None:
        return self.latest

    def funding_mark(self, rate: FundingRate) -> Decimal | None:
        return None

    def adverse_mark(self, after: datetime | None, until: datetime, long: bool) -> Decimal | None:
        return None


class NoHooks:
    def on_tick(self, report: TickReport) -> None: ...

    def on_state(self, status: TradingStatus) -> None: ...


@dataclass
class Run:
    live: PerpLive
    ledger: TradingLedger
    account: Account
    routing: OrderRouting
    booking: TickBooking
    risk: RiskEngine
    planner: Planner
    perps: PerpBook
    tape: VenueMarkTape

    @property
    def now(self) -> datetime:
        return self.live.now

    async def venue_mark(self) -> Decimal:
        """The close of the last mark candle closed by now, as the venue serves it."""
        exchange = self.live.broker.exchange
        candles = await exchange.fetch_mark_ohlcv(ETH, "1h", limit=3)
        closed = [c for c in candles if c[0] + 3_600_000 <= self.now.timestamp() * 1000]
        return D(str(closed[-1][4]))

    async def tick(self) -> TickReport:
        """One engine tick's orders and ledger stages, no strategy decision, on the venue's
        quote and mark."""
        at = self.now
        self.account.begin_tick()
        self.tape.latest = await self.venue_mark()
        quote = self.live.quote()
        fresh = Quote(ETH, quote.bid, quote.ask, at, QuoteSource.REAL)
        data = TickData(at, {ETH: SymbolData(ETH, (), fresh)}, {})
        report = TickReport(at)
        # The pipeline's perp stage, on the quotes' mid as the closes (as `Engine.tick`).
        await self.perps.run(at, self.account, report, {ETH: fresh.mid})
        await self.routing.run({}, data, at, report, self.planner, True)
        await self.booking.commit(data, at, report, NoHooks())
        return report


def settings(buffer: float) -> Settings:
    return Settings(
        market={"symbols": [ETH], "context_bars": 16, "kind": "perp"},
        risk={"liquidation_buffer": buffer, "max_leverage": 5.0, "min_edge_bps": 0.0,
              "max_order_notional": 100_000, "max_position_notional": 100_000,
              "max_total_exposure": 100_000},
        broker={"slippage_bps": 0, "margin_mode": "cross"},
    )  # fmt: skip


@asynccontextmanager
async def engine_on_emulator(tmp_path: Path, buffer: float, margin: str) -> AsyncIterator[Run]:
    config = settings(buffer)
    async with perp_live(eth_rising(), margin_mode=margin, max_leverage=5) as live:
        database = await Database.open(tmp_path / "ledger.sqlite3")
        try:
            ledger = TradingLedger(database)
            state = await ledger.open("USDT", WALLET)
            await ReconciliationLedger(database).set_baseline({"USDT": WALLET}, live.now)
            log = get_logger("trader.engine")
            risk = RiskEngine(
                config.risk, maker_fee_bps=2.0, taker_fee_bps=5.0,
                max_quote_age=timedelta(seconds=30),
                status=TradingStatus(TradingState.ACTIVE, "started", live.now),
            )  # fmt: skip
            account = Account(state, live.broker, log)
            terms = live.broker.terms
            assert terms is not None  # prepared: the venue's brackets and the leverage set
            mode = MarginMode.CROSS if margin == "cross" else MarginMode.ISOLATED
            guard = LiquidationGuard(
                risk, terms.brackets, terms.leverage, mode, {ETH: "simple"}, log
            )
            replay = ReplayMarketData({}, live.p.clock, FixedSpread(5))
            market = MarketDataStep(replay, config.market)
            routing = OrderRouting(
                market=market, broker=live.broker, ledger=ledger, instruments=live.instruments,
                account=account, admission=Admission(risk, log, perp=True), log=log, guard=guard,
            )  # fmt: skip
            outage = WriteOutage(risk, tmp_path, log)
            booking = TickBooking(
                market=market, risk=risk, ledger=ledger, account=account, outage=outage, log=log
            )
            tape = VenueMarkTape()
            perps = perp_book(config, live.broker, {ETH: tape}, log)
            assert perps is not None
            run = Run(
                live, ledger, account, routing, booking, risk, Planner.of(config), perps, tape
            )
            yield run
        finally:
            await database.close()


async def open_short(run: Run) -> None:
    """The short, sent and booked as the engine does (recorded before it leaves)."""
    run.account.begin_tick()
    order = run.live.order(Side.SELL, str(SIZE))
    await run.ledger.record_orders([order], run.now, "created")
    execution = await run.live.broker.submit(order, run.live.quote(), run.now)
    report = TickReport(run.now)
    report.marks = {ETH: await run.venue_mark()}
    run.account.book([execution], report)
    data = TickData(run.now, {}, {})
    await run.booking.commit(data, run.now, report, NoHooks())
    assert run.account.portfolio.amount(ETH) == -SIZE


async def venue_position(run: Run) -> dict[str, Any] | None:
    positions = await run.live.broker.exchange.fetch_positions([ETH])
    return positions[0] if positions else None


async def insurance_rows(run: Run) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = await run.live.broker.exchange.fapiPrivateGetIncome(
        {"incomeType": "INSURANCE_CLEAR", "limit": 1000}
    )
    return rows


@pytest.mark.parametrize("margin", ["cross", "isolated"])
async def test_the_rule_reduces_the_short_before_the_venue_would_liquidate_it(
    tmp_path: Path, margin: str
) -> None:
    async with engine_on_emulator(tmp_path, 0.05, margin) as run:
        await open_short(run)
        first = await venue_position(run)
        assert first is not None
        lp = D(str(first["liquidationPrice"]))
        entry = D(str(first["entryPrice"]))
        # The venue's price is Binance's formula on the margin at stake: the cross wallet
        # (1,000 less the opening fee), or the isolated margin (notional / 5 at entry).
        fee = (entry * SIZE * D("0.0005")).quantize(D("1e-8"))
        at_stake = WALLET - fee if margin == "cross" else entry * SIZE / 5
        assert abs(lp - lp_one_bracket(-1, entry, SIZE, at_stake)) < D("0.000001")
        reductions: list[Decimal] = []  # the mark at each reduction
        for hour in range(RISE_FROM + 1, 40):
            run.live.p.advance(hour)
            mark = await run.venue_mark()
            report = await run.tick()
            held = await venue_position(run)
            if not report.orders:
                if held is None:  # closed whole by the rule (isolated), never liquidated
                    assert reductions, f"liquidated at {hour}:00"
                    assert run.account.portfolio.amount(ETH) == 0
                else:
                    assert mark < D(str(held["liquidationPrice"]))
                continue
            [order] = report.orders
            assert order.side is Side.BUY
            assert order.client_order_id == client_order_id(
                "simple", ETH, run.now, "liquidation_buffer"
            )
            # The account lost more than the daily limit long before: the halt lets the
            # reduction through (and nothing else).
            assert run.risk.state is TradingState.HALTED
            # On the wire: reduce-only (the emulator's own record of the order).
            assert list(run.live.p.account.orders.values())[-1].reduce_only is True
            reductions.append(mark)
            # Afterwards still short (or flat), outside the buffer by the venue's own price.
            if held is not None:
                lp_after = D(str(held["liquidationPrice"]))
                assert (lp_after - mark) / mark >= D("0.05")
            assert run.account.portfolio.amount(ETH) == -D(str(held["contracts"] if held else 0))
        assert reductions
        assert reductions[0] < lp
        # The venue never liquidated: no liquidation order of its own, no clearance fee.
        venue_orders = run.live.p.account.orders.values()
        assert not [o for o in venue_orders if o.client_order_id.startswith("autoclose-")]
        assert await insurance_rows(run) == []
        reconciled = await reconcile_ledger(run.live.broker, run.ledger, run.now)
        assert reconciled.problems == ()


@pytest.mark.parametrize("margin", ["cross", "isolated"])
async def test_with_the_rule_off_the_venues_liquidation_is_booked_exactly(
    tmp_path: Path, margin: str
) -> None:
    async with engine_on_emulator(tmp_path, 0.0, margin) as run:
        await open_short(run)
        first = await venue_position(run)
        assert first is not None
        lp = D(str(first["liquidationPrice"]))
        crossed = None
        for hour in range(RISE_FROM + 1, 40):
            run.live.p.advance(hour)
            report = await run.tick()
            assert report.orders == []
            if await venue_position(run) is None:
                crossed = hour - 1  # the mark bar that closed at this tick
                break
        assert crossed is not None
        assert D(str(price(crossed))) >= lp > D(str(price(crossed - 1)))
        exchange = run.live.broker.exchange
        *opening, last = await exchange.fetch_my_trades(ETH)
        opening_fee = sum(D(t["info"]["commission"]) for t in opening)
        closing = last["info"]
        assert closing["orderId"] not in {t["info"]["orderId"] for t in opening}
        clearance = sum(D(row["income"]) for row in await insurance_rows(run))
        reconciled = await reconcile_ledger(run.live.broker, run.ledger, run.now)
        assert reconciled.problems == ()
        state = await run.ledger.load()
        # Flat, the venue's close booked as the venue booked it: price, amount, fee, P&L.
        assert state.portfolio.amount(ETH) == 0
        [booked] = [e for e in reconciled.executions if e.fills]
        [fill] = booked.fills
        assert (fill.side, fill.price, fill.amount) == (
            Side.BUY,
            D(closing["price"]),
            D(closing["qty"]),
        )
        assert fill.fee == D(closing["commission"]) - clearance
        assert state.portfolio.realized_pnl[ETH] == D(closing["realizedPnl"])
        assert state.portfolio.fees_paid == opening_fee + fill.fee
        wallet = D(str((await exchange.fetch_balance())["USDT"]["total"]))
        assert state.portfolio.cash == wallet
        # The loss is the margin at stake (Binance's Liquidation Protocol): the isolated
        # position's whole margin (its notional / 5 at entry); a cross account's whole wallet.
        if margin == "isolated":
            margin_at_entry = D(str(first["entryPrice"])) * SIZE / 5
            assert wallet == WALLET - opening_fee - margin_at_entry
            assert clearance < 0  # what was left of the margin went to the insurance fund
        else:
            assert wallet == 0
