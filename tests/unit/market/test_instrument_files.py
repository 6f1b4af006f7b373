"""Files naming several instruments, directories of files, rows dated after now and a shuffled
file (issue 39), on real daily stock prices: tests/data's excerpts of bokeh-sampledata's Quandl
WIKI prices (tests/data/README.md), changed at run time where a case needs it."""

from __future__ import annotations

import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.recorded import AAPL_1D, MSFT_1D, SOLUSDT_1H, STOCKS_5_TICKERS_1D
from tests.unit.market.test_files import expected, table_of, write
from trader.market.files.options import ReadOptions, ReplayDataError
from trader.market.files.read import read_bar_file
from trader.market.replay import RecordingsRequestError, read_recording, read_recordings

TICKERS = ("AAPL", "FB", "GOOG", "IBM", "MSFT")  # the file's, 196 rows each (its README)
RAW = ReadOptions(prices="raw")  # prices as written, to compare with the file's own columns


def by_date(path: Path) -> Path:
    """The five tickers' rows sorted by date: each date's five rows side by side."""
    header, rows = table_of(STOCKS_5_TICKERS_1D)
    return write(path, header, sorted(rows, key=lambda row: row[1]))


def file_rows_of(ticker: str) -> list[tuple[str, float]]:
    """The ticker's dates and closes as the file writes them (csv, not the reader)."""
    header, rows = table_of(STOCKS_5_TICKERS_1D)
    at = {name: i for i, name in enumerate(header)}
    return [(r[at["Date"]], float(r[at["Close"]])) for r in rows if r[at["Ticker"]] == ticker]


def dates_and_closes(rows: list[tuple]) -> list[tuple[str, float]]:
    return [(datetime.fromtimestamp(r[0] / 1000, UTC).date().isoformat(), r[4]) for r in rows]


def test_a_file_of_five_tickers_is_refused_naming_each_with_its_rows_and_the_way_out(tmp_path):
    counts = ", ".join(f"{ticker}: 196 rows" for ticker in TICKERS)
    for path in (STOCKS_5_TICKERS_1D, by_date(tmp_path / "stocks.csv")):
        with pytest.raises(ReplayDataError) as refused:
            read_recording(path)
        message = str(refused.value)
        assert message.startswith(f"{path}: column Ticker names 5 instruments ({counts}); ")
        assert ("--symbol AAPL" in message, "--data DIR" in message) == (True, True)


@pytest.mark.parametrize("ticker", TICKERS)
def test_each_ticker_is_its_own_rows_whether_the_file_runs_by_ticker_or_by_date(tmp_path, ticker):
    interleaved = by_date(tmp_path / "stocks.csv")
    as_recorded = read_recording(STOCKS_5_TICKERS_1D, ticker, options=RAW)
    assert dates_and_closes(as_recorded.rows) == file_rows_of(ticker)
    assert read_recording(interleaved, ticker, options=RAW).rows == as_recorded.rows
    chosen = read_recording(interleaved, options=ReadOptions(prices="raw", tickers=(ticker,)))
    assert chosen.rows == as_recorded.rows
    assert (as_recorded.symbol, chosen.symbol) == (f"{ticker}/USD", f"{ticker}/USD")
    assert as_recorded.report is not None
    assert "Ticker" not in as_recorded.report.ignored_columns
    assert as_recorded.report.rows_read == 196
    assert f"rows of {ticker} (column Ticker), 784 rows of 4 others left out" in (
        as_recorded.report.notes()
    )
    assert chosen.notes == (
        f"symbol {ticker}/USD from its column Ticker ({ticker}), its quote currency USD "
        f"assumed (give --symbol {ticker}/EUR, say, for another)",
    )


def test_several_symbols_of_one_file_are_read_one_recording_each(tmp_path):
    interleaved = by_date(tmp_path / "stocks.csv")
    both = read_recordings([interleaved], ["IBM/USD", "MSFT"], RAW)
    assert [r.symbol for r in both] == ["IBM/USD", "MSFT/USD"]
    assert [dates_and_closes(r.rows) for r in both] == [file_rows_of("IBM"), file_rows_of("MSFT")]
    assert both[0].notes == ()  # a whole symbol given: nothing was inferred
    with pytest.raises(RecordingsRequestError, match="as many --symbol as --ticker"):
        read_recordings([interleaved], ["IBM/USD"], ReadOptions(tickers=("IBM", "FB")))
    with pytest.raises(RecordingsRequestError, match="one symbol per file"):
        read_recordings([interleaved, AAPL_1D], ["IBM/USD", "A/USD", "B/USD"])


