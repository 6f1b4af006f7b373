"""A perpetual's funding and mark prices on a live feed, read through ccxt before each perp
stage (`engine.perps.PerpBook` awaits `LivePerpTapes.refresh`), behind the same protocol as
a replay's recorded files (`PerpTapeLike`):

- the mark now: the premium index (ccxt `fetch_mark_price`, binanceusdm: GET
  /fapi/v1/premiumIndex, `markPrice`);
- the most adverse mark since the last good refresh: the mark-price candles closed since then
  (ccxt `fetch_ohlcv(..., params={"price": "mark"})`: GET /fapi/v1/markPriceKlines), with the
  mark now;
- the funding times to book: the venue's settled funding (ccxt `fetch_funding_rate_history`:
  GET /fapi/v1/fundingRate) after the ledger's cursor for the position held
  (`ledger.perp_cursor`: the later of the last funding time booked and the position's
  opening), never the last tick, so a funding time a failed refresh missed is booked at the
  next good one, once. The times are the venue's (8h, 4h, 1h, as it settled them: nothing
  assumed). Each is paid on the mark of the funding record (Binance's history gives
  `markPrice`, "mark price associated with a particular funding fee charge"), else the close
  of the mark candle that closed at the funding time (Binance settles on the mark price at
  the funding time; Aster's history has no mark). A time with neither stays unbooked until
  one is there: never a made-up price.

A refresh that fails (the venue down, an answer that is not one) is counted and logged, and
the tick goes on: nothing falls due, the account is valued on the last good mark (said in the
log with its time), the tick is degraded (`stale`: its report's `stale_marks`, the metrics'
`trader_perp_mark_age_seconds`, /readyz), and the next good refresh books what was missed.
Rows are parsed by helper C's download code (`download_perp.parse_funding_row`,
`parse_mark_row`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from structlog.typing import FilteringBoundLogger

from trader.domain import Portfolio, Timeframe, from_epoch_ms, to_epoch_ms
from trader.ledger import Database
from trader.ledger.perp_cursor import FundingCursor, funding_cursors
from trader.market.download_perp import (
    decimal_or_none,
    parse_funding_row,
    parse_mark_row,
    reads_mark_candles,
)
from trader.market.files.funding import FundingRate, MarkCandle, MarkPrices
from trader.market.replay_perp import SAME_INSTANT, PerpTape

PAGE = 1000  # rows a /fundingRate or /markPriceKlines answer holds at most (Binance: 1000/1500)
MOST_PAGES = 10  # a position opened long before the ledger's last funding row: read so far


class LivePerpTape:
    """One perpetual's funding and marks as read at the last refresh (`PerpTapeLike`)."""

    def __init__(self, symbol: str, length_ms: int) -> None:
        self.symbol = symbol
        self.length_ms = length_ms
        self.recorded = PerpTape(symbol, (), None)
        self.due: list[FundingRate] = []
        self.now_mark: Decimal | None = None
        self.now_mark_at: datetime | None = None  # the tick the mark was read at
        self.seen: list[MarkCandle] = []  # the mark candles closed since the last good refresh
        self.checked_at: datetime | None = None  # the last good refresh's tick
        self.failures = 0
        self.cursor: FundingCursor | None = None  # the ledger's, at the last good refresh
        self.on_time_ms = 0  # funding times after this fall in the tick being run

    def held_at(self, rate: FundingRate, now: Decimal) -> Decimal:
        """The position a funding time is paid on: a time of this tick, `now` (after the
        bars' resting fills, before our orders, as a replay pays it); one a failed refresh left
        unbooked, the ledger's position at that time (its fills since taken off)."""
        if rate.at_ms > self.on_time_ms or self.cursor is None:
            return now
        return self.cursor.held_at(from_epoch_ms(rate.at_ms))

    def funding_due(self, after: datetime | None, until: datetime) -> list[FundingRate]:
        """What the last refresh found due (`after`/`until` are the tick's: the ledger's
        cursor chose the times)."""
        return list(self.due)

    def mark(self, at: datetime) -> Decimal | None:
        return self.now_mark

    def funding_mark(self, rate: FundingRate) -> Decimal | None:
        return self.recorded.funding_mark(rate)

    def adverse_mark(self, after: datetime | None, until: datetime, long: bool) -> Decimal | None:
        prices = [c.low if long else c.high for c in self.seen]
        if self.now_mark is not None and self.now_mark_at == until:
            prices.append(self.now_mark)
        if not prices:
            return None
        return min(prices) if long else max(prices)

    def failed(self) -> None:
        self.due, self.seen = [], []
        self.failures += 1


