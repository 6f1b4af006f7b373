"""The Alpaca emulator's answers about time and the past: the market clock and calendar,
account activities (FILL; CFEE and FEE, the fees posted at the end of the day:
`alpaca_fees`), and the control side's account dump."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

from trader.emulator.alpaca_calendar import calendar_json, clock_json
from trader.emulator.alpaca_data import when
from trader.emulator.alpaca_fees import FEE_KINDS, fee_activities
from trader.emulator.alpaca_wire import fill_json, order_json, rfc3339, text
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
        return web.json_response(clock_json(self.venue.clock(), self.sessions))

    async def calendar(self, request: web.Request) -> web.Response:
        if self.sessions is None:
            return web.json_response([])
        today = self.venue.clock().astimezone(NEW_YORK).date()
        start = request.query.get("start")
        end = request.query.get("end")
        first = datetime.fromisoformat(start).date() if start else today
        last = datetime.fromisoformat(end).date() if end else today
        return web.json_response(calendar_json(self.sessions, first, last))

    async def activities(self, request: web.Request) -> web.Response:
        account = self.account_of(request)
        kind = request.match_info["kind"]
        if kind != "FILL" and kind not in FEE_KINDS:
            raise Refused(422, 40010001, f"invalid activity type: {kind}")
        if kind == "FILL":
            instrument = self.venue.instrument
            records = [
                fill_json(t, account.orders[t.order_id], instrument(t.symbol))
                for t in account.trades
            ]
        else:  # posted after the end of the fills' day
            records = fee_activities(kind, account, self.venue)
        query = request.query
        if query.get("after"):  # a fee's time: its date's
            records = [r for r in records if _when(r)[0] > when(query["after"])]
        if query.get("until"):
            records = [r for r in records if _when(r)[0] <= when(query["until"])]
        descending = query.get("direction", "desc") == "desc"
        # In time order (an id's New York time repeats an hour each November), the id after.
        records.sort(key=_when, reverse=descending)
        token = query.get("page_token")
        if token:
            ids = [r["id"] for r in records]
            records = records[ids.index(token) + 1 :] if token in ids else []
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


def _when(record: dict[str, Any]) -> tuple[datetime, str]:
    """When an activity happened (a FILL's transaction time, else its date's start), then
    its id: the order Alpaca pages them in."""
    stamp = record.get("transaction_time") or f"{record.get('date')}T00:00:00+00:00"
    return when(str(stamp)), str(record["id"])
