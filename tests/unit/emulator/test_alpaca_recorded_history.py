"""The Alpaca emulator's FILL activities, clock, calendar and stock bars, field by field against
Alpaca's own recorded answers (tests/data/alpaca/recorded/, its README names each source:
alpaca-py 0.44's test fixtures and Alpaca's documentation), read through alpaca-py itself.

Each recorded answer and each emulator answer is held to the same checks (fields, their
types, the formats of ids and times, the relations between fields), so a check that the
recorded data would fail is a wrong check, not a finding. The stock is the recorded Shanghai
A-share 600977 (tests/data/README.md) laid as AAPL's minute bars on New York's sessions."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import pytest
from alpaca.common.exceptions import APIError
from alpaca.data.enums import DataFeed
from alpaca.data.historical import StockHistoricalDataClient
from alpaca.data.requests import StockBarsRequest, StockLatestQuoteRequest
from alpaca.data.timeframe import TimeFrame
from alpaca.trading.client import TradingClient
from alpaca.trading.enums import OrderSide, TimeInForce
from alpaca.trading.models import Calendar, Clock, TradeActivity
from alpaca.trading.requests import GetCalendarRequest, MarketOrderRequest

from tests.recorded import ALPACA_RECORDED, XSHG_600977_5MIN
from trader.clock import SimulatedClock
from trader.domain import Timeframe
from trader.emulator import EmulatedMarket, EmulatorServer
from trader.emulator.alpaca_feeds import IEX_VOLUME_SHARE, DataPlan
from trader.emulator.alpaca_sandbox import STOCK_FEES, _instrument
from trader.emulator.sandbox_replay import recorded_bars, restamped
from trader.emulator.sessions import Sessions
from trader.emulator.venue import Venue
from trader.market.replay import read_recording

NEW_YORK = ZoneInfo("America/New_York")
KEY, SECRET = "recorded-key", "recorded-secret-0123456789abcdef"
MINUTE = Timeframe("1m")
# The recorded clock's moment (alpaca-py's fixture): a Monday after the close.
RECORDED_NOW = datetime(2022, 5, 16, 16, 32, 24, 143735, tzinfo=NEW_YORK)
SESSION_DAY = datetime(2025, 3, 3, 9, 30, tzinfo=NEW_YORK)  # a Monday
T = TypeVar("T")


def recorded(name: str) -> Any:
    return json.loads((ALPACA_RECORDED / name).read_text())


@dataclass
class Emulated:
    clock: SimulatedClock
    trading: TradingClient
    data: StockHistoricalDataClient

    async def call(self, call: Callable[..., T], *args: Any) -> T:
        """An SDK call (synchronous) while the emulator serves on this loop."""
        return await asyncio.to_thread(call, *args)


@asynccontextmanager
async def emulated(
    now: datetime, plan: DataPlan | None = None, since: datetime | None = None
) -> AsyncIterator[Emulated]:
    """The Alpaca emulator at `now`, AAPL's minute bars laid on XNYS (two sessions' worth
    closed before `now`), New York's sessions from `since` (a month before `now` by
    default), an account of $10,000, alpaca-py's clients pointed at it."""
    clock = SimulatedClock(now)
    market = EmulatedMarket(clock.now)
    stock = _instrument("AAPL/USD", stock=True)
    recording = read_recording(XSHG_600977_5MIN, "AAPL/USD")
    market.add_listing(stock, restamped(recorded_bars(recording), MINUTE, 780, now, "XNYS"))
    venue = Venue(market, unique_client_ids=True)
    venue.fees_by_symbol[stock.venue_id] = STOCK_FEES
    venue.open_account(KEY, {"USD": Decimal(10_000)})
    sessions = Sessions.of("XNYS", since or now - timedelta(days=30), now + timedelta(days=30))
    server = EmulatorServer(market, venue=venue, secrets={KEY: SECRET}, dialect="alpaca",
                            sessions=sessions, data_plan=plan)  # fmt: skip
    await server.start()
    url = server.base_url
    try:
        yield Emulated(
            clock,
            TradingClient(KEY, SECRET, raw_data=True, url_override=url),
            StockHistoricalDataClient(KEY, SECRET, raw_data=True, url_override=url),
        )
    finally:
        await server.stop()


