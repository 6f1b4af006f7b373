"""The paper broker's fill cap (broker.max_volume_share of a bar's volume) on a symbol whose
volume is unknown: a file without a volume column (the VIX index, vega-datasets) has bars
that say 0, which the cap must not read as "nothing traded"."""

from __future__ import annotations

from decimal import Decimal
from itertools import pairwise

from tests.recorded import VIX_1D_NO_VOLUME
from trader.broker import PaperBroker
from trader.config.trading_settings import BrokerSettings
from trader.domain import (
    Bar,
    Instrument,
    Order,
    OrderStatus,
    OrderType,
    Quote,
    QuoteSource,
    Side,
    decimal_from_float,
)
from trader.market.hygiene import parse_row
from trader.market.replay import read_recording

SYMBOL = "VIX/USD"
RULES = Instrument(SYMBOL, Decimal("0.01"), Decimal("0.001"))


def bars() -> list[Bar]:
    recording = read_recording(VIX_1D_NO_VOLUME, SYMBOL)
    parsed = [parse_row(row, SYMBOL, recording.timeframe) for row in recording.rows]
    assert all(isinstance(b, Bar) for b in parsed)
    return [b for b in parsed if isinstance(b, Bar)]


async def rest_and_trade_through(broker: PaperBroker) -> Order:
    """A limit buy under the market at one bar's close, then the next bar that trades below
    it: the order it leaves."""
    series = bars()
    before, after = next((a, b) for a, b in pairwise(series) if b.low < min(a.close, b.open))
    limit = decimal_from_float(round((after.low + min(before.close, after.open)) / 2, 2))
    close = decimal_from_float(before.close)
    quote = Quote(SYMBOL, close, close + Decimal("0.05"), before.end, QuoteSource.MODELLED)
    order = Order.create(
        strategy="t", symbol=SYMBOL, side=Side.BUY, type=OrderType.LIMIT, amount=Decimal(3),
        limit_price=limit, tick_time=before.end, leg="a",
    )  # fmt: skip
    sent = await broker.submit(order, quote, before.end)
    assert sent.order.status is OrderStatus.OPEN  # under the ask: it rests
    assert after.volume == 0.0  # what the bars say: no volume known
    done = await broker.on_market([after], {}, after.end)
    return done[0].order if done else sent.order


async def test_an_unknown_volume_does_not_cap_a_resting_fill_at_zero():
    settings = BrokerSettings(max_volume_share=0.1)
    unknown = PaperBroker(settings, {SYMBOL: RULES}, unknown_volume={SYMBOL})
    filled = await rest_and_trade_through(unknown)
    assert filled.status is OrderStatus.FILLED
    assert filled.filled_amount == Decimal(3)
    # Where the bars' 0 is a real volume (nothing traded), the same bar fills nothing.
    known = PaperBroker(settings, {SYMBOL: RULES})
    resting = await rest_and_trade_through(known)
    assert resting.status is OrderStatus.OPEN
    assert resting.filled_amount == 0
