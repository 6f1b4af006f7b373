"""Alpaca's fees: what a fill is estimated to cost when it happens, and the fee postings
(`CFEE` and `FEE` activities) that say later what it cost, in one unified shape.

Crypto (https://alpaca.markets/docs/crypto/activities/): a fee per trade by the account's
30-day volume tier, "charged on the credited crypto asset/fiat (what you receive)": a buy of
ETH/USD pays in ETH, a sell in USD. "Fees are currently calculated and posted end of day":
one CFEE activity per fill, with the fill's price and no order id or time.

Stocks trade free of commission, but every sale pays the SEC's Section 31 fee and FINRA's
Trading Activity Fee, "rounded up to the nearest penny on each fill or partial fill" and
"deducted from sales proceeds" (https://support.alpaca.markets/hc/en-us/articles/360010814292),
posted as FEE activities for the day (Alpaca's changelog of 2026-10-21: REG and TAF fees are
"charged across multiple trades for a period", with no parent trade).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_CEILING, ROUND_HALF_UP, Decimal
from typing import Any

# Crypto fee tiers by 30-day volume: taker from the Trading API column of
# https://alpaca.markets/docs/crypto/activities/ (tier 1: 25 bps); maker from Alpaca Crypto
# LLC's fee disclosure (tier 1: 15 bps). Where the two disagree on taker (tiers 7 and 8: the
# page says 10 and 8 bps through the API, the disclosure 12 and 10), the page is followed: it
# is the one that names the Trading API, which is how this daemon trades.
CRYPTO_TIERS: Mapping[int, tuple[Decimal, Decimal]] = {  # tier: (maker, taker)
    1: (Decimal("0.0015"), Decimal("0.0025")),
    2: (Decimal("0.0012"), Decimal("0.0022")),
    3: (Decimal("0.0010"), Decimal("0.0020")),
    4: (Decimal("0.0008"), Decimal("0.0018")),
    5: (Decimal("0.0005"), Decimal("0.0015")),
    6: (Decimal("0.0002"), Decimal("0.0013")),
    7: (Decimal("0.0002"), Decimal("0.0010")),
    8: (Decimal("0.0000"), Decimal("0.0008")),
}
# Coin amounts to eight places, rounded half up (the documented CFEE's "-0.000195" is exact
# at that precision; the emulator charges the same way). The posting corrects the rest.
COIN_FEE_STEP = Decimal("0.00000001")
FEE_KINDS = ("CFEE", "FEE")  # the activities that post fees
CENT = Decimal("0.01")


@dataclass(frozen=True)
class Rate:
    since: date  # in force from this trade date on, until the next row's
    rate: Decimal
    cap: Decimal | None = None  # the most one fill pays
    source: str = ""


# SEC Section 31, per dollar of sale proceeds.
SEC_SECTION_31: tuple[Rate, ...] = (
    Rate(date(2024, 5, 22), Decimal("0.0000278"),
         source="SEC Fee Rate Advisory #2 for fiscal 2024: $27.80 per million"),
    Rate(date(2025, 5, 14), Decimal("0"),
         source="SEC Order Release 34-102779 (2025-04-08): $0.00 per million, fiscal 2025's "
         "appropriation collected; the fiscal 2026 order (Release 34-104909, 2026-02-27) is "
         "to be read into a row here"),
)  # fmt: skip
# FINRA Trading Activity Fee on sales of covered equity securities, per share, capped per fill.
FINRA_TAF: tuple[Rate, ...] = (
    Rate(date(2025, 1, 1), Decimal("0.000166"), Decimal("8.30"),
         source="FINRA By-Laws Schedule A, Section 1 (SR-FINRA-2024-019): $0.000166 a share, "
         "at most $8.30 a trade"),
)  # fmt: skip


def rate_on(rates: tuple[Rate, ...], day: date | None) -> Rate:
    """The row in force on `day` (None: the latest); the earliest row stands for days before
    the table (it is for trading now, not for pricing history)."""
    current = rates[0]
    for row in rates:
        if day is None or row.since <= day:
            current = row
    return current


def regulatory_fees(price: Decimal, qty: Decimal, day: date | None) -> tuple[Decimal, Decimal]:
    """A stock sale's SEC fee and FINRA TAF, each rounded up to the cent on the fill."""
    sec = (price * qty * rate_on(SEC_SECTION_31, day).rate).quantize(CENT, ROUND_CEILING)
    taf_rate = rate_on(FINRA_TAF, day)
    taf = qty * taf_rate.rate
    if taf_rate.cap is not None:
        taf = min(taf, taf_rate.cap)
    return sec, taf.quantize(CENT, ROUND_CEILING)


def crypto_fee(amount: Decimal, tier: int, maker: bool) -> Decimal:
    """The fee on `amount` of what a crypto fill credits (coin or dollars)."""
    rate = CRYPTO_TIERS[tier][0 if maker else 1]
    return (amount * rate).quantize(COIN_FEE_STEP, ROUND_HALF_UP)


def estimate(
    *, symbol: str, stock: bool, side: str, price: Decimal, qty: Decimal, liquidity: str | None,
    day: date | None, tier: int,
) -> dict[str, Any]:  # fmt: skip
    """ccxt's `fee` of one fill, as Alpaca will post it: `estimated` where it posts one. A
    fill of unknown liquidity (its limit order was placed before a restart) is estimated as a
    maker's, as the live broker books it (`FillBooking`: an order's polled trades rested);
    the posting corrects it where it was not."""
    base, quote = symbol.split("/")
    if stock:
        if side != "sell":
            return {"cost": "0", "currency": quote}
        cost = sum(regulatory_fees(price, qty, day), Decimal(0))
        return {"cost": str(cost), "currency": quote, "estimated": cost != 0}
    maker = liquidity != "taker"
    if side == "buy":
        cost, currency = crypto_fee(qty, tier, maker), base
    else:
        cost, currency = crypto_fee(price * qty, tier, maker), quote
    return {"cost": str(cost), "currency": currency, "estimated": cost != 0}


def postings(
    activities: Iterable[Mapping[str, Any]], unified: Mapping[str, str]
) -> list[dict[str, Any]]:
    """CFEE and FEE activities as fee postings: `amount` charged (positive) in `currency`,
    for `symbol` (ours) on `day`, `price` where the activity has one. `unified`: our symbol by
    each name Alpaca writes (`ETH/USD` and `ETHUSD`; `AAPL`). An activity of a symbol we do
    not trade is left out."""
    out = []
    for activity in activities:
        symbol = unified.get(str(activity.get("symbol")))
        if symbol is None or str(activity.get("status") or "executed") != "executed":
            continue
        base, quote = symbol.split("/")
        coin = Decimal(str(activity.get("qty") or 0))
        if activity.get("activity_type") == "CFEE" and coin != 0:
            amount, currency = -coin, base
        else:
            amount, currency = -Decimal(str(activity.get("net_amount") or 0)), quote
        price = activity.get("price")
        out.append({
            "id": str(activity["id"]), "kind": str(activity.get("activity_type")),
            "symbol": symbol, "currency": currency, "amount": str(amount),
            "day": str(activity.get("date")), "price": str(price) if price else None,
            "info": dict(activity),
        })  # fmt: skip
    return out
