"""The Alpaca emulator's fees as Alpaca charges and posts them.

- Charged at the fill, from what it credits (`venue.Fees`): a crypto buy's fee in the coin, a
  sell's in dollars ("charged on the credited crypto asset/fiat (what you receive) per
  trade"); a stock sale's regulatory fees out of the proceeds ("deducted from sales
  proceeds"). So the coin held at Alpaca is smaller than the fill's quantity from the fill on.
- Posted after the end of the fill's day, New York's (the zone of Alpaca's account days; "Fees
  are currently calculated and posted end of day. If you query on same day of trade you might
  not get results"): one CFEE per crypto fill (the documented record carries one fill's
  price), and for stocks one FEE per day, symbol and kind (REG, TAF), the sum of each fill's
  fee rounded up to the cent: Alpaca's REG and TAF fees are "charged across multiple trades
  for a period" (changelog 2026-10-21). A zero fee is not posted.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

from trader.emulator.alpaca_wire import fee_json, regulatory_fee_json
from trader.emulator.sessions import NEW_YORK
from trader.emulator.venue import Account, Fees, Venue
from trader.market.alpaca.fees import CRYPTO_TIERS, regulatory_fees

FEE_KINDS = ("CFEE", "FEE")


def crypto_fees(tier: int = 1) -> Fees:
    maker, taker = CRYPTO_TIERS[tier]
    return Fees(maker=maker, taker=taker)


def _sale_fee(price: Decimal, qty: Decimal, at: datetime) -> Decimal:
    sec, taf = regulatory_fees(price, qty, fee_day(at))
    return sec + taf


# Stocks: no commission; a sale pays the SEC's and FINRA's fees.
STOCK_FEES = Fees(maker=Decimal(0), taker=Decimal(0), on_sale=_sale_fee)


def fee_day(at: datetime) -> date:
    return at.astimezone(NEW_YORK).date()


def fee_activities(kind: str, account: Account, venue: Venue) -> list[dict[str, Any]]:
    """The account's `kind` fee activities posted by now: those of days that have ended."""
    today = fee_day(venue.clock())
    cfee: list[dict[str, Any]] = []
    days: dict[tuple[date, str], list[Decimal]] = {}  # (day, symbol): [REG, TAF]
    for trade in account.trades:
        day = fee_day(trade.time)
        if day >= today or not trade.commission:
            continue
        instrument = venue.instrument(trade.symbol)
        if instrument.asset_class == "crypto":
            cfee.append(fee_json(trade, instrument))
        elif not trade.is_buyer:
            sums = days.setdefault((day, trade.symbol), [Decimal(0), Decimal(0)])
            for index, part in enumerate(regulatory_fees(trade.price, trade.qty, day)):
                sums[index] += part
    if kind == "CFEE":
        return cfee
    return [
        regulatory_fee_json(name, day, venue.instrument(symbol), amount)
        for (day, symbol), parts in days.items()
        for name, amount in zip(("REG", "TAF"), parts, strict=True)
        if amount
    ]
