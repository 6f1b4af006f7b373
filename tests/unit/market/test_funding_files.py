"""A perpetual's funding and mark-price recordings: read, written, refused when bad, and
downloaded page by page by the times the exchange gives.

Sources: the funding rows' shape is Binance's documented answer to `GET /fapi/v1/fundingRate`
(developers.binance.com, USDⓈ-M futures, "Get Funding Rate History": symbol, fundingRate as
text, fundingTime in ms, markPrice as text, ascending, `startTime`/`endTime` inclusive, `limit`
at most 1000), as ccxt 4.5.90 parses it (ccxt/binance.py `parse_funding_rate_history`: info,
symbol, fundingRate as a float, timestamp, datetime); mark-price candles are ccxt's
`fetch_ohlcv(..., params={"price": "mark"})` rows ([open ms, open, high, low, close, volume]).
The fake exchange below answers as that documentation says; it is a stand-in for the real one
(the download against the futures emulator is in tests/integration/test_perp_backtest.py).
"""

from __future__ import annotations

import asyncio
import itertools
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trader.domain import Timeframe
from trader.market import download_perp
from trader.market.download_perp import download_perp as download
from trader.market.download_perp import parse_funding_row
from trader.market.files.funding import (
    FundingRate,
    MarkCandle,
    PerpDataError,
    find_funding,
    funding_path,
    mark_path,
    read_funding,
    read_marks,
    write_funding,
    write_marks,
)

FIXTURE = Path(__file__).parents[2] / "data" / "perp"
HOUR_MS = 3_600_000
START = datetime(2024, 3, 1, tzinfo=UTC)


def test_binance_s_documented_answer_as_ccxt_parses_it():
    # The example answer on Binance's "Get Funding Rate History" page, through ccxt's parser.
    info = {"symbol": "BTCUSDT", "fundingRate": "-0.03750000", "fundingTime": 1570608000000,
            "markPrice": "34287.54619963"}  # fmt: skip
    parsed = {"info": info, "symbol": "BTC/USDT:USDT", "fundingRate": -0.0375,
              "timestamp": 1570608000000, "datetime": "2019-10-09T08:00:00.000Z"}  # fmt: skip
    assert parse_funding_row(parsed) == FundingRate(
        1570608000000, Decimal("-0.03750000"), Decimal("34287.54619963")
    )
    # Aster's /fapi/v3/fundingRate rows have no markPrice; a row without a time is not one.
    aster = {"info": {"symbol": "BTCUSDT", "fundingTime": 1747209600000,
                      "fundingRate": "0.00010000"}, "fundingRate": 0.0001,
             "timestamp": 1747209600000}  # fmt: skip
    assert parse_funding_row(aster) == FundingRate(1747209600000, Decimal("0.0001"), None)
    assert parse_funding_row({"info": {}, "fundingRate": 0.1, "timestamp": None}) is None


def test_the_fixture_reads_as_written():
    rates = read_funding(FIXTURE / "funding" / "SOLUSDT_1h.csv")
    assert len(rates) == 56
    assert rates[0] == FundingRate(1597132800000, Decimal("0.0001"), Decimal("2.92152328"))
    assert rates[-1].mark is None  # the 4h part gives no markPrice
    gaps = {(b.at_ms - a.at_ms) // HOUR_MS for a, b in itertools.pairwise(rates)}
    assert gaps == {8, 4}
    marks = read_marks(FIXTURE / "mark" / "SOLUSDT_1h.csv", HOUR_MS)
    first = marks.candles[0]
    assert marks.last_at(first.open_ms + HOUR_MS - 1) is None  # not closed yet
    assert marks.last_at(first.open_ms + HOUR_MS) == Decimal("2.9527")
    assert marks.last_at(first.open_ms + 2 * HOUR_MS - 1) == Decimal("2.9527")


def test_the_recordings_sit_beside_the_bars(tmp_path):
    bars = tmp_path / "binanceusdm" / "SOLUSDT_USDT_1h.parquet"
    assert funding_path(bars) == tmp_path / "binanceusdm" / "funding" / "SOLUSDT_USDT_1h.parquet"
    assert mark_path(bars) == tmp_path / "binanceusdm" / "mark" / "SOLUSDT_USDT_1h.parquet"
    assert find_funding(FIXTURE / "SOLUSDT_1h.csv.gz") == FIXTURE / "funding" / "SOLUSDT_1h.csv"
    assert find_funding(bars) is None


decimals = st.decimals(min_value=Decimal("-0.03"), max_value=Decimal("0.03"), places=8)
marks_ = st.none() | st.decimals(min_value=Decimal("0.0001"), max_value=Decimal(10**6), places=8)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**41), decimals, marks_), max_size=20,
                unique_by=lambda r: r[0]))  # fmt: skip
