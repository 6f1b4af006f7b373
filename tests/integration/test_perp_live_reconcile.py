"""Reconciling a perp account on the futures emulator: positions, funding and the wallet.

Sources: Binance "Position Information V3" (positionAmt, entryPrice, markPrice,
unRealizedProfit, liquidationPrice, isolatedMargin, notional, positionInitialMargin), "Get
Income History" (FUNDING_FEE rows, tranId), "Introduction to Binance Futures Funding Rates"
(FAQ 360033525031: funding = position value at the mark x rate; longs pay shorts when it is
positive), Binance's balances FAQ (margin balance = wallet balance + unrealised PnL); ccxt
4.5.90 binance.py `fetch_positions`, `fetch_funding_history`, `fetch_balance`.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from tests.integration.futures_setup import ETH, SOL, at, spec
from tests.integration.perp_live_setup import perp_live
from trader.domain import Side
from trader.emulator.futures_market import FundingEvent

pytestmark = pytest.mark.integration


def event(hour: float, rate: str, mark: str) -> FundingEvent:
    return FundingEvent(at(hour, 0), Decimal(rate), Decimal(mark))


FUNDING = [event(12, "0.0001", "100"), event(16, "-0.0003", "100.5"), event(20, "0.0002", "99")]


async def test_positions_funding_and_wallet_agree_after_trading() -> None:
    eth = spec("ETH", funding=FUNDING)
    async with perp_live(eth, spec("SOL", price=50.0), margin_mode="isolated") as live:
        await live.submit(live.order(Side.BUY, "2"))  # long ETH
        await live.submit(live.order(Side.SELL, "4", symbol=SOL))  # short SOL
        await live.submit(live.order(Side.SELL, "0.5"))  # part of the ETH long back
        await live.advance(11)  # past all three ETH funding times (start 10:00:05)
        report = await live.broker.reconcile(live.ledger(), live.now)
        assert report.ok, report.text
        # Funding as the test computes it from the series it gave: mark x size x rate, paid by
        # the long when the rate is positive (1.5 ETH long through every settlement).
        expected = [-(e.mark * Decimal("1.5") * e.rate) for e in FUNDING]  # type: ignore[operator]
        booked = sorted((await live.funding.booked()).values(), key=lambda r: r.at)
        assert [r.amount for r in booked] == expected
        assert [r.at for r in booked] == [e.time for e in FUNDING]
        assert {r.symbol for r in booked} == {ETH}
        # The wallet: the venue's, equal to what the ledger implies with funding.
        (wallet,) = report.balances
        assert wallet.actual == live.p.account.wallet
        assert wallet.ok
        assert abs(wallet.difference) <= wallet.pending
        # Each position is described with its side, size, leverage, mode and liquidation.
        lines = "\n".join(report.notes)
        assert f"{ETH}: long 1.5" in lines
        assert f"{SOL}: short 4" in lines
        assert "5x isolated" in lines
        # ... and as the report's positions (helper F's PositionRisk), from the venue's figures.
        risks = {r.symbol: r for r in report.positions}
        assert set(risks) == {ETH, SOL}
        assert risks[ETH].size == Decimal("1.5")
        assert risks[SOL].size == Decimal(-4)
        assert (risks[ETH].leverage, risks[ETH].margin_mode) == (5, "isolated")
        assert risks[ETH].funding_paid == -sum((r.amount for r in booked), Decimal(0))
        long_lp, short_lp = risks[ETH].liquidation_price, risks[SOL].liquidation_price
        assert long_lp is not None
        assert short_lp is not None
        assert long_lp < risks[ETH].mark  # a long's is below the mark
        assert short_lp > risks[SOL].mark  # a short's above
        assert "liquidation" in lines
        # A second reconciliation books no funding twice.
        again = await live.broker.reconcile(live.ledger(), live.now)
        assert again.ok, again.text
        assert len(await live.funding.booked()) == len(FUNDING)
        assert not [n for n in again.notes if n.startswith("funding")]


async def test_funding_left_out_of_the_wallet_would_be_a_mismatch() -> None:
    async with perp_live(spec("ETH", funding=FUNDING)) as live:
        await live.submit(live.order(Side.BUY, "3"))
        await live.advance(11)
        report = await live.broker.reconcile(live.ledger(), live.now)
        assert report.ok, report.text
        # The same ledger, with a venue that pays one more funding row the ledger never saw
        # booked: the wallet differs by exactly that row.
        paid = live.p.account.wallet
        live.p.account.wallet = paid - Decimal("0.25")
        bad = await live.broker.reconcile(live.ledger(), live.now)
        assert not bad.ok
        (wallet,) = bad.balances
        assert abs(wallet.difference + Decimal("0.25")) <= wallet.pending


async def test_a_ledger_whose_position_differs_from_the_venues_is_a_problem() -> None:
    async with perp_live() as live:
        await live.submit(live.order(Side.BUY, "2"))
        ledger = live.ledger()
        fill = live.fills[0]
        # The ledger booked a fill the venue never made: 1 ETH more.
        made_up = replace(fill, fill_id="ETHUSDT-999999", amount=Decimal(1))
        from trader.domain import Portfolio  # noqa: PLC0415

        book = replace(
            ledger,
            portfolio=Portfolio.from_fills("USDT", live.wallet, [*live.fills, made_up]),
            booked_fills=ledger.booked_fills | {made_up.fill_id},
        )
        report = await live.broker.reconcile(book, live.now)
        assert not report.ok
        assert any("the venue's position is 2, the ledger's 3" in p for p in report.problems), (
            report.problems
        )


async def test_a_position_at_another_leverage_is_a_problem() -> None:
    async with perp_live(max_leverage=5) as live:
        await live.submit(live.order(Side.BUY, "2"))
        await live.p.exchange.set_leverage(10, ETH)  # changed behind the daemon's back
        report = await live.broker.reconcile(live.ledger(), live.now)
        assert not report.ok
        assert any("at 10x, not 5x" in p for p in report.problems), report.problems


async def test_cross_margin_positions_reconcile() -> None:
    async with perp_live(
        spec("ETH", funding=FUNDING), margin_mode="cross", max_leverage=10
    ) as live:
        await live.submit(live.order(Side.SELL, "2"))  # a short receives positive funding
        await live.advance(11)
        report = await live.broker.reconcile(live.ledger(), live.now)
        assert report.ok, report.text
        booked = sorted((await live.funding.booked()).values(), key=lambda r: r.at)
        assert [r.amount for r in booked] == [e.mark * 2 * e.rate for e in FUNDING]  # type: ignore[operator]
        assert any("10x cross" in n for n in report.notes)
