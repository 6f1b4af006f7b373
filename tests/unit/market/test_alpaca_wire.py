"""Alpaca's records as ccxt's: a fill's fee is estimated when it happens, as Alpaca will post
it at the end of the day, and marked so; the fee postings (CFEE, FEE) in one shape.

Reference values: Alpaca's crypto fee page (https://alpaca.markets/docs/crypto/activities/):
tier 1 is 25 bps through the Trading API, charged in what the fill credits; its CFEE example
is {"id": "20220812000000000::53be51ba-46f9-43de-b81f-576f241dc680", "activity_type": "CFEE",
"date": "2022-08-12", "net_amount": "0", "description": "Coin Pair Transaction Fee (Non USD)",
"symbol": "ETHUSD", "qty": "-0.000195", "price": "1884.5", "status": "executed"}, which is
25 bps of a 0.078 ETH buy. Regulatory fees: FINRA By-Laws Schedule A section 1 ($0.000166 a
share sold, at most $8.30), the SEC's Section 31 rate ($27.80 a million from 2024-05-22,
$0.00 from 2025-05-14, Release 34-102779), each rounded up to the cent per fill (Alpaca's
support page on regulatory fees).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

from trader.emulator.alpaca_wire import fee_json
from trader.emulator.market import Instrument
from trader.emulator.venue import VenueTrade
from trader.market.alpaca.fees import postings, regulatory_fees
from trader.market.alpaca.wire import trades

DOCUMENTED_CFEE = {
    "id": "20220812000000000::53be51ba-46f9-43de-b81f-576f241dc680",
    "activity_type": "CFEE",
    "date": "2022-08-12",
    "net_amount": "0",
    "description": "Coin Pair Transaction Fee (Non USD)",
    "symbol": "ETHUSD",
    "qty": "-0.000195",
    "price": "1884.5",
    "status": "executed",
}


def fill(n: int, side: str, price: str, qty: str, at: str = "2022-08-12T15:00:00Z") -> dict:
    return {"id": f"20220812110000000::00000000-0000-4000-9000-{n:012d}", "order_id": "o-1",
            "transaction_time": at, "side": side, "price": price, "qty": qty}  # fmt: skip


def test_a_crypto_buy_is_estimated_in_the_coin_as_the_documented_cfee_posts_it():
    placed = {"type": "market", "submitted_at": "2022-08-12T15:00:00Z"}
    [got] = trades([fill(1, "buy", "1884.5", "0.078")], "ETH/USD", placed, stock=False)
    assert got["fee"] == {"cost": "0.00019500", "currency": "ETH", "estimated": True}
    [posted] = postings([DOCUMENTED_CFEE], {"ETHUSD": "ETH/USD", "ETH/USD": "ETH/USD"})
    assert (posted["symbol"], posted["currency"], posted["day"], posted["price"]) == (
        "ETH/USD", "ETH", "2022-08-12", "1884.5",
    )  # fmt: skip
    assert Decimal(posted["amount"]) == Decimal(got["fee"]["cost"])


def test_a_sell_pays_in_dollars_a_maker_less_and_the_tier_sets_the_rate():
    # A limit placed before a restart: who took liquidity is unknown, booked (and estimated)
    # as a maker's, 15 bps at tier 1.
    resting = {"type": "limit", "submitted_at": "2022-08-12T14:00:00Z"}
    [maker] = trades([fill(1, "sell", "2000", "0.5")], "ETH/USD", resting, stock=False)
    assert maker["fee"] == {"cost": "1.50000000", "currency": "USD", "estimated": True}
    market = {"type": "market"}
    [tier2] = trades([fill(1, "sell", "2000", "0.5")], "ETH/USD", market, stock=False, tier=2)
    assert tier2["fee"]["cost"] == "2.20000000"  # a taker's at tier 2: 22 bps


def test_a_stock_sale_is_estimated_at_its_regulatory_fees_and_a_buy_pays_nothing():
    # 2024-06-03: SEC $27.80 a million; 1000 shares at $190 = $190,000 -> $5.282 -> $5.29.
    at = "2024-06-03T15:00:00Z"
    sold, bought = trades(
        [fill(1, "sell", "190", "1000", at), fill(2, "buy", "190", "1000", at)],
        "AAPL/USD", None, stock=True,
    )  # fmt: skip
    assert sold["fee"] == {"cost": "5.46", "currency": "USD", "estimated": True}  # + TAF $0.17
    assert bought["fee"] == {"cost": "0", "currency": "USD"}
    # From 2025-05-14 the SEC takes nothing; the TAF is capped at $8.30 a fill.
    assert regulatory_fees(Decimal(190), Decimal(100_000), date(2026, 1, 5)) == (
        Decimal("0.00"), Decimal("8.30"),
    )  # fmt: skip
    assert regulatory_fees(Decimal(190), Decimal(1), date(2026, 1, 5))[1] == Decimal("0.01")


def test_a_fee_posting_of_a_symbol_not_traded_or_not_executed_is_left_out_and_fee_is_in_usd():
    fee = {"id": "20260105000000000::x", "activity_type": "FEE", "date": "2026-01-05",
           "net_amount": "-0.17", "description": "TAF fee", "symbol": "AAPL",
           "status": "executed"}  # fmt: skip
    unified = {"AAPL": "AAPL/USD"}
    [got] = postings([fee, fee | {"symbol": "MSFT"}, fee | {"status": "canceled"}], unified)
    assert (got["kind"], got["currency"], got["amount"]) == ("FEE", "USD", "0.17")
    assert got["price"] is None


def test_ids_sort_as_the_fills_were_made():
    got = trades([fill(2, "buy", "1", "1"), fill(1, "buy", "1", "1")], "ETH/USD", stock=False)
    assert [t["id"] for t in got] != sorted(t["id"] for t in got)
    assert sorted(t["id"] for t in got)[0].endswith("000000000001")


def test_the_emulator_posts_the_documented_cfee_and_the_adapter_reads_it_back():
    # The emulator's record of the documented fill: its fields and their types are the
    # documented example's, and reading it back gives the fee the fill was charged.
    trade = VenueTrade(
        7, 3, "ETHUSD", Decimal("1884.5"), Decimal("0.078"), Decimal("0.000195"), "ETH",
        datetime(2022, 8, 12, 15, tzinfo=UTC), is_buyer=True, is_maker=False,
    )  # fmt: skip
    record = fee_json(trade, Instrument("ETH/USD"))
    assert {k: type(v) for k, v in record.items()} == {
        k: type(v) for k, v in DOCUMENTED_CFEE.items()
    }
    assert record | {"id": DOCUMENTED_CFEE["id"]} == DOCUMENTED_CFEE
    assert record["id"].startswith("20220812000000000::")
    [posted] = postings([record], {"ETHUSD": "ETH/USD"})
    assert Decimal(posted["amount"]) == trade.commission