def test_funding_files_round_trip_exactly(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("f") / "funding" / "X_1h.parquet"
    rates = sorted((FundingRate(*row) for row in rows), key=lambda r: r.at_ms)
    write_funding(path, rates)
    assert read_funding(path) == rates


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("fundingRate,fundingTime,markPrice\nabc,1,2\n", "row 1: fundingRate 'abc' is not a num"),
        ("fundingRate,fundingTime,markPrice\n0.1,1,-2\n", "row 1: markPrice '-2' is not positive"),
        ("fundingRate,fundingTime,markPrice\n0.1,1,\n0.2,1,\n", "funding time 1 (epoch ms) is "),
        ("fundingRate,time\n0.1,1\n", "has no column fundingTime, markPrice"),
        ("fundingRate,fundingTime,markPrice\nNaN,1,\n", "row 1: fundingRate 'NaN' is not a num"),
    ],
)
def test_a_bad_funding_file_is_refused_with_where(tmp_path, text, said):
    path = tmp_path / "f.csv"
    path.write_text(text)
    with pytest.raises(PerpDataError, match="^" + re.escape(str(path))) as refused:
        read_funding(path)
    assert said in str(refused.value)


class FakeUsdm:
    """Answers as Binance documents /fapi/v1/fundingRate (startTime and endTime inclusive,
    ascending, at most `limit` rows from startTime) and mark klines, in ccxt's parsed shape."""

    id = "binanceusdm"

    def __init__(self, times: list[int], has_marks: bool = True) -> None:
        self.times = times
        self.has = {"fetchMarkOHLCV": has_marks, "fetchFundingRateHistory": True}
        self.calls: list[tuple[str, int | None, dict[str, Any]]] = []

    async def fetch_funding_rate_history(
        self, symbol: str, since: int | None = None, limit: int | None = None, params: Any = None
    ) -> list[dict[str, Any]]:
        params = params or {}
        self.calls.append(("funding", since, params))
        end = params.get("until", 2**62)
        rows = [t for t in self.times if (since or 0) <= t <= end][: limit or 100]
        return [
            {"info": {"symbol": "SOLUSDT", "fundingRate": f"{i % 7 - 3}.5E-5",
                      "fundingTime": t, "markPrice": "" if i % 2 else "101.5"},
             "symbol": symbol, "fundingRate": (i % 7 - 3) * 1e-5, "timestamp": t}
            for i, t in ((self.times.index(t), t) for t in rows)
        ]  # fmt: skip

    async def fetch_ohlcv(
        self, symbol: str, timeframe: str = "1h", since: int | None = None,
        limit: int | None = None, params: Any = None,
    ) -> list[list[Any]]:  # fmt: skip
        assert params == {"price": "mark"}
        self.calls.append(("mark", since, params))
        first = since or 0
        start = int(START.timestamp() * 1000)
        opens = [start + n * HOUR_MS for n in range(60)]
        return [[t, 100.0, 101.0, 99.0, 100.5, None] for t in opens if t >= first][: limit or 500]


def _times() -> list[int]:
    """Every 8h, then every 4h, then every hour (Binance moves symbols between them)."""
    start = int(START.timestamp() * 1000)
    times = [start + h * HOUR_MS for h in (0, 8, 16)]
    times += [times[-1] + h * HOUR_MS for h in (4, 8, 12)]
    return times + [times[-1] + h * HOUR_MS for h in (1, 2, 3, 4, 5)]


