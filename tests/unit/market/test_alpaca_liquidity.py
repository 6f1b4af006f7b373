"""Maker or taker of an Alpaca fill, which Alpaca does not say: judged from the order's type,
whether it crossed the quote when placed, and whether the fill came as it was placed (a
marketable order fills milliseconds after `submitted_at`, so the old rule of equal times
called it a maker). The order is alpaca-py's fixture (tests/trading/trading_client/
test_order_routes.py, id 61e69015-..., submitted 2021-03-16T18:38:01.937734Z); the fill is
Alpaca's documented FILL activity shape (docs.alpaca.markets, Account Activities), timed
40 ms after it."""

from __future__ import annotations

import pytest

from trader.market.alpaca.wire import CROSSED, liquidity

ORDER = {"id": "61e69015-8549-4bfd-b9c3-01e75843f47d", "type": "market",
         "submitted_at": "2021-03-16T18:38:01.937734Z", "limit_price": None}  # fmt: skip
FILL = {"activity_type": "FILL", "id": "20210316183801977::8efc7b9a-8b2b-4000-9955-d36e7db0df74",
        "order_id": ORDER["id"], "transaction_time": "2021-03-16T18:38:01.977Z", "type": "fill",
        "price": "1.63", "qty": "1", "side": "buy", "symbol": "LPCN"}  # fmt: skip
LIMIT = ORDER | {"type": "limit", "limit_price": "1.63"}


@pytest.mark.parametrize(
    ("placed", "expected"),
    [
        (ORDER, "taker"),  # a market order, whatever it is told about crossing
        (ORDER | {CROSSED: False}, "taker"),
        (LIMIT | {CROSSED: True}, "taker"),  # crossed the quote: filled 40 ms later, still taker
        (LIMIT | {CROSSED: False}, "maker"),  # rested: others' orders filled it
        # Crossed, but this fill came an hour later: the rest of it had rested.
        (LIMIT | {CROSSED: True, "submitted_at": "2021-03-16T17:38:01.937734Z"}, "maker"),
        # Filled at the very instant it was placed: taker, whatever our quote said.
        (LIMIT | {CROSSED: False, "submitted_at": FILL["transaction_time"]}, "taker"),
        (LIMIT, "taker"),  # placed before a restart: filled as it was placed
        (LIMIT | {"submitted_at": "2021-03-16T17:38:01.937734Z"}, "maker"),
        (None, None),
    ],
)  # fmt: skip
def test_liquidity_comes_from_the_order_not_the_fills_time(placed, expected):
    assert liquidity(FILL, placed) == expected
