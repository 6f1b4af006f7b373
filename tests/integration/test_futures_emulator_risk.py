"""Funding and liquidation on the futures emulator, through ccxt's real `binanceusdm`.

Sources: funding = position size x mark price x funding rate, longs pay shorts when the rate
is positive (Binance "Introduction to Funding Rates", binance.com/en/support/faq/
360033525031), at each symbol's own times (intervals 8h, 4h, 1h: fundingInfo's
fundingIntervalHours); income rows FUNDING_FEE and INSURANCE_CLEAR (Binance USDⓈ-M "Get
Income History" incomeType list); liquidation when margin balance <= maintenance margin on the
mark price, open orders cancelled (Binance "Liquidation Protocol", mirror
docs.traderwagon.com/faq/futures-trading-introduction/liquidation-protocol); the close price
and the fee by our model `trader.domain.perp.liquidation_fill` (closed at the mark that
triggered it, or at the bankruptcy price through a gap; the fee only out of the margin left
above zero; prices to 1e-8 in the user's favour), restated here by hand. Binance "Leverage
and Margin of USDⓈ-M Futures", FAQ 360033162192, for the isolated liquidation price of one
position in one bracket: LP = (WB + cum - side x size x EP) / (size x MMR - side x size),
computed here independently of the emulator, which checks the margin directly at each mark
bar.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

import pytest

from tests.integration.futures_setup import (
    ETH,
    SOL,
    TAKER,
    Perps,
    at,
    perps,
    spec,
    with_bar,
)
from trader.domain import decimal_from_float
from trader.emulator.futures_market import FundingEvent

pytestmark = pytest.mark.integration
EIGHT = Decimal("1e-8")
MMR = Decimal("0.004")  # the first bracket's maintenance ratio (cum 0)


def d(value: object) -> Decimal:
    return Decimal(str(value))


def event(hour: float, rate: str, mark: str) -> FundingEvent:
    return FundingEvent(at(hour, 0), Decimal(rate), Decimal(mark))


async def income(p: Perps, kind: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = await p.exchange.fapiPrivateGetIncome(
        {"incomeType": kind, "limit": 1000}
    )
    return rows


async def test_funding_is_rate_x_mark_x_size_at_each_symbols_own_times() -> None:
    # ETH settles at 12:00, then every 4h, then every hour; SOL on the default 8h grid.
    eth = [event(8, "0.0001", "100"), event(12, "0.0001", "101"), event(16, "-0.0002", "99.5"),
           event(17, "0.0003", "100.7"), event(18, "0.0001", "100.2")]  # fmt: skip
    sol = [event(8, "0.0002", "20"), event(16, "0.0005", "20.1"), event(24, "0.0001", "20")]
    async with perps(spec("ETH", funding=eth), spec("SOL", price=20.0, funding=sol)) as p:
        await p.exchange.create_order(ETH, "market", "buy", 2)
        await p.exchange.create_order(SOL, "market", "sell", 5)
        p.advance(14)
        assert (await p.exchange.fetch_funding_interval(ETH))["interval"] == "4h"
        assert (await p.exchange.fetch_funding_intervals([SOL])) == {}  # 8h: not listed
        p.advance(17, 30 * 60)
        rate = await p.exchange.fetch_funding_rate(ETH)
        assert rate["interval"] is None
        assert rate["fundingTimestamp"] == int(at(18, 0).timestamp() * 1000)
        assert (await p.exchange.fetch_funding_interval(ETH))["interval"] == "1h"
        p.advance(18)
        opened = at(10)
        sizes = {ETH: Decimal(2), SOL: Decimal(-5)}
        for symbol, series in ((ETH, eth), (SOL, sol)):
            held = [e for e in series if opened < e.time <= at(18)]
            expected = [-(sizes[symbol] * Decimal(str(e.mark)) * e.rate) for e in held]
            paid = await p.exchange.fetch_funding_history(symbol)
            assert [d(x["info"]["income"]) for x in paid] == expected
            assert [x["timestamp"] for x in paid] == [int(e.time.timestamp() * 1000) for e in held]
        history = await p.exchange.fetch_funding_rate_history(ETH)
        assert [d(h["fundingRate"]) for h in history] == [e.rate for e in eth]
        total = sum((r.income for r in p.account.incomes), Decimal(0))
        assert p.account.wallet == Decimal(1000) + total


def liquidation_price(side: int, entry: Decimal, size: Decimal, wallet: Decimal) -> Decimal:
    """Binance's one-bracket formula (cum 0), for one position."""
    return (wallet - side * size * entry) / (size * MMR - side * size)


