"""`trader backtest` on real daily stock files with a split and an adjusted close (AAPL and
MSFT from bokeh-sampledata's Quandl WIKI prices), on an index without volume (VIX from
vega-datasets) and on a stock file with bad rows: which prices it traded, the split named in
"Read this first" with its effect, volume unknown said and not read as "nothing traded", and
bad rows counted among the expected bars missing. Through the command, as a user runs it."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pytest

from tests.integration.conftest import clean_env
from tests.recorded import AAPL_1D, MSFT_1D, VIX_1D_NO_VOLUME

pytestmark = pytest.mark.integration

# Ticks from the 65th bar on: AAPL's split (its 292nd row) falls inside the period.
SHORT = clean_env(TRADER_MARKET__CONTEXT_BARS="64")
# The default costs (trader/config): a fixed 5 bps modelled spread, 2 bps slippage, 10 bps fee.
HALF_SPREAD, SLIPPAGE, FEE = 5 / 20_000, 2 / 10_000, 10 / 10_000


def rows(path: Path) -> tuple[list[str], list[list[str]]]:
    with gzip.open(path, "rt", newline="") as handle:
        header, *body = list(csv.reader(handle))
    return header, body


def backtest(cli, path: Path, symbol: str, *extra: str, env=SHORT):
    return cli.run(
        "backtest", "--data", str(path), "--symbol", symbol, "--model", "baseline",
        "--jobs", "1", *extra, env=env,
    )  # fmt: skip


def first_lines(stdout: str) -> list[str]:
    """What comes before the table."""
    return stdout.split("\nstrategy ", maxsplit=1)[0].splitlines()


def test_adjusted_prices_are_the_default_and_buy_and_hold_earns_the_adjusted_close(cli):
    done = backtest(cli, AAPL_1D, "AAPL/USD", "--strategy", "simple", "--out", "out")
    assert done.returncode == 0, done.stderr
    head = first_lines(done.stdout)
    assert any(
        "AAPL_1d_2004_2006.csv.gz: adjusted prices traded: open, high, low and close x Adj "
        "Close / close" in line
        for line in head
    ), head
    assert "split" not in done.stdout  # no one-bar move like a split in adjusted prices
    stats = json.loads((cli.cwd / "out" / "stats.json").read_text())
    assert not [f for f in stats["findings"] if "split" in f["text"]]
    # Buy and hold: the file's own Adj Close, last over the one it bought at, less the costs
    # (trader/backtest/hold.py's formula). Daily bars close at the next day's 00:00 UTC.
    header, body = rows(AAPL_1D)
    adjusted = {row[1]: float(row[header.index("Adj Close")]) for row in body}
    bought = stats["buy_and_hold_from"]["AAPL/USD"][:10]
    first = adjusted[max(d for d in adjusted if d < bought)]
    last = adjusted[max(adjusted)]
    expected = (last * (1 - HALF_SPREAD) * (1 - SLIPPAGE) * (1 - FEE)) / (
        first * (1 + HALF_SPREAD) * (1 + SLIPPAGE) * (1 + FEE)
    ) - 1
    (held,) = [x for x in stats["lines"] if x["strategy"] == "buy_and_hold"]
    assert held["performance"]["total_return"] == pytest.approx(expected, rel=1e-9)
    assert expected > 5  # AAPL 2004-2006: six-fold, where raw prices halve at the split


def test_raw_prices_name_the_split_its_date_and_what_each_line_booked_on_it(cli):
    done = backtest(cli, AAPL_1D, "AAPL/USD", "--prices", "raw", "--strategy", "simple")
    assert done.returncode == 0, done.stderr
    head = first_lines(done.stdout)
    assert head[0].startswith("READ THIS FIRST")
    (split,) = [line for line in head if line.startswith("  - AAPL/USD: 2005-02-28: ")]
    assert "close 88.99 -> 44.86 (-49.6%) in one bar" in split
    assert "a 2:1 split (the adjusted close moved +0.8%)" in split
    # Buy and hold holds only AAPL: it books the close-to-close move, 44.86 / 88.99 - 1.
    assert f"buy & hold {44.86 / 88.99 - 1:+.2%}" in split
    assert "booked on that bar as a real move: simple " in split
    assert "--prices adjusted trades the prices a holder lived through" in split
    assert any("raw prices traded as written: Adj Close not applied" in line for line in head)


def test_a_split_before_the_first_tick_is_named_without_an_effect(cli):
    # MSFT's 2003-02-18 split is in the first 512 bars (the default context): before any tick.
    done = backtest(cli, MSFT_1D, "MSFT/USD", "--prices", "raw", "--strategy", "simple",
                    env=clean_env())  # fmt: skip
    assert done.returncode == 0, done.stderr
    (split,) = [line for line in first_lines(done.stdout) if "MSFT/USD: 2003-02-18: " in line]
    assert "a 2:1 split" in split
    assert "before the period's first tick: no return booked on it" in split


def test_an_index_without_volume_is_backtested_with_its_volume_unknown(cli):
    env = clean_env(TRADER_MARKET__CONTEXT_BARS="16")  # 44 bars: 29 ticks
    done = backtest(cli, VIX_1D_NO_VOLUME, "VIX/USD", "--strategy", "maxdiff", "--out", "out",
                    env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    head = first_lines(done.stdout)
    assert head[0].startswith("READ THIS FIRST")
    assert any(
        line.startswith("  - VIX/USD: volume unknown (VIX_1d_2009_no_volume.csv.gz has no volume")
        and "resting limit orders fill in full" in line
        and "Kronos reads its volume and amount as 0" in line
        for line in head
    ), head
    assert any("no volume column: volume unknown" in line for line in head)
    # maxdiff's resting limits filled: an unknown volume is no cap of 0 (nothing traded).
    stats = json.loads((cli.cwd / "out" / "stats.json").read_text())
    (line,) = [x for x in stats["lines"] if x["strategy"] == "maxdiff"]
    assert line["trades"]["trades"] > 0


def test_bad_rows_are_counted_among_the_expected_bars_missing(cli):
    header, body = rows(MSFT_1D)
    at = {name: i for i, name in enumerate(header)}
    body[300][at["Close"]] = "NaN"  # 2003-03-12
    body[400][at["High"]] = str(float(body[400][at["Low"]]) - 1)  # high under its low
    path = cli.cwd / "MSFT.csv"
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([header, *body])
    done = backtest(cli, path, "MSFT/USD", "--prices", "raw", "--strategy", "simple")
    assert done.returncode == 0, done.stderr
    (calendar,) = [line for line in first_lines(done.stdout) if "XNYS inferred" in line]
    assert "2 of 756 expected bars missing (2 of them bad rows, dropped)" in calendar
