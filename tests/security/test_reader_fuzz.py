"""A property-based fuzzer over every file the program reads from a user (issue 42): bar files
(CSV, gzip-compressed CSV, Parquet) made from the real excerpts in tests/data and then damaged,
ledgers (random bytes, empty, a real ledger cut short, with bytes flipped or a page overwritten),
published weights (model.safetensors) and training checkpoints (random bytes, a real file cut
short or flipped). Whatever the bytes, the reader
either reads them or refuses them with its own error (one line, naming the file), which the
verbs turn into a known exit code: never another exception, which would end the program in a
traceback with exit 1 or 70. The readers are called in-process, as the verbs call them; a few
damaged files then go through the real `trader` command line for the exit code and the line."""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import os
import re
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.recorded import (
    AAPL_1D,
    SOLUSDT_1H,
    STOCKS_5_TICKERS_1D,
    VIX_1D_NO_VOLUME,
    XSHG_600977_5MIN,
    excerpt,
    lines,
)
from trader import exit_codes
from trader.cli import main
from trader.market.replay import (
    RecordingsRequestError,
    ReplayDataError,
    read_recordings,
    settings_from,
)

# Each recorded file's header and first rows: crypto around the clock, a Shanghai stock with a
# lunch break, US daily stocks with an `Adj Close` and a Ticker column, five tickers in one
# file, an index without volume.
ROWS = 30
SOURCES = {
    path.name: lines(path, ROWS)
    for path in (SOLUSDT_1H, XSHG_600977_5MIN, AAPL_1D, STOCKS_5_TICKERS_1D, VIX_1D_NO_VOLUME)
}
# Cells a broken export or a hostile user writes where numbers or times belong.
ODD_CELLS = (
    "", "nan", "NaN", "inf", "-inf", "Infinity", "1e308", "1e400", "-1e400", "-0", "0",
    "9" * 40, "-" + "9" * 40, "0x1F", "1,5", "abc", "None", "null", "#N/A", "1e-400",
    "2024-13-45", "2024-02-30 25:61:61", "0000-00-00", "9999-12-31 23:59:59", "1970-01-01",
    "-1", "1" * 19, "18446744073709551616", "2024-01-01T00:00:00+25:00", "\x00", '"', "'",
    "\u202e", "\ufeff", "é", "🙂", " ", "\t",
)  # fmt: skip
# The examples given, then fixed draws (derandomized: a CI failure replays); no shrinking, no
# example database.
FUZZ = partial(
    settings,
    phases=[Phase.explicit, Phase.generate],
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ENCODINGS = ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252")


Rows = list[list[str]]


def _cell(draw: st.DrawFn, rows: Rows) -> Rows:
    row = draw(st.integers(1, len(rows) - 1)) if len(rows) > 1 else 0
    if rows[row]:
        column = draw(st.integers(0, len(rows[row]) - 1))
        rows[row][column] = draw(st.sampled_from(ODD_CELLS) | st.text(max_size=12))
    return rows


def _rename(draw: st.DrawFn, rows: Rows) -> Rows:
    """A header renamed: to another column's name (written twice), a known name or any."""
    if rows[0]:
        column = draw(st.integers(0, len(rows[0]) - 1))
        known = ["", "Date", "TIME", "close", "Unnamed: 0", "ticker", "Adj Close", "timestamp ",
                 "amount"]  # fmt: skip
        rows[0][column] = draw(
            st.sampled_from(rows[0]) | st.sampled_from(known) | st.text(max_size=8)
        )
    return rows


def _drop(draw: st.DrawFn, rows: Rows) -> Rows:
    column = draw(st.integers(0, max(0, len(rows[0]) - 1)))
    return [row[:column] + row[column + 1 :] for row in rows]


def _shuffle(draw: st.DrawFn, rows: Rows) -> Rows:
    return [rows[0], *draw(st.permutations(rows[1:]))]


def _duplicate(draw: st.DrawFn, rows: Rows) -> Rows:
    row = draw(st.integers(0, len(rows) - 1))
    return [*rows[: row + 1], list(rows[row]), *rows[row + 1 :]]


def _cut_rows(draw: st.DrawFn, rows: Rows) -> Rows:
    return rows[: draw(st.integers(1, len(rows)))]


def _short_row(draw: st.DrawFn, rows: Rows) -> Rows:
    row = draw(st.integers(0, len(rows) - 1))
    rows[row] = rows[row][: draw(st.integers(0, len(rows[row])))]
    return rows


def _long_row(draw: st.DrawFn, rows: Rows) -> Rows:
    rows[draw(st.integers(0, len(rows) - 1))].append(draw(st.sampled_from(ODD_CELLS)))
    return rows


MUTATIONS = {
    "cell": _cell, "rename": _rename, "drop": _drop, "shuffle": _shuffle,
    "reverse": lambda draw, rows: [rows[0], *reversed(rows[1:])],
    "duplicate": _duplicate, "cut rows": _cut_rows, "short row": _short_row,
    "long row": _long_row, "header only": lambda draw, rows: rows[:1],
}  # fmt: skip
# Cells most often: each changes one value and leaves the rest of the file readable.
CHOICES = ["cell"] * 4 + sorted(MUTATIONS)


@st.composite
def table_text(draw: st.DrawFn) -> str:
    """A recorded excerpt with its rows, columns and cells damaged at random, written with
    one of the separators spreadsheets use."""
    rows = [next(csv.reader([line])) for line in SOURCES[draw(st.sampled_from(sorted(SOURCES)))]]
    for _ in range(draw(st.integers(0, 4))):
        rows = MUTATIONS[draw(st.sampled_from(CHOICES))](draw, rows)
    buffer = io.StringIO()
    delimiter = draw(st.sampled_from([",", ",", ",", ";", "\t", "|"]))
    csv.writer(buffer, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` cut short, or with bytes flipped, overwritten or inserted (or as it was)."""
    for _ in range(draw(st.integers(0, 2))):
        what = draw(st.sampled_from(["cut", "flip", "overwrite", "insert"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if what == "cut":
            data = data[:at]
        elif what == "flip":
            data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
        elif what == "overwrite":
            data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at + 16 :]
        else:
            data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
    return data


def parquet_bytes(draw: st.DrawFn, text: str) -> bytes:
    """The damaged text as a Parquet file, its columns as pyarrow infers them or all text."""
    try:
        table = pa_csv.read_csv(io.BytesIO(text.encode()))
    except pa.ArrowException:  # too damaged to be a table: a table with one text column
        table = pa.table({"open": pa.array([text[:20]])})
    if draw(st.booleans()):
        table = table.cast(pa.schema([(name, pa.string()) for name in table.column_names]))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


@dataclass(frozen=True)
class Written:
    """A file's name ending and its bytes."""

    suffix: str
    data: bytes


@st.composite
def bar_files(draw: st.DrawFn) -> Written:
    """A damaged excerpt as CSV (in some encoding), gzip-compressed CSV or Parquet, whose
    bytes may then be damaged too; or bytes at random."""
    container = draw(st.sampled_from([".csv", ".csv", ".csv.gz", ".parquet"]))
    if not draw(st.integers(0, 9)):
        return Written(container, draw(st.binary(max_size=3000)))
    text = draw(table_text())
    if container == ".parquet":
        return Written(container, damaged(draw, parquet_bytes(draw, text)))
    data = text.encode(draw(st.sampled_from(ENCODINGS)), errors="replace")
    if container == ".csv.gz":
        data = gzip.compress(data, mtime=0)
    return Written(container, damaged(draw, data))


# Damaged files the fuzzer found crashing the readers (and a misleading reason), kept as fixed
# examples: each a recorded excerpt with one damage.


def repeated_time_column() -> bytes:
    header, *rows = lines(SOLUSDT_1H, 50)
    return "\n".join([f"{header},timestamps", *(f"{row},{row[:19]}" for row in rows)]).encode()


def two_unnamed_columns() -> bytes:
    header, *rows = lines(XSHG_600977_5MIN, 50)
    return "\n".join([",," + header.split(",", 2)[2], *rows]).encode()


def utf16() -> bytes:
    return "\n".join(lines(SOLUSDT_1H, 50)).encode("utf-16")


def cut_gzip() -> bytes:
    data = gzip.compress("\n".join(lines(SOLUSDT_1H, 400)).encode(), mtime=0)
    return data[: len(data) // 2]


def date_beyond_9999() -> bytes:
    """Daily VIX bars as Parquet, one day number damaged to the largest a date32 holds."""
    table = pa_csv.read_csv(io.BytesIO("\n".join(lines(VIX_1D_NO_VOLUME)).encode()))
    days = table.column("date").cast(pa.int32()).to_pylist()
    days[7] = 2**31 - 1
    sink = io.BytesIO()
    pq.write_table(table.set_column(0, "date", pa.array(days, pa.int32()).cast(pa.date32())), sink)
    return sink.getvalue()


def column_named_over_two_lines() -> bytes:
    """Daily VIX bars as Parquet with no time column and one name holding a line break: the
    refusal lists the names and must stay one line (a case CI's Hypothesis run found)."""
    table = pa_csv.read_csv(io.BytesIO("\n".join(lines(VIX_1D_NO_VOLUME)).encode()))
    sink = io.BytesIO()
    pq.write_table(table.rename_columns(["first\nsecond", *table.column_names[1:]]), sink)
    return sink.getvalue()


def read_as_the_verbs_do(path: Path) -> str:
    """What `trader backtest --data` and `trader run --replay` do with a file before the
    engine: read it and take its settings. "read", or the one-line reason it was refused."""
    try:
        settings_from(read_recordings([path]))
    except (ReplayDataError, RecordingsRequestError) as error:  # 65 and 2 in both verbs
        return str(error)
    return "read"


def test_no_bar_file_ends_in_anything_but_bars_or_a_one_line_refusal(tmp_path):
    outcomes: list[str] = []

    @FUZZ(max_examples=600)
    @given(bar_files())
    @example(Written(".csv", repeated_time_column()))
    @example(Written(".csv", two_unnamed_columns()))
    @example(Written(".parquet", date_beyond_9999()))
    @example(Written(".parquet", column_named_over_two_lines()))
    def read(file: Written) -> None:
        path = tmp_path / f"SOLUSDT_1h{file.suffix}"
        path.write_bytes(file.data)
        outcome = read_as_the_verbs_do(path)  # any other exception fails here
        assert outcome.strip(), "an empty reason"
        assert "\n" not in outcome, outcome
        outcomes.append(outcome)

    read()
    # The damage reached past the first checks: files read, and refusals of many kinds.
    assert outcomes.count("read") > 20, outcomes.count("read")
    assert len(set(outcomes)) > 100, len(set(outcomes))


@pytest.mark.parametrize(
    ("header", "repeated"),
    [
        ("timestamps,open,high,low,close,volume,timestamps", "timestamps"),
        (",open,high,low,close,volume,", "(unnamed)"),
        ("timestamps,open,high,low,close,volume,amount,amount", "amount"),
        ("Ticker,Date,Open,High,Low,Close,Volume,Ticker", "Ticker"),
    ],
)
def test_a_column_name_written_twice_is_refused_naming_it(tmp_path, header, repeated):
    """Found by the fuzzer: pyarrow keeps both columns and then cannot find either by name
    (KeyError, a traceback from `trader backtest`)."""
    width = header.count(",") + 1
    ticker = ["AAPL"] if header.startswith("Ticker") else []
    rows = [(ticker + row.split(",") + ["1"] * width)[:width] for row in lines(SOLUSDT_1H, 5)[1:]]
    path = tmp_path / "SOLUSDT_1h.csv"
    path.write_text("\n".join([header, *map(",".join, rows)]) + "\n")
    with pytest.raises(ReplayDataError, match=f"2 columns are named {re.escape(repeated)}"):
        read_recordings([path])


# --- ledgers -------------------------------------------------------------------------------

# The baseline and a short context: a replay of a few days' bars takes a fraction of a second.
REPLAY_SETTINGS = {
    "TRADER_MARKET__CONTEXT_BARS": "32",
    "TRADER_FORECAST__MODEL": "baseline",
    "TRADER_FORECAST__BASELINE_LOOKBACK": "32",
    "TRADER_LOG__LEVEL": "WARNING",
}
PAGE = 4096  # SQLite's default page size, the ledger's


@dataclass(frozen=True)
class RealLedger:
    """A ledger a real replay of the first SOL/USDT hours wrote, and a longer file of the same
    bars that a replay resumes on."""

    data: bytes
    longer: Path


def replay_on(ledger: Path, bars: Path, capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`trader run --replay BARS` with `ledger.path` LEDGER, as the command line runs it: its
    exit code and everything it printed."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("TRADER_")]:
            patch.delenv(name)
        for name, value in {**REPLAY_SETTINGS, "TRADER_LEDGER__PATH": str(ledger)}.items():
            patch.setenv(name, value)
        patch.chdir(bars.parent)  # no trader.toml of the developer's
        code = main(["run", "--replay", str(bars)])
    out, err = capfd.readouterr()
    return code, out + err


@pytest.fixture
def real_ledger(tmp_path, capfd) -> RealLedger:
    folder = tmp_path / "bars"
    folder.mkdir()
    first = excerpt(folder / "SOLUSDT_1h.csv", 100)
    ledger = tmp_path / "made" / "ledger.sqlite3"
    code, said = replay_on(ledger, first, capfd)
    assert code == 0, said
    (tmp_path / "longer").mkdir()
    longer = excerpt(tmp_path / "longer" / "SOLUSDT_1h.csv", 140)
    return RealLedger(ledger.read_bytes(), longer)


@st.composite
def damaged_ledgers(draw: st.DrawFn, data: bytes) -> bytes:
    """The real ledger cut short, with bytes flipped or a page overwritten; or no bytes, or
    bytes at random."""
    what = draw(st.sampled_from(["cut", "flip", "page", "page", "empty", "random"]))
    if what == "cut":
        return data[: draw(st.integers(0, len(data) - 1))]
    if what == "flip":
        return damaged(draw, data)
    if what == "page":
        page = draw(st.integers(1, len(data) // PAGE - 1))  # the header page is page 0
        fill = (
            draw(st.sampled_from([b"\x00" * PAGE, b"\xff" * PAGE]))
            if draw(st.booleans())
            else draw(st.binary(min_size=PAGE, max_size=PAGE))
        )
        return data[: page * PAGE] + fill + data[(page + 1) * PAGE :]
    if what == "empty":
        return b""
    return draw(st.binary(min_size=1, max_size=3 * PAGE))


KNOWN_CODES = {value for name, value in vars(exit_codes).items() if name.startswith("EX_")}


def test_no_ledger_ends_the_daemon_in_a_traceback(tmp_path, capfd, real_ledger):
    codes: list[int] = []
    made = itertools.count()

    @FUZZ(max_examples=30)
    @given(damaged_ledgers(real_ledger.data))
    def start(data: bytes) -> None:
        folder = tmp_path / f"ledger{next(made)}"
        folder.mkdir(mode=0o700)
        ledger = folder / "ledger.sqlite3"
        ledger.write_bytes(data)
        ledger.chmod(0o600)
        code, said = replay_on(ledger, real_ledger.longer, capfd)
        codes.append(code)
        assert code in KNOWN_CODES - {exit_codes.EX_SOFTWARE}, said[-3000:]
        assert "Traceback" not in said, said[-3000:]
        if code == exit_codes.EX_DATAERR:  # refused: the ledger named, with the reason
            assert str(ledger) in said, said[-3000:]

    start()
    assert exit_codes.EX_DATAERR in codes, codes


def test_a_ledger_damaged_inside_a_value_is_refused_with_exit_65(tmp_path, capfd, real_ledger):
    """Found by the fuzzer: a byte flipped inside a skill score's JSON leaves every page sound
    (SQLite's integrity_check says ok), and the daemon's start-up then died on SQLite's
    "malformed JSON" with exit 70."""
    folder = tmp_path / "damaged"
    folder.mkdir(mode=0o700)
    ledger = folder / "ledger.sqlite3"
    ledger.write_bytes(real_ledger.data)
    ledger.chmod(0o600)
    with closing(sqlite3.connect(ledger)) as connection:
        connection.execute(
            "UPDATE forecast_scores SET sums = '{\"crps\":' "
            "WHERE as_of = (SELECT max(as_of) FROM forecast_scores)"
        )
        connection.commit()
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    code, said = replay_on(ledger, real_ledger.longer, capfd)
    assert code == exit_codes.EX_DATAERR, said[-3000:]
    assert str(ledger) in said, said[-3000:]
    assert "Traceback" not in said, said[-3000:]


# --- checkpoints -----------------------------------------------------------------------------


@st.composite
def damaged_files(draw: st.DrawFn, data: bytes) -> bytes:
    """A real file cut short or with bytes flipped (never as it was), or bytes at random."""
    if not draw(st.integers(0, 4)):
        return draw(st.binary(max_size=2000))
    what = draw(st.sampled_from(["cut", "flip"]))
    at = draw(st.integers(0, len(data) - 1))
    if what == "cut":
        return data[:at]
    return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]


def test_no_published_weights_file_ends_in_anything_but_weights_or_a_refusal(tmp_path):
    """`model.safetensors` as forecast/weights.py reads it for the daemon and `trader finetune`
    (WeightsUnavailable: exit 69 from both)."""
    import torch  # noqa: PLC0415 - only this test needs it
    from safetensors.torch import save_file  # noqa: PLC0415

    from trader.forecast.weights import WeightsUnavailable, load_checkpoint  # noqa: PLC0415

    real = tmp_path / "real.safetensors"
    save_file({"embed.weight": torch.arange(96.0).reshape(8, 12), "head.bias": torch.ones(5)},
              str(real))  # fmt: skip
    outcomes: list[str] = []
    made = itertools.count()

    @FUZZ(max_examples=150)
    @given(damaged_files(real.read_bytes()))
    def load(data: bytes) -> None:
        folder = tmp_path / f"weights{next(made)}"
        folder.mkdir()
        (folder / "config.json").write_text('{"model_type": "toto"}')
        (folder / "model.safetensors").write_bytes(data)
        try:
            load_checkpoint(folder)
        except WeightsUnavailable as error:
            outcomes.append(str(error))
        else:
            outcomes.append("read")
        assert outcomes[-1] == "read" or str(folder) in outcomes[-1], outcomes[-1]

    load()
    assert len(set(outcomes)) > 1, outcomes


def test_no_training_checkpoint_ends_in_anything_but_a_checkpoint_or_a_refusal(tmp_path):
    """`last.pt` as `trader finetune` reads it to resume: read, or refused with one of the
    errors the command turns into an exit code (training/command.py)."""
    import torch  # noqa: PLC0415 - only this test needs it

    from trader.training import checkpoint  # noqa: PLC0415
    from trader.training.command import _EXITS  # noqa: PLC0415 - the refusals it maps

    refusals = tuple(kind for kind, _ in _EXITS)
    real = tmp_path / "last.pt"
    weights = torch.nn.Linear(4, 3)
    optimizer = torch.optim.AdamW(weights.parameters())
    weights(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    checkpoint.save_atomic(
        real,
        {"format": checkpoint.FORMAT, "model": weights.state_dict(),
         "optimizer": optimizer.state_dict(), "step": 1, "split": {"train": 10, "valid": 2}},
    )  # fmt: skip
    outcomes: list[str] = []
    made = itertools.count()

    @FUZZ(max_examples=150)
    @given(damaged_files(real.read_bytes()))
    def load(data: bytes) -> None:
        path = tmp_path / f"run{next(made)}" / checkpoint.LAST
        path.parent.mkdir()
        path.write_bytes(data)
        try:
            checkpoint.load(path, torch.device("cpu"))
        except refusals as error:
            outcomes.append(str(error))
        else:
            outcomes.append("read")
        assert outcomes[-1] == "read" or str(path) in outcomes[-1], outcomes[-1]
        assert "\n" not in outcomes[-1], outcomes[-1]

    load()
    assert len(set(outcomes)) > 1, outcomes


# --- the command line ------------------------------------------------------------------------

TRADER = str(Path(sys.executable).parent / "trader")


# A verb, a file name and how it is damaged, and what its one line of refusal says. Before
# issue 42 the column written twice and the date beyond 9999 ended in a traceback (exit 1) and
# UTF-16 text was called binary; the cut gzip file keeps `trader run --replay` covered.
REFUSED = {
    "a column written twice": (
        "backtest", "SOLUSDT_1h.csv", repeated_time_column, "2 columns are named timestamps",
    ),
    "UTF-16 text": ("backtest", "SOLUSDT_1h.csv", utf16, "is UTF-16 text; save it as UTF-8"),
    "a gzip file cut short": ("run", "SOLUSDT_1h.csv.gz", cut_gzip, "cannot be decompressed"),
    "a date beyond 9999": ("backtest", "VIX_1d.parquet", date_beyond_9999, "after now"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_command_line_refuses_a_damaged_bar_file_in_one_line_with_exit_65(tmp_path, case):
    verb, name, damaged_bytes, reason = REFUSED[case]
    path = tmp_path / name
    path.write_bytes(damaged_bytes())
    argv = ["backtest", "--data", str(path), "--model", "baseline"]
    if verb == "run":
        argv = ["run", "--replay", str(path)]
    done = subprocess.run(
        [TRADER, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path),
             "TRADER_LEDGER__PATH": str(tmp_path / "ledger" / "ledger.sqlite3")},
    )  # fmt: skip
    assert done.returncode == exit_codes.EX_DATAERR, done.stdout[-2000:] + done.stderr[-2000:]
    said = done.stderr.strip().splitlines()
    assert len(said) == 1, done.stderr
    assert said[0].startswith(f"trader {verb}: {path}: "), said
    assert reason in said[0], said
    assert "Traceback" not in done.stdout + done.stderr