def test_an_instrument_the_file_does_not_hold_is_refused_listing_what_it_holds(tmp_path):
    with pytest.raises(ReplayDataError, match=r"--symbol XOM/USD: no rows for XOM/USD: column "
                       r"Ticker holds AAPL: 196 rows, FB: 196 rows, .*--ticker VALUE"):  # fmt: skip
        read_recording(STOCKS_5_TICKERS_1D, "XOM/USD")
    with pytest.raises(ReplayDataError, match="--ticker XOM: no rows for XOM"):
        read_recording(STOCKS_5_TICKERS_1D, options=ReadOptions(tickers=("XOM",)))
    # A one-ticker file read for another symbol: the file's name, or --symbol's order, is wrong.
    with pytest.raises(ReplayDataError, match=r"--symbol AAPL/USD: .*holds only MSFT: 756 rows"):
        read_recording(MSFT_1D, "AAPL/USD")
    with pytest.raises(ReplayDataError, match="--ticker IBM: the file has no column naming"):
        read_recording(SOLUSDT_1H, options=ReadOptions(tickers=("IBM",)))


def test_a_one_ticker_column_names_the_symbol_and_must_agree_with_the_file_name(tmp_path):
    header, rows = table_of(AAPL_1D)
    unnamed = read_recording(write(tmp_path / "prices.csv", header, rows))
    assert unnamed.symbol == "AAPL/USD"
    assert unnamed.notes[0].startswith("symbol AAPL/USD from its column Ticker (AAPL), its quote")
    assert unnamed.report is not None
    assert unnamed.report.notes()[0] == "rows of AAPL (column Ticker)"
    assert unnamed.rows == read_recording(AAPL_1D).rows
    assert read_recording(AAPL_1D).notes[0].startswith("symbol AAPL/USD from the file name, its")
    with pytest.raises(ReplayDataError, match=r"name says MSFT but its column Ticker \(AAPL\)"):
        read_recording(write(tmp_path / "MSFT_1d.csv", header, rows))


def test_a_directory_is_one_symbol_a_file_named_from_each_name(tmp_path):
    folder = tmp_path / "daily"
    folder.mkdir()
    aapl, msft = write(folder / "AAPL_1d.csv", *table_of(AAPL_1D)), folder / "MSFT_USD_1d.csv"
    write(msft, *table_of(MSFT_1D))
    (folder / "README.md").write_text("where the files came from\n")
    recordings = read_recordings([folder])
    assert [(r.symbol, r.path) for r in recordings] == [("AAPL/USD", aapl), ("MSFT/USD", msft)]
    assert recordings[0].notes == (
        "symbol AAPL/USD from the file name, its quote currency USD assumed (give --symbol "
        "AAPL/EUR, say, for another)",
        f"left out of {folder}: README.md (not CSV or Parquet)",
    )
    assert recordings[1].notes == ("symbol MSFT/USD from the file name",)
    assert recordings[1].rows == read_recording(MSFT_1D, "MSFT/USD").rows
    with pytest.raises(RecordingsRequestError, match="more than one file for AAPL/USD"):
        read_recordings([folder, AAPL_1D])
    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy(folder / "README.md", empty)
    with pytest.raises(ReplayDataError, match="is a directory without CSV or Parquet files"):
        read_recordings([empty])


def test_a_name_gives_a_ticker_only_before_a_timeframe(tmp_path):
    header, rows = table_of(SOLUSDT_1H)
    for name, symbol in (("GOOG_1d.csv", "GOOG/USD"), ("BTC_USDT_1h.csv", "BTC/USDT")):
        assert read_recording(write(tmp_path / name, header, rows[:3])).symbol == symbol
    for name in ("XSHG_600977_5min.csv", "prices_1d.csv", "GOOG.csv"):
        with pytest.raises(ReplayDataError, match="cannot tell the symbol"):
            read_recording(write(tmp_path / name, header, rows[:3]))