@pytest.mark.parametrize("rate", [Decimal("0.01"), Decimal("0.001")])  # capped, paid whole
@pytest.mark.parametrize("side", [1, -1])
async def test_an_isolated_position_is_liquidated_on_the_mark_not_before(
    side: int, rate: Decimal
) -> None:
    eth = spec("ETH")
    async with perps(eth, liquidation_fee=rate) as p:
        await p.exchange.set_margin_mode("isolated", ETH)
        await p.exchange.set_leverage(10, ETH)
        await p.exchange.create_order(ETH, "market", "buy" if side > 0 else "sell", 1)
        resting = await p.exchange.create_order(
            ETH, "limit", "sell" if side > 0 else "buy", 1, 100 + side * 20
        )
        (opened,) = await p.exchange.fetch_my_trades(ETH)
        entry, size = d(opened["price"]), Decimal(1)
        wallet = size * entry / 10  # the isolated margin: notional / leverage
        expected = liquidation_price(side, entry, size, wallet)
        shown = d((await p.exchange.fetch_positions())[0]["liquidationPrice"])
        assert abs(shown - expected) < Decimal("0.000001")
        # The mark comes within 2 cents of it at 11:00 (no liquidation), then passes it at 12:00.
        near, past = float(expected) + side * 0.02, float(expected) - side * 0.02
        listing = p.venue.perps.listing("ETHUSDT")
        assert listing is not None
        for hour, extreme in ((11, near), (12, past)):
            low, high = (extreme, 100.2) if side > 0 else (99.8, extreme)
            listing.mark_bars = with_bar(listing.mark_bars, hour, low, high, 100.0)
        listing.__post_init__()
        p.advance(12)
        assert len(await p.exchange.fetch_positions()) == 1
        p.advance(13)
        assert await p.exchange.fetch_positions() == []
        closing = (await p.exchange.fetch_my_trades(ETH))[-1]
        # Closed at the mark that triggered it (still solvent: margin there = MM - 2 cents > 0),
        # rounded to 1e-8 in the user's favour.
        mark = decimal_from_float(past).quantize(EIGHT, ROUND_CEILING if side > 0 else ROUND_FLOOR)
        assert d(closing["price"]) == mark
        assert closing["datetime"] == "2024-03-01T13:00:00.000Z"
        realised = side * size * (mark - entry)
        assert d(closing["info"]["realizedPnl"]) == realised
        (order,) = [o for o in p.venue.accounts[p.exchange.apiKey].orders.values()
                    if o.client_order_id.startswith("autoclose-")]  # fmt: skip
        assert order.type == "MARKET"
        assert (await p.exchange.fetch_order(resting["id"], ETH))["status"] == "canceled"
        # The fee, rate x notional closed, only out of what the isolated margin has left.
        left = wallet + realised
        fee = min((rate * size * mark).quantize(EIGHT, ROUND_CEILING), left)
        (booked,) = await income(p, "INSURANCE_CLEAR")
        assert d(booked["income"]) == -fee
        # The cross wallet never pays for an isolated liquidation: it gets back what is left.
        commission = (entry * size * TAKER).quantize(EIGHT)
        cross_before = Decimal(1000) - commission - wallet
        total = d((await p.exchange.fetch_balance())["USDT"]["total"])
        assert total == cross_before + left - fee >= cross_before


