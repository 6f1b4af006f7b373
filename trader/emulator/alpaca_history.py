"""The Alpaca emulator's answers about time and the past: the market clock and calendar,
account activities (FILL, and CFEE for crypto fees), and the control side's account dump."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from aiohttp import web

from trader.emulator.alpaca_data import when
from trader.emulator.alpaca_wire import fee_json, fill_json, order_json, rfc3339, text
from trader.emulator.plumbing import accounts_state
from trader.emulator.sessions import NEW_YORK, Sessions
from trader.emulator.venue import Account, Venue


class Refused(Exception):
    """An Alpaca error answer: HTTP status, Alpaca's code, the message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class AlpacaHistory:
    venue: Venue
    sessions: Sessions | None
    account_of: Callable[[web.Request], Account]

    def routes(self, app: web.Application) -> None:
        get = app.router.add_get
        get("/v2/clock", self.clock)
        get("/v2/calendar", self.calendar)
        get("/v2/account/activities/{kind}", self.activities)
        get("/__emulator__/account", self.accounts_state)

    async def clock(self, request: web.Request) -> web.Response:
        now = self.venue.clock()
        sessions = self.sessions
        local = now.astimezone(NEW_YORK)
        if sessions is None:
            return web.json_response({"timestamp": local.isoformat(), "is_open": False,
                                      "next_open": None, "next_close": None})  # fmt: skip
        upcoming = [sessions.next_open(now), sessions.next_close(now)]
        nxt = [t.astimezone(NEW_YORK).isoformat() if t else None for t in upcoming]
        return web.json_response(
            {"timestamp": local.isoformat(), "is_open": sessions.is_open(now),
             "next_open": nxt[0], "next_close": nxt[1]}
        )  # fmt: skip

    async def calendar(self, request: web.Request) -> web.Response:
        if self.sessions is None:
            return web.json_response([])
        today = self.venue.clock().astimezone(NEW_YORK).date()
        start = request.query.get("start")
        end = request.query.get("end")
        first = datetime.fromisoformat(start).date() if start else today
        last = datetime.fromisoformat(end).date() if end else today
        return web.json_response([
            {"date": d.isoformat(), "open": o.strftime("%H:%M"), "close": c.strftime("%H:%M"),
             "session_open": "0400", "session_close": "2000", "settlement_date": d.isoformat()}
            for d, o, c in self.sessions.days(first, last)
        ])  # fmt: skip

    async def activities(self, request: web.Request) -> web.Response:
        account = self.account_of(request)
        kind = request.match_info["kind"]
        if kind not in {"FILL", "CFEE"}:
            raise Refused(422, 40010001, f"invalid activity type: {kind}")
        records = []
        for trade in account.trades:
            order = account.orders[trade.order_id]
            instrument = self.venue.instrument(trade.symbol)
            if kind == "FILL":
                records.append(fill_json(trade, order, instrument))
            elif trade.commission and instrument.asset_class == "crypto":
                records.append(fee_json(trade, order, instrument))
        query = request.query
        if query.get("after"):
            records = [r for r in records if when(r["transaction_time"]) > when(query["after"])]
        if query.get("until"):
            records = [r for r in records if when(r["transaction_time"]) <= when(query["until"])]
        descending = query.get("direction", "desc") == "desc"
        records.sort(key=lambda r: str(r["id"]), reverse=descending)
        token = query.get("page_token")
        if token:
            records = [r for r in records if (r["id"] < token if descending else r["id"] > token)]
        size = min(int(query.get("page_size") or 100), 100)
        return web.json_response(records[:size])

    async def accounts_state(self, request: web.Request) -> web.Response:
        """Every account's balances, orders and trades (the emulator's control side)."""
        instrument = self.venue.instrument
        state = accounts_state(
            self.venue, text, lambda _, o: order_json(o, instrument(o.symbol)),
            lambda account, t: fill_json(t, account.orders[t.order_id], instrument(t.symbol))
            | {"commission": text(t.commission), "commission_asset": t.commission_asset},
        )  # fmt: skip
        now = rfc3339(self.venue.clock())
        return web.json_response({key: account | {"now": now} for key, account in state.items()})
