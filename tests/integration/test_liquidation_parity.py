"""One liquidation model, two bookings: the futures emulator (what ccxt's `binanceusdm` sees) and
the paper engine's perp stage are fed the same account and the same mark path and must end on
the same wallet, to the cent.

The model is `trader.domain.perp.liquidation_fill` (Binance "Liquidation Protocol", mirror
https://docs.traderwagon.com/faq/futures-trading-introduction/liquidation-protocol, and the
Insurance Fund FAQ https://www.binance.com/en/support/faq/360033525371; the module says which
part is Binance's and which is ours). The cases: a mark that triggers on the solvent side with
the fee capped by the margin left (50 bps > the 0.4 % maintenance ratio) and paid whole
(10 bps), and a mark that gaps through the bankruptcy price; isolated and cross.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from tests.integration.futures_setup import ETH, START, Perps, perps, spec, with_bar
from trader.broker import PaperBroker
from trader.config.trading_settings import BrokerSettings
from trader.domain import Fill, Instrument, Liquidity, Portfolio, Side, decimal_from_float
from trader.domain.perp import MarginMode
from trader.domain.perp.default_brackets import default_brackets
from trader.engine.account import Account
from trader.engine.perps import PerpBook, PerpTerms
from trader.engine.report import TickReport
from trader.ledger.trading import LedgerState
from trader.logging import get_logger
from trader.market.files.funding import MarkCandle, MarkPrices
from trader.market.replay_perp import PerpTape

SYMBOL = "ETH/USDT"
CENT = Decimal("0.01")
LEVERAGE = 10


def d(value: object) -> Decimal:
    return Decimal(str(value))


async def emulator_wallet(p: Perps, mode: str, offset: float) -> tuple[Decimal, Decimal, float]:
    """Open long 1 ETH at `LEVERAGE`, put the 11:00 mark bar's low `offset` above the
    bankruptcy price, let the 12:00 check run: the entry, the commission, the low."""
    if mode == "isolated":  # cross is the account's default ("No need to change" otherwise)
        await p.exchange.set_margin_mode(mode, ETH)
    await p.exchange.set_leverage(LEVERAGE, ETH)
    await p.exchange.create_order(ETH, "market", "buy", 1)
    (opened,) = await p.exchange.fetch_my_trades(ETH)
    entry, commission = d(opened["price"]), d(opened["fee"]["cost"])
    wallet = d((await p.exchange.fetch_balance())["USDT"]["total"])
    margin = entry / LEVERAGE if mode == "isolated" else wallet
    low = float(entry - margin) + offset  # size 1: bankruptcy = entry - margin
    listing = p.venue.perps.listing("ETHUSDT")
    assert listing is not None
    listing.mark_bars = with_bar(listing.mark_bars, 11, low, 100.2, 100.0)
    listing.__post_init__()
    p.advance(12)
    assert await p.exchange.fetch_positions() == []  # liquidated
    return entry, commission, low


async def paper_wallet(
    start: Decimal, entry: Decimal, commission: Decimal, low: float, mode: MarginMode, bps: int
) -> Decimal:
    """The same account on the paper engine, through its perp stage at the same mark."""
    fill = Fill("f-1", "o-1", SYMBOL, Side.BUY, entry, Decimal(1), commission, "USDT",
                Liquidity.TAKER, START + timedelta(hours=10))  # fmt: skip
    portfolio = Portfolio("USDT", start).apply(fill)
    last = START + timedelta(hours=11)
    state = LedgerState(portfolio, start, [], {}, {}, None, None, last, {})
    broker = PaperBroker(BrokerSettings(), {SYMBOL: Instrument(SYMBOL, CENT, Decimal("0.001"))})
    books = Account(state, broker, get_logger("test"))
    candle = MarkCandle(int(last.timestamp() * 1000), Decimal(100), Decimal("100.2"),
                        decimal_from_float(low), Decimal(100))  # fmt: skip
    tape = PerpTape(SYMBOL, (), MarkPrices((candle,), 3_600_000))
    terms = PerpTerms(LEVERAGE, mode, {SYMBOL: default_brackets(SYMBOL)}, Decimal(bps))
    at = last + timedelta(hours=1)
    await PerpBook({SYMBOL: tape}, terms, broker, get_logger("test")).run(
        at, books, TickReport(at), {SYMBOL: Decimal(100)}
    )
    assert books.portfolio.amount(SYMBOL) == 0  # liquidated
    return books.portfolio.cash  # flat: the cash is the wallet


@pytest.mark.parametrize(
    ("mode", "start", "offset", "bps"),
    [
        ("isolated", Decimal(1000), 0.15, 50),  # solvent trigger, fee capped by what is left
        ("isolated", Decimal(1000), 0.2, 10),  # solvent trigger, fee paid whole
        ("isolated", Decimal(1000), -3.0, 50),  # a gap through the bankruptcy price
        ("cross", Decimal(30), 0.15, 50),
        ("cross", Decimal(30), 0.2, 10),
        ("cross", Decimal(30), -3.0, 50),
    ],
)
async def test_the_emulator_and_the_paper_engine_end_on_the_same_wallet(
    mode: str, start: Decimal, offset: float, bps: int
) -> None:
    rate = Decimal(bps) / 10_000
    async with perps(spec("ETH"), wallet=start, liquidation_fee=rate) as p:
        entry, commission, low = await emulator_wallet(p, mode, offset)
        emulated = d((await p.exchange.fetch_balance())["USDT"]["total"])
    paper = await paper_wallet(start, entry, commission, low, MarginMode(mode), bps)
    assert emulated.quantize(CENT) == paper.quantize(CENT)
    assert emulated >= 0
    if mode == "isolated":  # the rest of the account never pays for it: at most the margin
        assert emulated >= start - commission - entry / LEVERAGE
