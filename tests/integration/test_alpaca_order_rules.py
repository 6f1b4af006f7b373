"""What Alpaca refuses and when it works an order, through the emulator's HTTP API: wash
trades, extended hours, orders sent while the market is closed, day orders ending with
their session. The market is tests/integration/alpaca_paper.py's (recorded MSFT and
SOL/USDT paths on New York sessions)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from tests.integration.alpaca_paper import NEW_YORK, TUESDAY, paper
from trader.domain import decimal_from_float

pytestmark = pytest.mark.integration
WASH = (422, {"code": 42210000, "message": "potential wash trade detected. use complex orders"})
LIMIT_DAY = (422, {"code": 42210000, "message": "extended hours order must be DAY limit orders"})


def _ny(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2025, 3, day, hour, minute, tzinfo=NEW_YORK)


def _time(text: str) -> datetime:
    """An RFC 3339 time as Alpaca writes it ("...Z")."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_an_order_that_could_fill_against_an_open_order_of_ours_is_a_wash_trade():
    """Alpaca's "Preventing Wash Trades" (docs.alpaca.markets/docs/user-protection): refused,
    a market order against an open order of the other side, a buy limit at or above an open
    sell limit, a sell limit at or below an open buy limit; crypto too. The answer is the
    recorded 422 of github.com/Petersoj/alpaca-java issue #145. Limits that cannot meet (a
    buy below a sell, as `maxdiff` rests them) are taken, and once the resting order is
    cancelled the market order is too."""
    async with paper() as p:
        status, buy = await p.order("MSFT", "buy", "5", limit=p.limit("MSFT", "0.9"), tif="gtc")
        assert status == 200, buy
        above = await p.order("MSFT", "sell", "5", limit=p.limit("MSFT", "1.1"), tif="gtc")
        at_the_buy = await p.order("MSFT", "sell", "5", limit=p.limit("MSFT", "0.9"), tif="gtc")
        market = await p.order("MSFT", "sell", "5")
        coin = await p.order("BTC/USD", "buy", "1", limit=p.limit("BTC/USD", "0.5"))
        coin_market = await p.order("BTC/USD", "sell", "1")
        async with p.http.delete(f"{p.server.base_url}/v2/orders/{above[1]['id']}") as gone:
            assert gone.status == 204
        async with p.http.delete(f"{p.server.base_url}/v2/orders/{buy['id']}") as gone:
            assert gone.status == 204
        after = await p.order("MSFT", "sell", "5")
    assert above[0] == 200, above
    assert at_the_buy == market == coin_market == WASH
    assert coin[0] == 200, coin
    assert after[0] == 200, after
    assert after[1]["status"] == "filled"


async def test_extended_hours_orders_are_day_limits_in_whole_shares_else_refused():
    """Only `limit` `day` orders are extended-hours eligible, "All other order types and TIFs
    will be rejected with an error"; "Fractional shares ... are not available during extended
    hours trading" (alpacahq/alpaca-docs content/trading/orders.md). The order JSON carries
    `extended_hours` as sent."""
    async with paper(now=_ny(5, 7)) as p:  # Wednesday, pre-market
        market = await p.order("MSFT", "buy", "1", extended=True)
        gtc = await p.order("MSFT", "buy", "1", limit=p.limit("MSFT"), tif="gtc", extended=True)
        fraction = await p.order("MSFT", "buy", "1.5", limit=p.limit("MSFT"), extended=True)
        above = p.limit("MSFT", "1.02")
        status, taken = await p.order("MSFT", "buy", "2", limit=above, extended=True)
    assert market == gtc == LIMIT_DAY
    assert fraction[0] == 422
    assert fraction[1]["message"] == "fractional orders are not accepted in extended hours"
    assert status == 200, taken
    assert (taken["extended_hours"], taken["status"], taken["filled_qty"]) == (True, "filled", "2")
    assert _time(taken["filled_at"]) == _ny(5, 7)


async def test_an_after_hours_order_not_filled_by_8_pm_expires_then():
    """Extended hours end at 20:00 New York time (docs, Extended Hours Trading); an
    extended-hours day order still open then has ended: `expired` at 20:00."""
    async with paper(now=_ny(4, 17)) as p:  # Tuesday, after-hours
        below = p.limit("MSFT", "0.8")
        status, resting = await p.order("MSFT", "buy", "3", limit=below, extended=True)
        assert (status, resting["status"]) == (200, "new")
        p.clock.advance_to(_ny(4, 19, 59))
        _, before = await p.get(f"/v2/orders/{resting['id']}")
        p.clock.advance_to(_ny(4, 20, 30))
        _, after = await p.get(f"/v2/orders/{resting['id']}")
    assert before["status"] == "new"
    assert (after["status"], _time(after["expired_at"])) == ("expired", _ny(4, 20))


async def test_a_regular_order_sent_while_closed_waits_accepted_and_fills_at_the_open():
    """ "Orders not eligible for extended hours submitted after 4:00pm ET will be queued up
    for release the next trading day" (alpacahq/alpaca-docs content/trading/orders.md);
    Alpaca's status "accepted": received, not yet routed. Sent on Saturday, a market buy is
    filled at Monday's 09:30 open, at the recorded open of the bar that holds it (bars lie
    on the hour grid: 09:00-10:00); an extended-hours
    limit sent then (outside 04:00-20:00) waits for Monday's pre-market."""
    async with paper(now=_ny(8, 12)) as p:  # Saturday
        status, market = await p.order("MSFT", "buy", "4")
        _, extended = await p.order("MSFT", "buy", "1", limit=p.limit("MSFT", "2"), extended=True)
        _, waiting = await p.get(f"/v2/orders/{market['id']}")
        p.clock.advance_to(_ny(10, 9, 0))  # Monday, pre-market, before the first bar
        _, early = await p.get(f"/v2/orders/{market['id']}")
        p.clock.advance_to(_ny(10, 10, 45))
        _, filled = await p.get(f"/v2/orders/{market['id']}")
        _, filled_extended = await p.get(f"/v2/orders/{extended['id']}")
        first = p.bar_at("MSFT", _ny(10, 9, 30))  # the bar that holds the open
    assert (status, market["status"], waiting["status"], early["status"]) == (
        (200,) + ("accepted",) * 3
    )
    assert (extended["status"], extended["extended_hours"]) == ("accepted", True)
    assert first.start <= _ny(10, 9, 30) < first.end
    assert (filled["status"], filled["filled_qty"]) == ("filled", "4")
    assert Decimal(filled["filled_avg_price"]) == decimal_from_float(first.open)
    assert _time(filled["filled_at"]) == _ny(10, 9, 30)
    assert filled_extended["status"] == "filled"


async def test_a_day_limit_left_open_at_the_close_expires_a_gtc_one_rests_on():
    """A `day` order is good for its session only; `gtc` until cancelled (docs, Time in
    Force)."""
    async with paper() as p:
        below = p.limit("MSFT", "0.5")
        _, day = await p.order("MSFT", "buy", "1", limit=below)
        _, gtc = await p.order("MSFT", "buy", "1", limit=below, tif="gtc")
        p.clock.advance_to(TUESDAY + timedelta(days=1))
        _, day_after = await p.get(f"/v2/orders/{day['id']}")
        _, gtc_after = await p.get(f"/v2/orders/{gtc['id']}")
    assert (day_after["status"], _time(day_after["expired_at"])) == ("expired", _ny(4, 16))
    assert gtc_after["status"] == "new"
