"""Files of bars as people really have them: every spelling of the times, order and duplicates
repaired and reported, and a plain refusal, naming the file, for anything that is not bars.

The real series are the excerpts in tests/data and the files the `backtesting` package ships;
each variant is written from them at test time and must read back to the same bars. The oracle
is Python's csv module, `datetime.fromisoformat` and `float`, independent of pyarrow."""

from __future__ import annotations

import argparse
import csv
import functools
import gzip
import math
import random
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import backtesting
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from structlog.testing import capture_logs

from tests.recorded import SOLUSDT_1H_2022, XSHG_600977_5MIN
from trader.cli.options import add_reading_options, reading_options
from trader.domain import Timeframe, from_epoch_ms
from trader.market.files.options import ReadOptions, ReplayDataError
from trader.market.files.report import AWARE
from trader.market.replay import log_reading, read_recording

SOL, XSHG = SOLUSDT_1H_2022, XSHG_600977_5MIN
PACKAGED = Path(backtesting.__file__).parent / "test"
GOOG, EURUSD = PACKAGED / "GOOG.csv", PACKAGED / "EURUSD.csv"
BERLIN = ZoneInfo("Europe/Berlin")
Table = tuple[list[str], list[list[str]]]


@functools.cache
def table_of(path: Path) -> Table:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as handle:
        header, *rows = list(csv.reader(handle))
    return header, rows


def write(path: Path, header: list[str], rows: list[list[str]], delimiter: str = ",") -> Path:
    with path.open("w", newline="") as handle:
        csv.writer(handle, delimiter=delimiter).writerows([header, *rows])
    return path


