"""`trader backtest` on real daily stock files as a user has them (issue 39): a file of five
tickers, a directory of one file a ticker, a row dated years ahead, offsets that change within
a column. The files are tests/data's excerpts of bokeh-sampledata's Quandl WIKI prices and the
SOL/USDT hours (tests/data/README.md), changed at run time where a case needs it."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.conftest import clean_env
from tests.integration.test_bad_files import assert_refused
from tests.recorded import AAPL_1D, MSFT_1D, SOLUSDT_1H, STOCKS_5_TICKERS_1D
from tests.unit.market.test_files import table_of, write

pytestmark = pytest.mark.integration
BACKTEST = ("backtest", "--model", "baseline", "--strategy", "simple")


def small_env(cli) -> dict[str, str]:
    """196 daily bars a ticker: a 64-bar context leaves 133 ticks."""
    return clean_env(
        TRADER_MARKET__CONTEXT_BARS="64", TRADER_BACKTEST__CACHE_DIR=str(cli.cwd / "cache")
    )


def buy_and_hold(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("buy & hold"))


def test_a_file_of_five_tickers_is_refused_naming_them_and_the_way_out(cli):
    path = str(STOCKS_5_TICKERS_1D)
    done = cli.run(*BACKTEST, "--data", path)
    counts = ", ".join(f"{t}: 196 rows" for t in ("AAPL", "FB", "GOOG", "IBM", "MSFT"))
    assert_refused(done, "backtest", path, f"column Ticker names 5 instruments ({counts})")
    assert "read one with --symbol AAPL (or --ticker AAPL)" in done.stderr
    done = cli.run(*BACKTEST, "--data", path, "--symbol", "XOM")
    assert_refused(done, "backtest", path, "--symbol XOM: no rows for XOM: column Ticker holds")


def test_one_ticker_of_an_interleaved_file_is_the_ticker_alone(cli):
    header, rows = table_of(STOCKS_5_TICKERS_1D)
    by_date = write(cli.cwd / "stocks.csv", header, sorted(rows, key=lambda row: row[1]))
    alone = write(cli.cwd / "IBM_USD_1d.csv", header, [r for r in rows if r[0] == "IBM"])
    env = small_env(cli)
    selected = cli.run(*BACKTEST, "--data", str(by_date), "--symbol", "IBM", env=env)
    ticker = cli.run(*BACKTEST, "--data", str(STOCKS_5_TICKERS_1D), "--ticker", "IBM", env=env)
    reference = cli.run(*BACKTEST, "--data", str(alone), env=env)
    for done in (selected, ticker, reference):
        assert done.returncode == 0, done.stderr
    assert buy_and_hold(selected.stdout) == buy_and_hold(reference.stdout)
    assert buy_and_hold(ticker.stdout) == buy_and_hold(reference.stdout)
    assert "stocks.csv: rows of IBM (column Ticker), 784 rows of 4 others left out" in (
        selected.stdout
    )
    assert "stocks.csv: symbol IBM/USD from --symbol IBM, its quote currency USD assumed" in (
        selected.stdout
    )


def test_a_directory_is_read_one_symbol_a_file_named_from_its_name(cli):
    folder = cli.cwd / "daily"
    folder.mkdir()
    write(folder / "AAPL_1d.csv", *table_of(AAPL_1D))
    write(folder / "MSFT_USD_1d.csv", *table_of(MSFT_1D))
    (folder / "README.md").write_text("copies of tests/data's daily stocks\n")
    done = cli.run(*BACKTEST, "--data", str(folder), "--allow-skips", env=small_env(cli))
    assert done.returncode == 0, done.stderr
    assert "backtest AAPL/USD, MSFT/USD 1d" in done.stdout
    assert "AAPL_1d.csv: symbol AAPL/USD from the file name, its quote currency USD assumed" in (
        done.stdout
    )
    assert "MSFT_USD_1d.csv: symbol MSFT/USD from the file name\n" in done.stdout
    assert f"AAPL_1d.csv: left out of {folder}: README.md (not CSV or Parquet)" in done.stdout


def test_a_row_five_years_ahead_is_refused_naming_it(cli):
    header, rows = table_of(AAPL_1D)
    ahead = (datetime.now(UTC) + timedelta(days=5 * 365)).date().isoformat()
    moved = [list(row) for row in rows]
    moved[99][1] = ahead
    path = str(write(cli.cwd / "AAPL_1d.csv", header, moved))
    done = cli.run(*BACKTEST, "--data", path)
    assert_refused(done, "backtest", path, f"data row 100 is dated {ahead} 00:00:00 UTC, after now")


def test_offsets_mixed_in_one_column_are_named_unless_the_zone_explains_them(cli):
    with gzip.open(SOLUSDT_1H, "rt") as handle:
        header, *rows = handle.read().splitlines()[:501]
    damaged = [
        row.replace(",", "+08:00," if 200 <= i < 230 else "+00:00,", 1)
        for i, row in enumerate(rows)
    ]
    path = cli.cwd / "SOLUSDT_1h.csv"
    path.write_text("\n".join([header, *damaged]) + "\n")
    done = cli.run(*BACKTEST, "--data", str(path))
    says = "column timestamps mixes UTC offsets: +00:00 (470 rows), +08:00 (30 rows)"
    assert_refused(done, "backtest", str(path), says)
    done = cli.run(*BACKTEST, "--data", str(path), "--timezone", "Asia/Shanghai")
    says = "470 rows' offsets are not Asia/Shanghai's at their time (first at data row 1"
    assert_refused(done, "backtest", str(path), says)


def test_a_backtest_takes_its_now_from_the_reading_options(capsys):
    from trader.backtest.command import BacktestRequest, run_backtest_command  # noqa: PLC0415
    from trader.market.files.options import ReadOptions  # noqa: PLC0415

    def never(_layer):
        raise AssertionError("refused before the settings are loaded")

    # The AAPL excerpt's last bar is dated 2006-12-29: two days before that is its "now".
    now = datetime(2006, 12, 27, tzinfo=UTC)
    request = BacktestRequest(data=[AAPL_1D], symbols=None, reading=ReadOptions(now=now))
    assert run_backtest_command(request, never) == 65
    assert capsys.readouterr().err == (
        f"trader backtest: {AAPL_1D}: data row 755 is dated 2006-12-29 00:00:00 UTC, after now "
        "(2006-12-27 00:00:00 UTC) plus one bar; correct or remove it\n"
    )
    later = BacktestRequest(
        data=[AAPL_1D], symbols=None, reading=ReadOptions(now=now.replace(day=28))
    )
    with pytest.raises(AssertionError, match="refused before the settings"):
        run_backtest_command(later, never)  # read: the last bar is one bar after now


def test_a_grid_worker_reads_each_ticker_of_one_file_again_alone():
    # A spawned worker (or a Ray task) reads its recording again: with the whole run's
    # --ticker IBM --ticker FB it would be asked for two instruments under one symbol.
    from trader.backtest.trials import reading_of  # noqa: PLC0415 - pyarrow
    from trader.market.files.options import ReadOptions  # noqa: PLC0415
    from trader.market.replay import read_recordings  # noqa: PLC0415

    reading = ReadOptions(tickers=("IBM", "FB"))
    recordings = read_recordings([STOCKS_5_TICKERS_1D], None, reading)
    assert [r.symbol for r in recordings] == ["IBM/USD", "FB/USD"]
    for recording in recordings:
        own = reading_of(recording, reading)
        (again,) = read_recordings([STOCKS_5_TICKERS_1D], [recording.symbol], own)
        assert again.rows == recording.rows
    assert reading_of(recordings[0], ReadOptions()) == ReadOptions()