def test_the_download_pages_by_the_exchange_s_own_times_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(download_perp, "FUNDING_PAGE", 4)
    monkeypatch.setattr(download_perp, "MARK_PAGE", 25)
    times = _times()
    bars = tmp_path / "binanceusdm" / "SOLUSDT_USDT_1h.parquet"
    exchange = FakeUsdm(times)
    until = START + timedelta(hours=30)  # before the last hourly times
    report = asyncio.run(download(exchange, "SOL/USDT:USDT", Timeframe("1h"), START, until, bars))
    kept = [t for t in times if t < int(until.timestamp() * 1000)]
    assert [r.at_ms for r in read_funding(report.funding)] == kept
    assert report.intervals_h == (8.0, 4.0, 1.0)
    # Each page starts after the last time the exchange gave, never 8h on.
    starts = [since for kind, since, _ in exchange.calls if kind == "funding"]
    assert starts == [times[0], kept[3] + 1, kept[6] + 1]  # pages of 4, the last empty
    candles = read_marks(report.marks, HOUR_MS).candles  # type: ignore[arg-type]
    assert len(candles) == 30
    assert candles[-1].close == Decimal("100.5")
    # Again with a later end: only what is new is fetched, nothing twice.
    exchange.calls.clear()
    later = START + timedelta(hours=40)
    again = asyncio.run(download(exchange, "SOL/USDT:USDT", Timeframe("1h"), START, later, bars))
    assert [r.at_ms for r in read_funding(again.funding)] == times
    assert exchange.calls[0][1] == kept[-1] + 1
    assert len(read_marks(again.marks, HOUR_MS).candles) == 40  # type: ignore[arg-type]


def test_aster_reads_mark_candles_although_ccxt_s_has_says_no(tmp_path):
    # ccxt 4.5.90 aster.py: `has["fetchMarkOHLCV"]` is False, yet `fetch_ohlcv` with
    # params={"price": "mark"} asks /fapi/v3/markPriceKlines.
    bars = tmp_path / "aster" / "SOLUSDT_USDT_1h.parquet"
    exchange = FakeUsdm(_times(), has_marks=False)
    exchange.id = "aster"
    end = START + timedelta(days=2)
    report = asyncio.run(download(exchange, "SOL/USDT:USDT", Timeframe("1h"), START, end, bars))
    assert report.marks is not None
    assert len(read_marks(report.marks, HOUR_MS).candles) == 48


def test_an_exchange_without_mark_candles_records_funding_alone(tmp_path):
    bars = tmp_path / "otherperp" / "SOLUSDT_USDT_1h.parquet"
    exchange = FakeUsdm(_times(), has_marks=False)
    exchange.id = "otherperp"  # a client whose `has` says no mark candles
    end = START + timedelta(days=2)
    report = asyncio.run(download(exchange, "SOL/USDT:USDT", Timeframe("1h"), START, end, bars))
    assert report.marks is None
    assert not (bars.parent / "mark").exists()
    assert "no mark-price candles" in report.line("SOL/USDT:USDT")
    assert all("type" not in params for _, _, params in exchange.calls)  # binance's alone


def test_no_funding_at_all_is_refused(tmp_path):
    bars = tmp_path / "x" / "SOLUSDT_1h.parquet"
    end = START + timedelta(days=1)
    with pytest.raises(PerpDataError, match="gave no funding rate"):
        asyncio.run(download(FakeUsdm([]), "SOL/USDT", Timeframe("1h"), START, end, bars))


def test_mark_files_round_trip(tmp_path):
    path = tmp_path / "mark" / "X_1h.parquet"
    candles = [MarkCandle(n * HOUR_MS, Decimal("1.5"), Decimal("2"), Decimal("1.25"),
                          Decimal("1.75")) for n in range(3)]  # fmt: skip
    write_marks(path, candles)
    assert read_marks(path, HOUR_MS).candles == tuple(candles)