# --- the checks, the same for a recorded answer and an emulated one -----------------------

# RFC 3339 as Go writes it: a fraction without trailing zeros, none on a whole second.
GO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?(Z|[+-]\d\d:\d\d)$")
ACTIVITY_ID = re.compile(r"^(\d{17})::([0-9a-f-]{36})$")


def parsed(stamp: str) -> datetime:
    """A Go time, its nanoseconds cut to Python's microseconds."""
    head, _, rest = stamp.partition(".")
    if rest:
        digits = re.match(r"\d+", rest)
        assert digits is not None
        stamp = f"{head}.{digits.group()[:6].ljust(6, '0')}{rest[digits.end() :]}"
    return datetime.fromisoformat(stamp)


def check_fill(record: dict[str, Any]) -> None:
    assert all(isinstance(v, str) for v in record.values()), record
    assert GO_TIME.match(record["transaction_time"]), record["transaction_time"]
    assert record["transaction_time"].endswith("Z")
    # The id: the transaction time in New York's time, to the millisecond, then a UUID.
    match = ACTIVITY_ID.match(record["id"])
    assert match, record["id"]
    local = parsed(record["transaction_time"]).astimezone(NEW_YORK)
    assert match.group(1) == local.strftime("%Y%m%d%H%M%S") + f"{local.microsecond // 1000:03d}"
    uuid.UUID(match.group(2))
    uuid.UUID(record["order_id"])
    assert record["activity_type"] == "FILL"
    assert record["side"] in {"buy", "sell"}
    qty, leaves, cum = (Decimal(record[k]) for k in ("qty", "leaves_qty", "cum_qty"))
    assert min(Decimal(record["price"]), qty, cum - qty + 1, leaves + 1) > 0
    done = record["type"] == "fill"
    assert record["type"] in {"fill", "partial_fill"}
    assert (leaves == 0) == done
    if "order_status" in record:  # alpaca-py's and the Broker API's; not the docs' sample
        assert record["order_status"] == ("filled" if done else "partially_filled")
        # alpaca-py's model reads it (the Broker API's: it requires an account id too).
        TradeActivity(**({"account_id": str(uuid.uuid4())} | record))


def check_clock(answer: dict[str, Any]) -> None:
    assert set(answer) == {"timestamp", "is_open", "next_open", "next_close"}
    assert isinstance(answer["is_open"], bool)
    for key in ("timestamp", "next_open", "next_close"):
        stamp = answer[key]
        assert GO_TIME.match(stamp), stamp
        when = parsed(stamp)
        assert when.utcoffset() == when.astimezone(NEW_YORK).utcoffset()  # New York's time
    Clock(**answer)


def check_calendar_day(day: dict[str, Any]) -> None:
    for key, form in (("open", r"^\d\d:\d\d$"), ("close", r"^\d\d:\d\d$"),
                      ("session_open", r"^\d{4}$"), ("session_close", r"^\d{4}$")):  # fmt: skip
        assert re.match(form, day[key]), (key, day[key])
    if "settlement_date" in day:
        assert date.fromisoformat(day["settlement_date"]) > date.fromisoformat(day["date"])
    Calendar(**day)


# --- FILL activities --------------------------------------------------------------------


