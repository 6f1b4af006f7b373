"""The emulator's signed endpoints, spoken to directly: keys, HMAC signatures, timestamps and
recvWindow are checked as Binance checks them, and its matching follows Binance's rules."""

from __future__ import annotations

import time
from decimal import Decimal
from urllib.parse import urlencode

import aiohttp
import pytest

from tests.integration.emulated import venue
from trader.emulator import EmulatorServer
from trader.emulator.signed import sign
from trader.emulator.venue import Venue

pytestmark = pytest.mark.integration
KEY, SECRET = "k", "s3cret"


def now_ms() -> int:
    return int(time.time() * 1000)


async def call(session, server, method, path, params, *, key=KEY, secret=SECRET, body=False):
    query = urlencode(params)
    signed = f"{query}&signature={sign(query, secret)}"
    url = f"{server.base_url}{path}"
    headers = {"X-MBX-APIKEY": key}
    if body:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        answer = await session.request(method, url, data=signed, headers=headers)
    else:
        answer = await session.request(method, f"{url}?{signed}", headers=headers)
    return answer.status, await answer.json()


@pytest.fixture
async def server():
    v = venue()
    trading = Venue(v.market)
    trading.open_account(KEY, {"USDT": Decimal(1000)})
    async with (
        EmulatorServer(v.market, venue=trading, secrets={KEY: SECRET}) as running,
        aiohttp.ClientSession() as session,
    ):
        yield running, session


async def test_keys_signatures_and_timestamps_are_checked(server):
    running, session = server
    ok = await call(session, running, "GET", "/api/v3/account", {"timestamp": now_ms()})
    assert ok[0] == 200
    assert {"asset": "USDT", "free": "1000.00000000", "locked": "0.00000000"} in ok[1]["balances"]
    cases = [
        ({"key": "nobody"}, {"timestamp": now_ms()}, (401, -2015)),
        ({"secret": "wrong"}, {"timestamp": now_ms()}, (400, -1022)),
        ({}, {}, (400, -1102)),
        ({}, {"timestamp": now_ms() - 6000}, (400, -1021)),  # past the default 5 s window
        ({}, {"timestamp": now_ms() - 6000, "recvWindow": 10000}, (200, None)),
        ({}, {"timestamp": now_ms() + 5000}, (400, -1021)),  # ahead of the server
        ({}, {"timestamp": now_ms(), "recvWindow": 70000}, (400, -1131)),
    ]
    for who, params, (status, code) in cases:
        got_status, got = await call(session, running, "GET", "/api/v3/account", params, **who)
        assert got_status == status, (who, params, got)
        if code is not None:
            assert got["code"] == code


async def test_orders_by_binance_rules(server):
    running, session = server

    async def order(**params):
        params = {"symbol": "SOLUSDT", "timestamp": now_ms()} | params
        return await call(session, running, "POST", "/api/v3/order", params, body=True)

    # A market buy larger than the best level walks the book: one trade per level, the fee
    # in what was bought.
    status, bought = await order(side="BUY", type="MARKET", quantity="25", newClientOrderId="a")
    assert status == 200, bought
    assert bought["status"] == "FILLED"
    assert [f["qty"] for f in bought["fills"]] == ["10.00000000", "11.00000000", "4.00000000"]
    prices = [Decimal(f["price"]) for f in bought["fills"]]
    assert prices == sorted(prices)
    assert prices[0] < prices[-1]
    assert {f["commissionAsset"] for f in bought["fills"]} == {"SOL"}
    # A client id in use by an open order is a duplicate; one of an order that ended is not.
    resting = {"side": "BUY", "type": "LIMIT", "timeInForce": "GTC", "quantity": "5",
               "price": "1.50"}  # fmt: skip
    assert (await order(**resting, newClientOrderId="b"))[1]["status"] == "NEW"
    assert (await order(**resting, newClientOrderId="b"))[1] == {
        "code": -2010, "msg": "Duplicate order sent."
    }  # fmt: skip
    status, again = await order(side="BUY", type="MARKET", quantity="2", newClientOrderId="a")
    assert again["status"] == "FILLED"  # only a client that looks first avoids this
    # Filters and funds.
    assert (await order(side="BUY", type="MARKET", quantity="0.0001"))[1]["code"] == -1013
    assert (await order(**(resting | {"price": "1.505"})))[1][
        "msg"
    ] == "Filter failure: PRICE_FILTER"
    rich = await order(side="BUY", type="MARKET", quantity="290")
    assert rich[1]["msg"] == "Account has insufficient balance for requested action."
    # A sell pays its fee in the quote currency.
    status, sold = await order(side="SELL", type="MARKET", quantity="10")
    assert {f["commissionAsset"] for f in sold["fills"]} == {"USDT"}
    # Looked up by client id; cancelled once; a second cancel is an unknown order.
    query = {"symbol": "SOLUSDT", "origClientOrderId": "b", "timestamp": now_ms()}
    assert (await call(session, running, "GET", "/api/v3/order", query))[1]["status"] == "NEW"
    assert (await call(session, running, "DELETE", "/api/v3/order", query))[1]["status"] == (
        "CANCELED"
    )
    assert (await call(session, running, "DELETE", "/api/v3/order", query))[1]["code"] == -2011
    missing = query | {"origClientOrderId": "nope"}
    assert (await call(session, running, "GET", "/api/v3/order", missing))[1]["code"] == -2013
