"""Alpaca's records as ccxt's: a crypto fill gets the fee Alpaca charged for it."""

from __future__ import annotations

from trader.market.alpaca.wire import trades

AT = "2026-11-26T10:00:00.000000Z"


def fill(n: int, price: str, qty: str) -> dict[str, str]:
    return {"id": f"20261126100000000::00000000-0000-4000-9000-{n:012d}", "order_id": "o-1",
            "transaction_time": AT, "side": "buy", "price": price, "qty": qty}  # fmt: skip


def fee(price: str, qty: str) -> dict[str, str]:
    return {"order_id": "o-1", "transaction_time": AT, "price": price, "qty": qty,
            "net_amount": "0"}  # fmt: skip


def test_fills_of_one_order_at_one_time_keep_their_own_fees():
    # A market buy that took two levels of the book at once: one time, two prices.
    fills = [fill(1, "100.00", "10"), fill(2, "100.01", "1.5")]
    fees = [fee("100.01", "-0.00375"), fee("100", "-0.025")]
    got = trades(fills, fees, "SOL/USD")
    assert [(t["price"], t["fee"]["cost"], t["fee"]["currency"]) for t in got] == [
        ("100.00", "0.025", "SOL"),
        ("100.01", "0.00375", "SOL"),
    ]
    assert [t["id"] for t in got] == sorted(t["id"] for t in got)