async def test_fill_activities_have_alpacas_recorded_fields_types_and_formats():
    fixture = recorded("fill_activities.json")
    for record in fixture["alpaca_py_fixture"] + fixture["trading_api_docs"]:
        check_fill(record)
    async with emulated(SESSION_DAY + timedelta(minutes=35)) as alpaca:
        # 15 shares: the emulated book's best level holds 10, so two executions, the first
        # a partial fill; sold again a minute later.
        for side in (OrderSide.BUY, OrderSide.SELL):
            order = MarketOrderRequest(
                symbol="AAPL", qty=15, side=side, time_in_force=TimeInForce.DAY
            )
            await alpaca.call(alpaca.trading.submit_order, order)
            alpaca.clock.advance_to(alpaca.clock.now() + timedelta(minutes=1))
        fills = await alpaca.call(
            alpaca.trading.get, "/account/activities/FILL", {"direction": "asc"}
        )
    assert [(f["side"], f["type"], f["qty"], f["cum_qty"]) for f in fills] == [
        ("buy", "partial_fill", "10", "10"), ("buy", "fill", "5", "15"),
        ("sell", "partial_fill", "10", "10"), ("sell", "fill", "5", "15"),
    ]  # fmt: skip
    docs_fields = set(fixture["trading_api_docs"][0])
    fixture_fields = set(fixture["alpaca_py_fixture"][0])
    for fill in fills:
        check_fill(fill)
        # The Trading API's documented fields, and alpaca-py's `order_status`; no
        # `account_id` (the Broker API's, where one key sees many accounts).
        assert set(fill) == docs_fields | {"order_status"} == fixture_fields - {"account_id"}


# --- clock and calendar -----------------------------------------------------------------


async def test_the_clock_answers_as_alpacas_recorded_clock_at_the_same_moment():
    clock = recorded("clock.json")
    check_clock(clock)
    async with emulated(RECORDED_NOW) as alpaca:
        closed = await alpaca.call(alpaca.trading.get_clock)
        alpaca.clock.advance_to(datetime(2022, 5, 17, 10, 0, tzinfo=NEW_YORK))
        opened = await alpaca.call(alpaca.trading.get_clock)
    for answer in (closed, opened):
        check_clock(answer)
    # The same moment, the same answer (Alpaca's clock has nanoseconds, the emulator's
    # microseconds).
    assert {k: v for k, v in closed.items() if k != "timestamp"} == {
        k: v for k, v in clock.items() if k != "timestamp"
    }
    assert parsed(closed["timestamp"]) == parsed(clock["timestamp"])
    assert opened["is_open"] is True
    assert opened["next_close"] == "2022-05-17T16:00:00-04:00"


async def test_the_calendar_answers_as_alpacas_recorded_calendars():
    calendars = recorded("calendar.json")
    for day in calendars["alpaca_py_fixture"] + calendars["trading_api_docs"]:
        check_calendar_day(day)
    days = {}
    for now, ranges in (
        (RECORDED_NOW, (("2022-05-16", "2022-05-17"), ("1970-01-02", "1970-01-08"))),
        (datetime(2024, 5, 28, 10, tzinfo=NEW_YORK), (("2024-05-23", "2024-05-28"),)),
    ):
        async with emulated(now, since=datetime(1969, 12, 1, tzinfo=NEW_YORK)) as alpaca:
            for first, last in ranges:
                request = GetCalendarRequest(start=date.fromisoformat(first),
                                             end=date.fromisoformat(last))  # fmt: skip
                days[first] = await alpaca.call(alpaca.trading.get_calendar, request)
    for answer in days.values():
        for day in answer:
            check_calendar_day(day)
            assert set(day) == set(calendars["trading_api_docs"][0])
    # alpaca-py's fixture, field for field, and the documented answer with its settlement.
    fixture_fields = set(calendars["alpaca_py_fixture"][0])
    assert [{k: d[k] for k in fixture_fields} for d in days["2022-05-16"]] == calendars[
        "alpaca_py_fixture"
    ]
    assert days["1970-01-02"] == calendars["trading_api_docs"]
    # T+1 from 2024-05-28 (the SEC's compliance date for Rule 15c6-1's T+1): a Thursday's
    # trades settled on the Tuesday after Memorial Day, the Tuesday's on the Wednesday.
    settles = {d["date"]: d["settlement_date"] for d in days["2024-05-23"]}
    assert settles == {"2024-05-23": "2024-05-28", "2024-05-24": "2024-05-29",
                       "2024-05-28": "2024-05-29"}  # fmt: skip


# --- stock bars on each feed, and the Free plan -----------------------------------------


def bars_request(feed: DataFeed, start: datetime, end: datetime | None = None) -> StockBarsRequest:
    return StockBarsRequest(
        symbol_or_symbols=["AAPL"], timeframe=TimeFrame.Minute, start=start, end=end,
        limit=10_000, feed=feed,
    )  # fmt: skip