def test_a_row_after_now_plus_one_bar_is_refused_naming_it(tmp_path):
    header, rows = table_of(AAPL_1D)
    last = datetime(2006, 12, 29, tzinfo=UTC)  # the file's last date
    at_last_bar = ReadOptions(now=last - timedelta(days=1))  # the last bar is one bar ahead
    assert len(read_bar_file(AAPL_1D, at_last_bar).rows) == 755
    with pytest.raises(ReplayDataError, match=r"data row 755 is dated 2006-12-29 00:00:00 UTC"):
        read_bar_file(AAPL_1D, ReadOptions(now=last - timedelta(days=2)))
    moved = [list(row) for row in rows]
    moved[99][1] = "2011-12-29"  # five years after the file's end
    path = write(tmp_path / "AAPL_1d.csv", header, moved)
    with pytest.raises(ReplayDataError) as refused:
        read_recording(path, options=ReadOptions(now=last))
    assert str(refused.value) == (
        f"{path}: data row 100 is dated 2011-12-29 00:00:00 UTC, after now (2006-12-29 "
        "00:00:00 UTC) plus one bar; correct or remove it"
    )


def test_naive_times_may_be_ahead_by_any_zone_but_times_with_offsets_may_not(tmp_path):
    header, rows = table_of(SOLUSDT_1H)
    last = datetime.fromisoformat(rows[-1][0]).replace(tzinfo=UTC)
    now = ReadOptions(now=last - timedelta(hours=13))  # Beijing wall clock read as UTC: +8h
    assert len(read_bar_file(SOLUSDT_1H, now).rows) == len(rows)
    zoned = [[f"{row[0]}+00:00", *row[1:]] for row in rows]
    with pytest.raises(ReplayDataError, match=rf"data row {len(rows) - 11} is dated .*12 rows"):
        read_bar_file(write(tmp_path / "SOLUSDT_1h.csv", header, zoned), now)


def test_mixed_offsets_written_into_a_real_file_are_named_with_their_rows(tmp_path):
    header, rows = table_of(SOLUSDT_1H)
    damaged = [[f"{r[0]}{'+08:00' if 500 <= i < 530 else 'Z'}", *r[1:]] for i, r in enumerate(rows)]
    path = write(tmp_path / "SOLUSDT_1h.csv", header, damaged)
    with pytest.raises(ReplayDataError, match=rf"\+00:00 \({len(rows) - 30} rows\), \+08:00 "
                       r"\(30 rows\); if each row's offset is right, name the zone"):  # fmt: skip
        read_bar_file(path)
    with pytest.raises(
        ReplayDataError, match=r"rows' offsets are not Asia/Shanghai's .* data row 1:"
    ):
        read_bar_file(path, ReadOptions(timezone="Asia/Shanghai"))
    one_offset = [[f"{r[0]}Z", *r[1:]] for r in rows]  # Z alone is one offset: read as ever
    assert read_bar_file(write(tmp_path / "z.csv", header, one_offset)).rows == expected(
        table_of(SOLUSDT_1H)
    )


def test_a_shuffled_file_is_sorted_without_being_called_reversed(tmp_path):
    header, rows = table_of(SOLUSDT_1H)
    first, rest = rows[:400], rows[400:1000]  # 400 newest-first, 600 shuffled
    shuffled = list(rest)
    random.Random(39).shuffle(shuffled)  # noqa: S311 - a fixed order, not a secret
    path = write(tmp_path / "SOLUSDT_1h.csv", header, [*first[::-1], *shuffled])
    report = read_bar_file(path).report
    assert (report.reversed, report.moved_rows > 500) == (False, True)
    assert not any("newest-first" in note for note in report.notes())
    newest_first = [*rows[:1000][::-1]]
    newest_first[10], newest_first[500] = newest_first[500], newest_first[10]
    mostly = read_bar_file(write(tmp_path / "b.csv", header, newest_first)).report
    assert (mostly.reversed, mostly.moved_rows) == (True, 2)
    assert read_bar_file(path).rows == expected((header, rows[:1000]))
