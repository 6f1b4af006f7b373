"""Adjusted and raw prices, splits named in raw ones, and a file without volume, read from
real files: AAPL and MSFT daily bars with a 2:1 split and Quandl WIKI's `Adj Close`
(bokeh-sampledata), the VIX index without volume (vega-datasets), GOOG (no split in its span,
the `backtesting` package) and SOL/USDT hours (crypto: no split ever)."""

from __future__ import annotations

import csv
import gzip
import math
from datetime import UTC, datetime
from pathlib import Path

import backtesting
import pytest

from tests.recorded import AAPL_1D, MSFT_1D, SOLUSDT_1H, VIX_1D_NO_VOLUME
from trader.domain import Timeframe, from_epoch_ms
from trader.market.files.options import ReadOptions
from trader.market.hygiene import bad_rows
from trader.market.replay import read_recording

GOOG = Path(backtesting.__file__).parent / "test" / "GOOG.csv"
RAW = ReadOptions(prices="raw")


def table(path: Path) -> tuple[list[str], list[list[str]]]:
    with gzip.open(path, "rt", newline="") as handle:
        header, *rows = list(csv.reader(handle))
    return header, rows


def write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    return path


def day(ms: int) -> str:
    return f"{from_epoch_ms(ms):%Y-%m-%d}"


def test_adjusted_prices_are_each_rows_prices_times_adj_close_over_close():
    header, rows = table(AAPL_1D)
    at = {name: i for i, name in enumerate(header)}
    recording = read_recording(AAPL_1D, "AAPL/USD")
    assert len(recording.rows) == len(rows) == 755
    for row, (_, open_, high, low, close, volume, quote) in zip(rows, recording.rows, strict=True):
        ratio = float(row[at["Adj Close"]]) / float(row[at["Close"]])
        assert close == pytest.approx(float(row[at["Adj Close"]]), rel=1e-12)
        assert (open_, high, low) == pytest.approx(
            tuple(float(row[at[n]]) * ratio for n in ("Open", "High", "Low")), rel=1e-12
        )
        assert volume * ratio == pytest.approx(float(row[at["Volume"]]), rel=1e-12)
        assert quote is None
    # AAPL's adjusted prices in 2004 are far below the raw ones (later splits and dividends).
    assert recording.rows[0][4] == pytest.approx(1.3673882966019)
    # Every adjusted bar is still a bar: the scaling keeps high >= open, close >= low.
    assert not any(bad_rows(recording.rows, "AAPL/USD", Timeframe("1d")))
    assert recording.report is not None
    notes = recording.report.notes()
    assert any(
        n.startswith("adjusted prices traded: open, high, low and close x Adj Close") for n in notes
    )
    assert recording.report.splits == ()  # the split is in the adjusted close already


def test_raw_prices_name_the_split_with_its_date_and_ratio_confirmed_by_the_adjusted_close():
    raw = read_recording(AAPL_1D, "AAPL/USD", options=RAW)
    header, rows = table(AAPL_1D)
    at = {name: i for i, name in enumerate(header)}
    assert [r[4] for r in raw.rows] == [float(row[at["Close"]]) for row in rows]
    assert raw.report is not None
    (split,) = raw.report.splits
    assert (day(split.start_ms), split.name, split.before, split.after) == (
        "2005-02-28", "2:1", 88.99, 44.86,
    )  # fmt: skip
    assert split.confirmed is True
    assert split.adjusted_move == pytest.approx(5.7651352430039 / 5.7182276557615)
    assert split.deviations > 20
    assert any(
        n.startswith("2005-02-28: close 88.99 -> 44.86 (-49.6%) in one bar") and "a 2:1 split" in n
        for n in raw.report.notes()
    )
    assert any(n.startswith("raw prices traded as written") for n in raw.report.notes())


def test_msft_names_its_split_and_not_its_special_dividend():
    raw = read_recording(MSFT_1D, "MSFT/USD", options=RAW)
    assert raw.report is not None
    # 2003-02-18: the 2:1 split; 2004-11-15 (the $3 special dividend, -8.6%) is no split.
    assert [(day(s.start_ms), s.name, s.confirmed) for s in raw.report.splits] == [
        ("2003-02-18", "2:1", True)
    ]
    adjusted = read_recording(MSFT_1D, "MSFT/USD")
    assert adjusted.report is not None
    assert adjusted.report.splits == ()


def test_a_move_the_adjusted_close_made_too_is_real_and_not_named(tmp_path):
    # The same file with its adjusted close halved from the split on: as if AAPL had crashed.
    header, rows = table(AAPL_1D)
    at = header.index("Adj Close")
    crashed = [
        [*row[:at], str(float(row[at]) / 2), *row[at + 1 :]] if row[1] >= "2005-02-28" else row
        for row in rows
    ]
    path = write(tmp_path / "AAPL.csv", header, crashed)
    report = read_recording(path, "AAPL/USD", options=RAW).report
    assert report is not None
    assert report.splits == ()


def test_without_an_adjusted_close_a_split_like_move_is_named_unconfirmed(tmp_path):
    header, rows = table(AAPL_1D)
    at = header.index("Adj Close")
    path = write(tmp_path / "AAPL.csv", header[:at], [row[:at] for row in rows])
    recording = read_recording(path, "AAPL/USD")
    assert recording.report is not None
    assert recording.report.adjustment is None  # nothing to adjust by: traded as written
    (split,) = recording.report.splits
    assert (day(split.start_ms), split.name, split.confirmed) == ("2005-02-28", "2:1", None)
    assert "like a 2:1 split (no adjusted close to confirm it)" in split.describe()


@pytest.mark.parametrize(("path", "symbol"), [(GOOG, "GOOG/USD"), (SOLUSDT_1H, None)])
def test_series_without_a_split_name_none(path, symbol):
    # GOOG 2004-2013 (its split came in 2014) and 4,000 hours of SOL/USDT, fat tails and all.
    recording = read_recording(path, symbol)
    assert recording.report is not None
    assert recording.report.splits == ()


def test_a_file_without_volume_is_read_with_its_volume_unknown():
    recording = read_recording(VIX_1D_NO_VOLUME, "VIX/USD")
    header, rows = table(VIX_1D_NO_VOLUME)
    assert header == ["date", "open", "high", "low", "close"]
    assert len(recording.rows) == len(rows) == 44
    assert recording.rows[0] == (
        int(datetime(2009, 6, 1, tzinfo=UTC).timestamp() * 1000), 28.7, 30.05, 28.45, 30.04,
        0.0, None,
    )  # fmt: skip
    assert all(r[5] == 0.0 for r in recording.rows)
    assert recording.report is not None
    assert recording.report.volume_known is False
    assert "no volume column: volume unknown (0 in the bars read)" in recording.report.notes()
    assert recording.report.log_fields()["volume_known"] is False


def test_a_row_whose_adjusted_close_is_missing_is_dropped_as_a_bad_row(tmp_path):
    header, rows = table(MSFT_1D)
    at = header.index("Adj Close")
    rows[300][at] = ""
    recording = read_recording(write(tmp_path / "MSFT.csv", header, rows), "MSFT/USD")
    assert math.isnan(recording.rows[300][4])
    assert bad_rows(recording.rows, "MSFT/USD", Timeframe("1d")).count(True) == 1
    assert recording.report is not None
    assert recording.report.adjustment is not None
    assert recording.report.adjustment.unusable == 1