async def test_a_wick_in_the_last_price_alone_never_liquidates() -> None:
    eth = spec("ETH")
    eth.last = with_bar(eth.last, 11, 40.0, 100.5, 100.0)  # last price wicks to 40 at 11:00
    async with perps(eth) as p:
        await p.exchange.set_margin_mode("isolated", ETH)
        await p.exchange.set_leverage(20, ETH)
        await p.exchange.create_order(ETH, "market", "buy", 1)
        p.advance(13)
        (position,) = await p.exchange.fetch_positions()
        assert position["contracts"] == 1
        assert d(position["markPrice"]) == Decimal(100)
        assert await income(p, "INSURANCE_CLEAR") == []


async def test_a_cross_account_is_liquidated_on_its_whole_wallet() -> None:
    eth = spec("ETH")
    async with perps(eth, wallet=Decimal(30)) as p:
        await p.exchange.set_leverage(10, ETH)
        await p.exchange.create_order(ETH, "market", "buy", 1)
        (opened,) = await p.exchange.fetch_my_trades(ETH)
        entry = d(opened["price"])
        cross_wallet = Decimal(30) - (entry * TAKER).quantize(Decimal("1e-8"))
        expected = liquidation_price(1, entry, Decimal(1), cross_wallet)
        shown = d((await p.exchange.fetch_positions())[0]["liquidationPrice"])
        assert abs(shown - expected) < Decimal("0.000001")
        listing = p.venue.perps.listing("ETHUSDT")
        assert listing is not None
        bankruptcy = entry - cross_wallet  # size 1: where the margin balance is zero
        gap = float(bankruptcy) - 3  # the mark bar opens through it
        listing.mark_bars = with_bar(listing.mark_bars, 11, gap, 100.2, 100.0)
        listing.__post_init__()
        p.advance(12)
        assert await p.exchange.fetch_positions() == []
        closing = (await p.exchange.fetch_my_trades(ETH))[-1]
        assert d(closing["price"]) == bankruptcy.quantize(EIGHT, ROUND_CEILING)
        # The insurance fund takes the loss beyond; nothing is left for the liquidation fee:
        # the wallet ends at zero, never below.
        assert d((await p.exchange.fetch_balance())["USDT"]["total"]) == 0


async def test_a_loss_on_one_cross_position_liquidates_every_cross_position() -> None:
    """Cross margin shares one wallet: ETH's fall takes SOL with it, and the orders of every
    symbol are cancelled; together the closes lose exactly the cross wallet."""
    async with perps(spec("ETH"), spec("SOL", price=20.0), wallet=Decimal(60)) as p:
        for symbol in (ETH, SOL):
            await p.exchange.set_leverage(10, symbol)
        await p.exchange.create_order(ETH, "market", "buy", 1)
        await p.exchange.create_order(SOL, "market", "buy", 5)
        resting = await p.exchange.create_order(SOL, "limit", "sell", 1, 25)
        opened = {t["symbol"]: t for s in (ETH, SOL) for t in await p.exchange.fetch_my_trades(s)}
        cross_wallet = Decimal(60) - sum(
            ((d(t["price"]) * d(t["amount"]) * TAKER).quantize(Decimal("1e-8"))
             for t in opened.values()), Decimal(0),
        )  # fmt: skip
        listing = p.venue.perps.listing("ETHUSDT")
        assert listing is not None
        listing.mark_bars = with_bar(listing.mark_bars, 11, 40.0, 100.2, 100.0)  # SOL's stays
        listing.__post_init__()
        p.advance(12)
        assert await p.exchange.fetch_positions() == []
        assert (await p.exchange.fetch_order(resting["id"], SOL))["status"] == "canceled"
        closes = [(await p.exchange.fetch_my_trades(s))[-1] for s in (ETH, SOL)]
        realised = sum((d(c["info"]["realizedPnl"]) for c in closes), Decimal(0))
        # Through the bankruptcy price: the closes lose the cross wallet, to the 1e-8 rounding
        # in the user's favour, which the fee then takes.
        assert 0 <= realised + cross_wallet < Decimal("1e-7")
        assert (await p.exchange.fetch_balance())["USDT"]["total"] == 0