def utc_ms(text: str) -> int:
    parsed = datetime.fromisoformat(text)
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return (parsed - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def expected(table: Table) -> list[tuple]:
    """Rows as the oracle reads them: times in the first column, naive ones as UTC."""
    header, rows = table
    at = {name.lower(): i for i, name in enumerate(header)}
    prices = ("open", "high", "low", "close", "volume")
    return [
        (
            utc_ms(row[0]),
            *(float(row[at[name]]) for name in prices),
            float(row[at["amount"]]) if "amount" in at else None,
        )
        for row in rows
    ]


def with_times(table: Table, spell: Callable[[str], str]) -> list[list[str]]:
    """The rows with each time (first column) written another way."""
    return [[spell(row[0]), *row[1:]] for row in table[1]]


def test_goog_is_daily_bars_dated_by_its_unnamed_first_column():
    recording = read_recording(GOOG, "GOOG/USD")
    assert recording.timeframe == Timeframe("1d")
    assert len(recording.rows) == 2148
    assert from_epoch_ms(recording.rows[0][0]) == datetime(2004, 8, 19, tzinfo=UTC)
    assert recording.rows == expected(table_of(GOOG))
    report = recording.report
    assert report is not None
    assert (report.time_column_found, report.time_kind) == ("first column", "date")
    assert not recording.naive_times  # a date is a day, 00:00 UTC, not a wall-clock time
    assert report.notes() == []


def test_eurusd_is_hourly_and_says_its_naive_times_were_read_as_utc():
    recording = read_recording(EURUSD, "EUR/USD")
    assert recording.timeframe == Timeframe("1h")
    assert recording.rows == expected(table_of(EURUSD))
    assert recording.naive_times
    assert recording.report is not None
    assert recording.report.notes() == ["naive times read as UTC"]


def test_the_compressed_excerpts_read_exactly_and_a_zone_can_be_given():
    assert read_recording(SOL).rows == expected(table_of(SOL))
    utc = read_recording(XSHG, "600977/CNY")
    assert utc.rows == expected(table_of(XSHG))
    assert utc.naive_times
    beijing = read_recording(XSHG, "600977/CNY", options=ReadOptions(timezone="Asia/Shanghai"))
    assert [row[0] for row in beijing.rows] == [row[0] - 8 * 3_600_000 for row in utc.rows]
    assert beijing.rows[0][1:] == utc.rows[0][1:]
    assert not beijing.naive_times
    assert beijing.report is not None
    assert beijing.report.notes() == ["naive times read in Asia/Shanghai and converted to UTC"]


def test_a_newest_first_file_is_reversed(tmp_path):
    header, rows = table_of(SOL)
    path = write(tmp_path / "SOLUSDT_1h.csv", header, rows[::-1])
    recording = read_recording(path)
    assert recording.rows == expected(table_of(SOL))
    assert recording.timeframe == Timeframe("1h")
    assert recording.report is not None
    assert (recording.report.reversed, recording.report.moved_rows) == (True, 0)
    assert "newest-first rows reversed" in recording.report.notes()
    strict = read_recording(path, options=ReadOptions(strict=True))  # reversed is not unsorted
    assert strict.rows == recording.rows


def test_rows_out_of_place_are_moved_back_and_counted(tmp_path):
    header, rows = table_of(SOL)
    moved = list(rows)
    for source, target in ((10, 500), (700, 3), (1500, 1999)):
        moved.insert(target, moved.pop(source))
    recording = read_recording(write(tmp_path / "SOLUSDT_1h.csv", header, moved))
    assert recording.rows == expected(table_of(SOL))
    assert recording.report is not None
    assert (recording.report.reversed, recording.report.moved_rows) == (False, 3)
    assert "3 rows out of time order moved into place" in recording.report.notes()


def test_a_shuffled_file_is_sorted_unless_strict(tmp_path):
    header, rows = table_of(SOL)
    shuffled = list(rows)
    random.Random(7).shuffle(shuffled)  # noqa: S311 - a fixed order, not a secret
    path = write(tmp_path / "SOLUSDT_1h.csv", header, shuffled)
    recording = read_recording(path)
    assert recording.rows == expected(table_of(SOL))
    assert recording.timeframe == Timeframe("1h")
    assert recording.report is not None
    assert recording.report.moved_rows > len(rows) // 2
    with pytest.raises(ReplayDataError, match=r"not in time order .* --strict"):
        read_recording(path, options=ReadOptions(strict=True))


def test_repeated_rows_are_dropped_and_a_time_with_two_versions_is_reported(tmp_path):
    header, rows = table_of(SOL)
    rows = rows[:300]
    other = [*rows[50][:4], str(float(rows[50][4]) * 2), *rows[50][5:]]  # another close
    written = []
    for i, row in enumerate(rows):
        written += [row, row] if i in (20, 40, 99) else [row, other] if i == 50 else [row]
    path = write(tmp_path / "SOLUSDT_1h.csv", header, written)
    recording = read_recording(path)
    oracle = expected((header, rows))
    assert recording.rows == oracle
    report = recording.report
    assert report is not None
    assert (report.rows_read, report.identical_duplicates, report.moved_rows) == (304, 3, 0)
    assert report.conflicting_duplicates == 1
    assert report.first_conflict is not None
    assert report.first_conflict.start_ms == oracle[50][0]
    assert report.first_conflict.kept == oracle[50]
    assert report.first_conflict.dropped[4] == 2 * oracle[50][4]
    assert any("1 rows repeat a time with other values" in note for note in report.notes())
    with pytest.raises(ReplayDataError, match="repeat a time with different values"):
        read_recording(path, options=ReadOptions(strict=True))
    # The first in the file is kept, whichever it is; identical repeats pass --strict.
    first_other = write(tmp_path / "SOLUSDT_1h.csv", header, [*rows[:50], other, *rows[50:]])
    assert read_recording(first_other).rows[50][4] == 2 * oracle[50][4]
    only_identical = write(tmp_path / "SOLUSDT_1h.csv", header, [*rows, rows[-1]])
    assert read_recording(only_identical, options=ReadOptions(strict=True)).rows == oracle


def _day(text: str) -> date:
    return date.fromisoformat(text)


@pytest.mark.parametrize(
    ("spell", "order"),
    [
        (lambda d: f"{_day(d):%m/%d/%Y}", "month-first"),
        (lambda d: f"{_day(d).month}/{_day(d).day}/{_day(d).year}", "month-first"),
        (lambda d: f"{_day(d):%d/%m/%Y}", "day-first"),
        (lambda d: f"{_day(d):%d.%m.%Y}", "day-first"),
        (lambda d: f"{_day(d):%Y/%m/%d}", "iso"),
    ],
    ids=["08/19/2004", "8/19/2004", "19/08/2004", "19.08.2004", "2004/08/19"],
)
def test_dates_in_any_field_order_the_file_shows_read_as_the_iso_file(tmp_path, spell, order):
    header, _ = table_of(GOOG)
    path = write(tmp_path / "goog.csv", header, with_times(table_of(GOOG), spell))
    recording = read_recording(path, "GOOG/USD")
    assert recording.rows == read_recording(GOOG, "GOOG/USD").rows
    assert recording.timeframe == Timeframe("1d")
    assert recording.report is not None
    assert recording.report.date_order == order
    assert not recording.naive_times


def test_dates_that_read_either_way_are_refused_until_their_format_is_given(tmp_path):
    header, rows = table_of(GOOG)
    early = [row for row in rows if _day(row[0]).day <= 12]
    path = write(tmp_path / "goog.csv", header, with_times((header, early), _us_date))
    with pytest.raises(
        ReplayDataError, match=r"goog.csv: .*month/day or day/month alike.*--date-format"
    ):
        read_recording(path, "GOOG/USD")
    given = read_recording(path, "GOOG/USD", options=ReadOptions(date_format="%m/%d/%Y"))
    assert given.rows == expected((header, early))
    assert given.report is not None
    assert (given.report.date_order, given.report.time_kind) == ("format", "text %m/%d/%Y")
    both = write(
        tmp_path / "both.csv", header, [["13/01/2005", *rows[0][1:]], ["01/14/2005", *rows[1][1:]]]
    )
    with pytest.raises(ReplayDataError, match=r"day-first \('13/01/2005'\) and month-first"):
        read_recording(both, "GOOG/USD")


def _us_date(text: str) -> str:
    return f"{_day(text):%m/%d/%Y}"


@pytest.mark.parametrize(
    "spell",
    [
        lambda t: f"{_hour(t).month}/{_hour(t).day}/{_hour(t).year} {_hour(t):%H:%M}",
        lambda t: f"{_hour(t):%m/%d/%Y %I:%M %p}",
        lambda t: f"{_hour(t):%d.%m.%Y %H:%M:%S}",
    ],
    ids=["4/19/2017 09:00", "04/19/2017 09:00 AM", "19.04.2017 09:00:00"],
)
def test_dates_with_times_of_day_read_as_the_iso_file(tmp_path, spell):
    header, _ = table_of(EURUSD)
    path = write(tmp_path / "eurusd.csv", header, with_times(table_of(EURUSD), spell))
    recording = read_recording(path, "EUR/USD")
    assert recording.rows == expected(table_of(EURUSD))
    assert recording.timeframe == Timeframe("1h")
    assert recording.naive_times


def _hour(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_times_with_offsets_are_converted_to_utc(tmp_path):
    header, _ = table_of(SOL)
    shanghai = ZoneInfo("Asia/Shanghai")
    rows = with_times(table_of(SOL), lambda t: _utc(t).astimezone(shanghai).isoformat())
    assert rows[0][0] == "2022-11-22T22:00:00+08:00"
    recording = read_recording(write(tmp_path / "SOLUSDT_1h.csv", header, rows))
    assert recording.rows == expected(table_of(SOL))
    assert recording.report is not None
    assert recording.report.zone == AWARE
    assert recording.report.notes() == []
    assert not recording.naive_times


def test_offsets_that_change_with_daylight_saving_time_need_the_zone_named(tmp_path):
    header, _ = table_of(EURUSD)
    rows = with_times(table_of(EURUSD), lambda t: _utc(t).astimezone(BERLIN).isoformat())
    summer = sum(row[0].endswith("+02:00") for row in rows)
    assert 0 < summer < len(rows)
    assert all(row[0][-6:] in ("+02:00", "+01:00") for row in rows)
    path = write(tmp_path / "eurusd.csv", header, rows)
    counts = rf"\+01:00 \({len(rows) - summer} rows\), \+02:00 \({summer} rows\)"
    with pytest.raises(ReplayDataError, match=rf"mixes UTC offsets: {counts}; .*--timezone"):
        read_recording(path, "EUR/USD")
    berlin = read_recording(path, "EUR/USD", options=ReadOptions(timezone="Europe/Berlin"))
    assert berlin.rows == expected(table_of(EURUSD))
    assert berlin.report is not None
    assert "+01:00, +02:00 (Europe/Berlin's)" in berlin.report.notes()[0]
    with pytest.raises(ReplayDataError, match=r"offsets are not America/New_York's"):
        read_recording(path, "EUR/USD", options=ReadOptions(timezone="America/New_York"))


def test_naive_wall_clock_times_are_placed_in_the_given_zone_across_dst(tmp_path):
    header, _ = table_of(EURUSD)
    wall = with_times(table_of(EURUSD), lambda t: f"{_utc(t).astimezone(BERLIN):%Y-%m-%d %H:%M}")
    path = write(tmp_path / "eurusd.csv", header, wall)
    berlin = read_recording(path, "EUR/USD", options=ReadOptions(timezone="Europe/Berlin"))
    assert berlin.rows == expected(table_of(EURUSD))
    assert not berlin.naive_times
    twice = write(tmp_path / "twice.csv", header, [["2017-10-29 02:30", *wall[0][1:]]] * 2)
    with pytest.raises(ReplayDataError, match="ambiguous"):
        read_recording(twice, "EUR/USD", options=ReadOptions(timezone="Europe/Berlin"))


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("spell", "kind"),
    [
        (lambda t: str(utc_ms(t) // 1000), "epoch_s"),
        (lambda t: str(utc_ms(t)), "epoch_ms"),
        (lambda t: str(utc_ms(t) * 1000), "epoch_us"),
        (lambda t: str(utc_ms(t) * 1_000_000), "epoch_ns"),
        (lambda t: f"{utc_ms(t) / 1000:.3f}", "epoch_s"),
    ],
    ids=["s", "ms", "us", "ns", "float s"],
)
def test_epoch_numbers_are_told_apart_by_magnitude(tmp_path, spell, kind):
    header, _ = table_of(SOL)
    rows = with_times(table_of(SOL), spell)
    recording = read_recording(write(tmp_path / "SOLUSDT_1h.csv", header, rows))
    assert recording.rows == expected(table_of(SOL))
    assert recording.report is not None
    assert recording.report.time_kind == kind
    assert not recording.naive_times


def test_a_row_number_is_not_taken_for_epoch_times(tmp_path):
    header, rows = table_of(GOOG)
    numbered = [[str(i), *row[1:]] for i, row in enumerate(rows)]
    with pytest.raises(ReplayDataError, match=r"too small for epoch times.*--time-column"):
        read_recording(write(tmp_path / "goog.csv", header, numbered), "GOOG/USD")


def test_an_adjusted_close_is_applied_and_other_columns_are_ignored_and_named(tmp_path):
    _, rows = table_of(GOOG)
    wide = [[*row[:5], str(float(row[4]) / 2), row[5], "7"] for row in rows]
    columns = ["Date", "Open", "High", "Low", "Close", "Adj Close", "Volume", "trades"]
    path = write(tmp_path / "goog.csv", columns, wide)
    raw = read_recording(path, "GOOG/USD", options=ReadOptions(prices="raw"))
    assert raw.rows == read_recording(GOOG, "GOOG/USD").rows
    assert raw.report is not None
    assert raw.report.ignored_columns == ("trades",)
    assert "ignored columns: trades" in raw.report.notes()
    assert raw.report.time_column_found == "named"
    # By default the adjusted close is traded: prices halved, volumes doubled (the split
    # tests on real adjusted closes are in test_adjusted.py).
    adjusted = read_recording(path, "GOOG/USD")
    assert [r[1:5] for r in adjusted.rows] == [tuple(v / 2 for v in r[1:5]) for r in raw.rows]
    assert [r[5] for r in adjusted.rows] == [r[5] * 2 for r in raw.rows]


def test_the_time_column_is_found_by_name_or_position_or_given(tmp_path):
    header, rows = table_of(EURUSD)
    goog = read_recording(GOOG, "GOOG/USD").rows
    resaved = write(tmp_path / "eurusd.csv", ["Unnamed: 0", *header[1:]], rows)
    assert read_recording(resaved, "EUR/USD").rows == expected(table_of(EURUSD))
    when = write(tmp_path / "when.csv", ["when", *header[1:]], rows)
    with pytest.raises(
        ReplayDataError, match=r"no column among .*\(its columns: when, Open.*--time-column"
    ):
        read_recording(when, "EUR/USD")
    given = read_recording(when, "EUR/USD", options=ReadOptions(time_column="WHEN"))
    assert given.rows == expected(table_of(EURUSD))
    assert given.report is not None
    assert given.report.time_column_found == "given"
    # MetaTrader's export: the date and the time of day in two columns.
    split = [[*f"{_hour(row[0]):%Y.%m.%d %H:%M}".split(), *row[1:]] for row in rows]
    metatrader = write(tmp_path / "mt.csv", ["Date", "Time", *header[1:]], split)
    both = read_recording(metatrader, "EUR/USD")
    assert both.rows == expected(table_of(EURUSD))
    assert both.report is not None
    assert both.report.time_column == "Date + Time"
    # Parquet as pandas writes a frame indexed by unnamed dates.
    days = [datetime.fromisoformat(row[0]) for row in table_of(GOOG)[1]]
    index = pa.array(days, pa.timestamp("ns"))
    columns = {name: [row[1 + i] for row in goog] for i, name in enumerate(header[1:])}
    pq.write_table(pa.table({**columns, "__index_level_0__": index}), tmp_path / "goog.parquet")
    parquet = read_recording(tmp_path / "goog.parquet", "GOOG/USD")
    assert parquet.rows == goog
    assert parquet.report is not None
    assert parquet.report.time_column_found == "pandas index"


def test_a_file_without_a_close_is_refused_naming_its_columns(tmp_path):
    # (A file without volume is read, its volume unknown: tests/unit/market/test_adjusted.py.)
    header, rows = table_of(GOOG)
    path = write(tmp_path / "goog.csv", header[:4], [row[:4] for row in rows])
    with pytest.raises(ReplayDataError, match=r"no close column \(its columns: \(unnamed\), Open"):
        read_recording(path, "GOOG/USD")


def test_semicolon_separated_files_read_too(tmp_path):
    header, rows = table_of(SOL)
    path = write(tmp_path / "SOLUSDT_1h.csv", header, rows, delimiter=";")
    assert read_recording(path).rows == expected(table_of(SOL))


def test_values_are_kept_as_read_for_hygiene_to_judge(tmp_path):
    header, rows = table_of(SOL)
    bad = [list(row) for row in rows[:4]]
    bad[0][4], bad[1][1], bad[2][2], bad[3][5] = "NaN", "-1", "0.5", ""
    recording = read_recording(write(tmp_path / "SOLUSDT_1h.csv", header, bad))
    assert math.isnan(recording.rows[0][4])
    assert recording.rows[1][1] == -1.0
    assert recording.rows[2][2] < recording.rows[2][3]  # high below low stays
    assert recording.rows[3][5] is None
    assert recording.rows[3][:5] == expected((header, rows[:4]))[3][:5]


def test_one_log_line_says_how_the_file_was_read(tmp_path):
    header, rows = table_of(SOL)
    clean_file = read_recording(SOL)
    moved = read_recording(
        write(tmp_path / "SOLUSDT_1h.csv", header, [rows[1], rows[0], *rows[2:]])
    )
    with capture_logs() as logs:  # said once logging is set up, where the engine starts
        log_reading(clean_file)
        log_reading(moved)
    clean, repaired = [line for line in logs if line["event"] == "recording read"]
    assert (clean["log_level"], clean["notes"]) == ("info", ["naive times read as UTC"])
    assert (repaired["log_level"], repaired["moved_rows"]) == ("warning", 1)


def test_one_time_is_too_few_to_tell_the_timeframe(tmp_path):
    header, rows = table_of(SOL)
    path = write(tmp_path / "SOLUSDT_1h.csv", header, [rows[0], rows[0]])
    with pytest.raises(ReplayDataError, match=r"1 distinct bar time.*at least two bars"):
        read_recording(path)
    assert read_recording(path, timeframe=Timeframe("1h")).rows == expected((header, rows[:1]))


def _png(path: Path) -> None:
    Image.new("RGB", (8, 8)).save(path, format="PNG")


def _truncated_parquet(path: Path) -> None:
    header, rows = table_of(SOL)
    pq.write_table(
        pa.table({name: [row[i] for row in rows] for i, name in enumerate(header)}), path
    )
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _plain_text_named_gz(path: Path) -> None:
    path.write_text("timestamps,open,high,low,close,volume\n")


# name -> (file name, how to write it (None: not at all), what the refusal says)
BAD_FILES: dict[str, tuple[str, Callable[[Path], object] | None, str]] = {
    "missing": ("SOLUSDT_1h.csv", None, "no such file"),
    "empty": ("SOLUSDT_1h.csv", lambda p: p.write_bytes(b""), "is empty"),
    "header only": (
        "SOLUSDT_1h.csv",
        lambda p: p.write_text("timestamps,open,high,low,close,volume\n"),
        "has a header but no rows",
    ),
    "random bytes": (
        "SOLUSDT_1h.csv",
        lambda p: p.write_bytes(random.Random(3).randbytes(4096)),  # noqa: S311 - not a secret
        "is binary",
    ),
    "png": ("SOLUSDT_1h.csv", _png, "is a PNG image"),
    "truncated parquet": ("SOLUSDT_1h.parquet", _truncated_parquet, "not a readable Parquet"),
    "ragged rows": (
        "SOLUSDT_1h.csv",
        lambda p: p.write_text("timestamps,open,high,low,close,volume\n2024-01-01,1,2\n"),
        "not a CSV file of bars",
    ),
    "text for a price": (
        "SOLUSDT_1h.csv",
        lambda p: p.write_text("timestamps,open,high,low,close,volume\n2024-01-01,1,2,0.5,abc,1\n"),
        "not a CSV file of bars",
    ),
    "not gzip": ("SOLUSDT_1h.csv.gz", _plain_text_named_gz, "cannot be decompressed"),
}


def make_bad_file(folder: Path, name: str) -> Path:
    file_name, writer, _ = BAD_FILES[name]
    path = folder / file_name
    if writer is not None:
        writer(path)
    return path


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_a_bad_file_is_refused_naming_it_and_what_is_wrong(tmp_path, name):
    path = make_bad_file(tmp_path, name)
    with pytest.raises(ReplayDataError) as refused:
        read_recording(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: ")
    assert BAD_FILES[name][2] in message
    assert "\n" not in message
    # No pyarrow traceback behind it.
    error = refused.value
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


def test_the_reading_options_parse_into_read_options():
    parser = add_reading_options(argparse.ArgumentParser())
    args = parser.parse_args(
        ["--time-column", "Date", "--date-format", "%d/%m/%Y", "--timezone", "Asia/Shanghai"]
    )
    assert reading_options(args) == ReadOptions("Date", "%d/%m/%Y", "Asia/Shanghai", False)
    assert reading_options(parser.parse_args(["--strict"])) == ReadOptions(strict=True)
    for wrong in (["--timezone", "Mars/Olympus"], ["--date-format", "dd/mm/yyyy"]):
        with pytest.raises(SystemExit):
            parser.parse_args(wrong)
    with pytest.raises(ValueError, match="unknown time zone"):
        ReadOptions(timezone="Mars/Olympus")


def test_a_stated_format_reads_the_times_as_written(tmp_path):
    header, _ = table_of(SOL)
    rows = with_times(table_of(SOL), lambda t: t[: len("2022-11-22 14:00")])
    path = write(tmp_path / "SOLUSDT_1h.csv", header, rows)
    stated = read_recording(path, options=ReadOptions(date_format="%Y-%m-%d %H:%M"))
    assert stated.rows == expected(table_of(SOL))
    assert stated.report is not None
    assert (stated.report.time_kind, stated.report.date_order) == ("text %Y-%m-%d %H:%M", "format")
    assert stated.naive_times