class LivePerpTapes(Mapping[str, LivePerpTape]):
    """The live tapes of the daemon's perpetuals, refreshed together."""

    def __init__(
        self,
        exchange: Any,  # a ccxt async client (the feed's)
        symbols: Sequence[str],
        timeframe: Timeframe,
        database: Database,
        log: FilteringBoundLogger,
    ) -> None:
        self.exchange = exchange
        self.timeframe = timeframe
        self.database = database
        self._log = log
        self.length_ms = int(timeframe.duration.total_seconds() * 1000)
        self.tapes = {s: LivePerpTape(s, self.length_ms) for s in symbols}

    def __getitem__(self, symbol: str) -> LivePerpTape:
        return self.tapes[symbol]

    def __iter__(self) -> Iterator[str]:
        return iter(self.tapes)

    def __len__(self) -> int:
        return len(self.tapes)

    @property
    def failures(self) -> int:
        return sum(t.failures for t in self.tapes.values())

    def stale(self, at: datetime) -> dict[str, datetime | None]:
        """The perpetuals the tick at `at` values on a mark it did not read (its refresh
        failed), with the tick that read the mark in use (None: none yet, the quotes' mid)."""
        return {s: t.now_mark_at for s, t in self.tapes.items() if t.checked_at != at}

    async def refresh(self, at: datetime, after: datetime | None, portfolio: Portfolio) -> None:
        """Read each tape for the tick at `at` (`after`: the last tick booked). A failure is
        counted on the tape and logged; it never fails the tick."""
        try:
            cursors = await self.database.run(lambda c: funding_cursors(c, list(self.tapes)))
        except Exception as error:  # the tick's own ledger write will say what is wrong
            for tape in self.tapes.values():
                self._failed(tape, at, error)
            return
        for symbol, tape in self.tapes.items():
            try:
                await self._refresh(tape, at, after, cursors[symbol], portfolio.amount(symbol))
            except Exception as error:  # the venue down, or an answer that is not one
                self._failed(tape, at, error)

    def _failed(self, tape: LivePerpTape, at: datetime, error: Exception) -> None:
        tape.failed()
        self._log.warning(
            "perp tape refresh failed", symbol=tape.symbol, error=f"{type(error).__name__}: "
            f"{error}", failures=tape.failures,
            valued_on=f"the mark read at {tape.now_mark_at.isoformat()}" if tape.now_mark_at
            else "the quotes' mid (no mark read yet)",
            funding="booked at the next good refresh",
        )  # fmt: skip

    def _funding_after(
        self, tape: LivePerpTape, cursor: FundingCursor, after: datetime | None, held: Decimal
    ) -> datetime | None:
        """Funding times after this one may fall to a position (None: none can)."""
        starts = []
        last = cursor.last
        # The last position in the ledger: held now, or closed since the last good refresh
        # (a funding time a failed refresh missed is still owed on it).
        if last is not None and (
            last.closed_at is None or tape.checked_at is None or tape.checked_at <= last.closed_at
        ):
            starts.append(cursor.after(SAME_INSTANT))
        # One opened by this tick's fills (the ledger has not booked it yet): as a replay does.
        if held != 0 and cursor.held == 0 and after is not None:
            starts.append(after + SAME_INSTANT)
        return min((s for s in starts if s is not None), default=None)

    async def _refresh(
        self,
        tape: LivePerpTape,
        at: datetime,
        after: datetime | None,
        cursor: FundingCursor,
        held: Decimal,
    ) -> None:
        until = to_epoch_ms(at + SAME_INSTANT)
        start = self._funding_after(tape, cursor, after, held)
        rates = await self._rates(tape.symbol, to_epoch_ms(start) + 1, until) if start else []
        since = [to_epoch_ms(t) for t in (tape.checked_at, after) if t is not None]
        since += [r.at_ms for r in rates]
        first = min(since, default=to_epoch_ms(at)) - tape.length_ms
        candles = await self._candles(tape.symbol, first, to_epoch_ms(at))
        mark = await self._mark(tape.symbol)
        recorded = PerpTape(tape.symbol, tuple(rates), MarkPrices(tuple(candles), tape.length_ms))
        # In order: a time without a mark yet, and those after it, wait for the next refresh.
        ready = next((i for i, r in enumerate(rates) if recorded.funding_mark(r) is None), None)
        due = rates if ready is None else rates[:ready]
        if ready is not None:
            self._log.warning(
                "funding time without a mark yet", symbol=tape.symbol,
                funding_time_ms=rates[ready].at_ms, funding="booked once the venue has it",
            )  # fmt: skip
        lo = to_epoch_ms(tape.checked_at or after or at - self.timeframe.duration)
        tape.recorded, tape.due = recorded, due
        tape.seen = [c for c in candles if lo < c.open_ms + tape.length_ms <= to_epoch_ms(at)]
        tape.now_mark, tape.now_mark_at, tape.checked_at = mark, at, at
        tape.cursor = cursor
        tape.on_time_ms = to_epoch_ms(after + SAME_INSTANT) if after is not None else 0

    async def _rates(self, symbol: str, since: int, until: int) -> list[FundingRate]:
        params: dict[str, Any] = {"until": until}
        if str(self.exchange.id).startswith("binance"):
            params["type"] = "swap"
        rates: list[FundingRate] = []
        for _ in range(MOST_PAGES):
            page = await self.exchange.fetch_funding_rate_history(symbol, since, PAGE, params)
            fresh = [r for row in page if (r := parse_funding_row(row)) is not None]
            fresh = sorted((r for r in fresh if since <= r.at_ms <= until), key=lambda r: r.at_ms)
            rates.extend(fresh)
            if len(page) < PAGE or not fresh:
                break
            since = fresh[-1].at_ms + 1
        return rates

    async def _candles(self, symbol: str, since: int, until: int) -> list[MarkCandle]:
        """The mark candles that opened at or after `since` and closed by `until` (none where
        ccxt reads no mark candles here: the mark now alone, never last-price candles)."""
        length = self.length_ms
        candles: list[MarkCandle] = []
        if not reads_mark_candles(self.exchange):
            return candles
        for _ in range(MOST_PAGES):
            page = await self.exchange.fetch_ohlcv(
                symbol, str(self.timeframe), since, PAGE, {"price": "mark"}
            )
            fresh = [c for row in page if (c := parse_mark_row(row)) is not None]
            fresh = [c for c in fresh if since <= c.open_ms and c.open_ms + length <= until]
            candles.extend(c for c in fresh if not candles or c.open_ms > candles[-1].open_ms)
            if len(page) < PAGE or not fresh:
                break
            since = fresh[-1].open_ms + length
        return candles

    async def _mark(self, symbol: str) -> Decimal:
        """The mark now (the premium index's `markPrice`, as the venue wrote it)."""
        if self.exchange.has.get("fetchMarkPrice"):
            answer = await self.exchange.fetch_mark_price(symbol)
        else:
            answer = await self.exchange.fetch_funding_rate(symbol)
        info = answer.get("info") if isinstance(answer.get("info"), dict) else {}
        mark = decimal_or_none(info.get("markPrice")) or decimal_or_none(answer.get("markPrice"))
        if mark is None or mark <= 0:
            raise ValueError(f"{self.exchange.id} gave no mark price for {symbol}: {info}")
        return mark


def live_perp_tapes(
    feed: object, symbols: Sequence[str], timeframe: Timeframe, database: Database,
    log: FilteringBoundLogger,
) -> LivePerpTapes | None:  # fmt: skip
    """The live tapes of a ccxt feed (None: a feed without a ccxt client, e.g. a replay's)."""
    exchange = getattr(feed, "exchange", None)
    if exchange is None or not hasattr(exchange, "fetch_funding_rate_history"):
        return None
    return LivePerpTapes(exchange, symbols, timeframe, database, log)