async def test_iex_bars_leave_out_the_minutes_without_an_iex_trade_and_sip_has_them_all():
    feeds = recorded("stock_bars_iex_sip.json")
    iex_bar, sip_bar = feeds["iex"]["bars"][0], feeds["sip"]["bars"][0]
    opened = SESSION_DAY + timedelta(days=1)  # Tuesday's session, all of it closed
    async with emulated(opened + timedelta(hours=7)) as alpaca:
        answers = {
            feed: (await alpaca.call(alpaca.data.get_stock_bars, bars_request(feed, opened)))
            for feed in (DataFeed.SIP, DataFeed.IEX)
        }
        again = await alpaca.call(alpaca.data.get_stock_bars, bars_request(DataFeed.IEX, opened))
    sip, iex = answers[DataFeed.SIP]["AAPL"], answers[DataFeed.IEX]["AAPL"]
    session = [b for b in sip if b["t"] < "2025-03-04T21:00"]
    assert len(session) == 390  # every minute of the session on SIP
    assert again == answers[DataFeed.IEX]  # the same minutes left out every time
    by_time = {b["t"]: b for b in sip}
    assert {b["t"] for b in iex} < set(by_time)
    missing = 1 - sum(1 for b in iex if b["t"] in {s["t"] for s in session}) / len(session)
    assert 0.25 < missing < 0.35  # the default sparsity, 0.3, over one session
    for ours in iex:
        theirs = by_time[ours["t"]]
        assert [ours[k] for k in "ohlc"] == [theirs[k] for k in "ohlc"]
        # IEX's share of the volume, as in Alpaca's AAPL day on both feeds.
        assert ours["v"] == max(1, round(theirs["v"] * IEX_VOLUME_SHARE))
        assert ours["n"] < theirs["n"]
    assert iex_bar["v"] / sip_bar["v"] == pytest.approx(IEX_VOLUME_SHARE)
    # Fields and their types as Alpaca's bars have them.
    for ours, theirs in ((iex[0], iex_bar), (sip[0], sip_bar)):
        assert set(ours) == set(theirs)
        assert {k: type(v) for k, v in ours.items() if k not in "v"} == {
            k: (float if k in {"o", "h", "l", "c", "vw"} else type(theirs[k]))
            for k in theirs if k != "v"
        }  # fmt: skip
        assert GO_TIME.match(ours["t"])
        assert ours["t"].endswith("Z")
    assert isinstance(iex[0]["v"], int)  # IEX's volumes are whole shares, as Alpaca's are


async def test_a_free_plan_is_refused_recent_sip_data_as_alpaca_refuses_it():
    refusal = recorded("sip_refused.json")
    now = SESSION_DAY + timedelta(hours=2)
    async with emulated(now, DataPlan(free=True)) as alpaca:
        with pytest.raises(APIError) as recent:
            await alpaca.call(alpaca.data.get_stock_bars, bars_request(DataFeed.SIP, now))
        request = StockLatestQuoteRequest(symbol_or_symbols=["AAPL"], feed=DataFeed.SIP)
        with pytest.raises(APIError) as latest:
            await alpaca.call(alpaca.data.get_stock_latest_quote, request)
        # SIP 15 minutes late is the Free plan's, and IEX any time.
        late = bars_request(DataFeed.SIP, now - timedelta(hours=1), now - timedelta(minutes=16))
        delayed = await alpaca.call(alpaca.data.get_stock_bars, late)
        live = await alpaca.call(alpaca.data.get_stock_bars, bars_request(DataFeed.IEX, now))
    for refused in (recent.value, latest.value):
        assert refused.status_code == refusal["status"]
        assert json.loads(str(refused)) == refusal["body"]
    assert len(delayed["AAPL"]) == 45
    assert live["AAPL"]
    async with emulated(now, DataPlan(free=False)) as alpaca:  # Algo Trader Plus: all of it
        plus = await alpaca.call(alpaca.data.get_stock_bars, bars_request(DataFeed.SIP, now))
    assert plus["AAPL"]
