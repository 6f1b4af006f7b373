"""The recorded market data the tests read: real excerpts kept in the repository, in tests/data/
(its README says which file and rows each comes from), so a clone anywhere runs the suite.
The full recordings in ../shared/data/ are for benchmarks and demos, never for tests."""

from __future__ import annotations

import gzip
from pathlib import Path

RECORDED = Path(__file__).resolve().parent / "data"
# SOL/USDT spot, 1-hour bars: the first 4,000, evenly spaced (2020-08-11 06:00 on).
SOLUSDT_1H = RECORDED / "SOLUSDT_1h.csv.gz"
# SOL/USDT spot, 1-hour bars from late 2022 into 2023: 2,000, evenly spaced (tests cut holes).
SOLUSDT_1H_2022 = RECORDED / "SOLUSDT_1h_2022.csv.gz"
# SOL/USD, 15-minute bars: the first 2,000 (illiquid: flat prices, zero volume).
SOLUSD_15M = RECORDED / "SOLUSD_15m.csv.gz"
# Shanghai A-share 600977, 5-minute bars in trading hours: the first 1,500.
XSHG_600977_5MIN = RECORDED / "XSHG_600977_5min.csv.gz"
# AAPL daily bars 2004-01-02 .. 2006-12-29 (bokeh-sampledata's Quandl WIKI prices): trading
# days only, the 2:1 split on 2005-02-28, an `Adj Close` and a one-value `Ticker` column.
AAPL_1D = RECORDED / "AAPL_1d_2004_2006.csv.gz"
# MSFT daily bars 2002-01-02 .. 2004-12-31 from the same file, its Ticker column MSFT alone.
MSFT_1D = RECORDED / "MSFT_1d_2002_2004.csv.gz"
# AAPL, FB, GOOG, IBM and MSFT daily 2012-05-18 .. 2013-03-01 (196 rows each) from the same
# file, in its order (by ticker, then date): a file of several instruments.
STOCKS_5_TICKERS_1D = RECORDED / "stocks_5_tickers_1d.csv.gz"
# The CBOE Volatility Index, daily 2009-06-01 .. 2009-07-31 (vega-datasets' ohlc.json, as CSV
# date,open,high,low,close): an index, with no volume column.
VIX_1D_NO_VOLUME = RECORDED / "VIX_1d_2009_no_volume.csv.gz"
# What the published Kronos-small produced for the first 256 / 512 bars of XSHG_600977_5MIN.
KRONOS_REGRESSION = RECORDED / "kronos_regression"
# The messages of Alpaca's trade-updates stream, as its "Websocket Streaming" page shows them.
ALPACA_TRADE_UPDATES = RECORDED / "alpaca" / "recorded" / "trade_updates_stream.json"
# Alpaca's recorded answers (alpaca-py 0.44's fixtures, Alpaca's docs): alpaca/recorded/README.md.
ALPACA_RECORDED = RECORDED / "alpaca" / "recorded"


def lines(path: Path = SOLUSDT_1H, rows: int | None = None) -> list[str]:
    """A recorded file's header line and its first `rows` data rows (all of them when None),
    as written; more rows than it holds is an error, never a silently shorter test."""
    with gzip.open(path, "rt", newline="") as handle:
        text = handle.read().splitlines()
    if rows is None:
        return text
    if rows > len(text) - 1:
        raise ValueError(f"{path.name} holds {len(text) - 1} rows, not {rows}")
    return text[: rows + 1]


def excerpt(path: Path, rows: int | None = None, source: Path = SOLUSDT_1H) -> Path:
    """The first `rows` data rows of `source` (all when None), written as a plain CSV at
    `path`, as a user hands the daemon a file."""
    path.write_text("\n".join(lines(source, rows)) + "\n")
    return path
