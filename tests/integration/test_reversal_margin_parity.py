"""A reversal's margin, judged the same by the futures emulator (through ccxt's `binanceusdm`)
and by the paper broker: the position closes first and its margin counts towards the new side.

Source: Binance FAQ "How to Calculate the Margin Requirement on Binance Futures Trading"
(https://www.binance.com/en/support/faq/4f83b65d83654b5e933f85ef12bf769d), one-way mode:
margin requirement = max(|position notional + bid order value|, |position notional - ask order
value|) / leverage. For a long of 1 at the mark and a sell of Q at the mark that is
max(1, Q - 1) x mark / leverage: the order asks only what (Q - 1) needs beyond the long's
margin, the same as "close (freeing its margin), then open Q - 1". Cost = initial margin + open
loss (FAQ 87fa7ee33b574f7084d42bd2ce2e463b): none here, the sell is placed at the mark.
The boundary is computed below from the venue's own fill, not from either implementation.
"""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal

import ccxt.async_support as ccxt
import pytest

from tests.integration.futures_setup import ETH, START, perps
from trader.broker.paper_perp import PaperPerps
from trader.domain import Fill, Liquidity, Order, OrderType, Portfolio, Side
from trader.domain.perp import MarginMode
from trader.domain.perp.default_brackets import default_brackets

pytestmark = pytest.mark.integration

SYMBOL = "ETH/USDT"
LEVERAGE = 10
MARK = Decimal(100)  # the harness's flat mark bars close at 100
STEP = Decimal("0.001")  # the emulated instrument's step size


def paper(entry: Decimal, commission: Decimal, wallet: Decimal, mode: MarginMode) -> PaperPerps:
    """The emulator's account (its entry fill and commission) on the paper broker."""
    fill = Fill("f-1", "o-1", SYMBOL, Side.BUY, entry, Decimal(1), commission, "USDT",
                Liquidity.TAKER, START)  # fmt: skip
    perps_ = PaperPerps(
        {SYMBOL}, {SYMBOL: default_brackets(SYMBOL)}, leverage=LEVERAGE,
        margin_mode=mode, currency="USDT",
    )  # fmt: skip
    perps_.see(Portfolio("USDT", wallet).apply(fill), {SYMBOL: MARK})
    return perps_


def sell(amount: Decimal) -> Order:
    return Order.create(
        strategy="s", symbol=SYMBOL, side=Side.SELL, type=OrderType.LIMIT, amount=amount,
        limit_price=MARK, tick_time=START, leg="a",
    )  # fmt: skip


@pytest.mark.parametrize("mode", [MarginMode.CROSS, MarginMode.ISOLATED])
async def test_a_reversal_frees_the_old_sides_margin_on_both_at_the_same_boundary(
    mode: MarginMode,
) -> None:
    """Isolated: closing returns the position's isolated wallet and its P&L at the mark to the
    cross wallet, so the same amount is free for the new side as in cross."""
    wallet = Decimal(100)
    async with perps(wallet=wallet) as p:
        if mode is MarginMode.ISOLATED:  # cross is the account's default
            await p.exchange.set_margin_mode("isolated", ETH)
        await p.exchange.set_leverage(LEVERAGE, ETH)
        await p.exchange.create_order(ETH, "market", "buy", 1)
        (opened,) = await p.exchange.fetch_my_trades(ETH)
        entry, commission = Decimal(str(opened["price"])), Decimal(str(opened["fee"]["cost"]))
        # After closing 1 at the mark the cross wallet holds what is left for the new side.
        after_close = wallet - commission + (MARK - entry)
        new_side = (after_close * LEVERAGE / MARK).quantize(STEP, rounding=ROUND_DOWN)
        fits, over = 1 + new_side, 1 + new_side + STEP
        # Were the long's margin still held, `fits` would need more than is available.
        assert (fits - 1) * MARK / LEVERAGE > after_close - MARK / LEVERAGE
        broker = paper(entry, commission, wallet, mode)

        assert broker.refusal(sell(fits), MARK, []) is None
        refused = broker.refusal(sell(over), MARK, [])
        assert refused is not None
        assert refused.startswith("-2019")

        with pytest.raises(ccxt.ExchangeError, match="-2019"):
            await p.exchange.create_order(ETH, "limit", "sell", float(over), float(MARK))
        placed = await p.exchange.create_order(ETH, "limit", "sell", float(fits), float(MARK))
        assert placed["status"] == "open"  # rests above the bid, not filled: judged on margin
