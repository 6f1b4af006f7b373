"""Reading Alpaca's trade-updates messages and finding the stream's address, against the
messages of Alpaca's "Websocket Streaming" page (tests/data/alpaca/recorded/
trade_updates_stream.json)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tests.recorded import ALPACA_TRADE_UPDATES
from trader.market.alpaca.stream import read_update, stream_url

DOCS = json.loads(ALPACA_TRADE_UPDATES.read_text())


def test_the_documented_fill_names_its_order_and_settles_it():
    update = read_update(DOCS["fill"], heard=1.5)
    assert update is not None
    assert update.event == "fill"
    assert update.client_order_id == "4642fd68-d59a-47d7-a9ac-e22f536828d1"
    assert update.order_id == "a5be8f5e-fdfa-41f5-a644-7a74fe947a8f"
    assert update.symbol == "SOLUSD"
    # Alpaca writes nanoseconds; Python keeps the microseconds.
    assert update.timestamp == datetime(2022, 4, 19, 17, 45, 5, 24916, tzinfo=UTC)
    assert update.settles
    assert update.heard == 1.5


def test_events_that_change_nothing_booked_do_not_settle():
    new = json.loads(json.dumps(DOCS["fill"]))
    new["data"]["event"] = "new"
    update = read_update(new, heard=0.0)
    assert update is not None
    assert not update.settles
    for event in ("partial_fill", "canceled", "expired", "rejected", "done_for_day"):
        new["data"]["event"] = event
        settled = read_update(new, heard=0.0)
        assert settled is not None
        assert settled.settles, event


def test_messages_without_an_order_to_look_up_are_none():
    assert read_update(DOCS["listening"], heard=0.0) is None
    assert read_update(DOCS["authorized"], heard=0.0) is None
    no_id = json.loads(json.dumps(DOCS["fill"]))
    del no_id["data"]["order"]["client_order_id"]
    assert read_update(no_id, heard=0.0) is None
    assert read_update("not a message", heard=0.0) is None
    bad_time = json.loads(json.dumps(DOCS["fill"]))
    bad_time["data"]["timestamp"] = "yesterday"
    read = read_update(bad_time, heard=0.0)
    assert read is not None
    assert read.timestamp is None


def test_the_stream_is_on_the_trading_hosts_stream_path():
    # Alpaca's own: wss://paper-api.alpaca.markets/stream (the docs); None lets the SDK pick.
    assert stream_url("https://paper-api.alpaca.markets") == "wss://paper-api.alpaca.markets/stream"
    assert stream_url("http://127.0.0.1:8123") == "ws://127.0.0.1:8123/stream"
    assert stream_url("http://127.0.0.1:8123/") == "ws://127.0.0.1:8123/stream"
    assert stream_url(None) is None
