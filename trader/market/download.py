"""`trader download`: bar history to Parquet, resumable, honouring the exchange's rate limits.

Each symbol goes to `<out>/<exchange>/<BASEQUOTE>_<timeframe>.parquet`. The file is rewritten
atomically every few pages, so an interrupted download resumes from its last bar. Rows that fail
the bar checks are not written; they are counted and reported.
"""

from __future__ import annotations

import itertools
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from trader.domain import Bar, Timeframe
from trader.market.feed import MarketData
from trader.market.hygiene import SkipReason, parse_row
from trader.market.replay import read_recording
from trader.private_files import replacing

SCHEMA = pa.schema(
    [
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("open", pa.float64()),
        ("high", pa.float64()),
        ("low", pa.float64()),
        ("close", pa.float64()),
        ("volume", pa.float64()),
        ("quote_volume", pa.float64()),
    ]
)
CHECKPOINT_PAGES = 10


def history_path(out: Path, exchange: str, symbol: str, timeframe: Timeframe) -> Path:
    name = symbol.replace("/", "").replace(":", "_")
    return out / exchange / f"{name}_{timeframe}.parquet"


@dataclass
class DownloadReport:
    symbol: str
    path: Path
    bars: int  # in the file at the end
    added: int
    skipped: Counter[SkipReason]
    gaps: int


def _write(path: Path, bars: list[Bar]) -> None:
    table = pa.table(
        {
            "timestamp": [b.start for b in bars],
            "open": [b.open for b in bars],
            "high": [b.high for b in bars],
            "low": [b.low for b in bars],
            "close": [b.close for b in bars],
            "volume": [b.volume for b in bars],
            "quote_volume": [b.quote_volume for b in bars],
        },
        schema=SCHEMA,
    )
    # Readers see the old file or the new one, never half of one, and a link planted at the
    # path is refused; public prices, so readable by others (0644).
    with replacing(path, what="the data folder", mode=0o644) as handle:
        pq.write_table(table, handle)


def _existing(path: Path, symbol: str, timeframe: Timeframe) -> list[Bar]:
    if not path.is_file():
        return []
    recording = read_recording(path, symbol, timeframe)
    bars = [parse_row(row, symbol, timeframe) for row in recording.rows]
    return [bar for bar in bars if isinstance(bar, Bar)]


async def download(
    feed: MarketData,
    exchange: str,
    symbol: str,
    timeframe: Timeframe,
    since: datetime,
    until: datetime,
    out: Path,
    *,
    progress: bool | None = None,
    on_page: Callable[[int], None] = lambda n: None,
) -> DownloadReport:
    path = history_path(out, exchange, symbol, timeframe)
    bars = _existing(path, symbol, timeframe)
    cursor = bars[-1].end if bars else since
    added, pages = 0, 0
    skipped: Counter[SkipReason] = Counter()
    total = max(0, int((until - since) / timeframe.duration))
    show = sys.stderr.isatty() if progress is None else progress
    with tqdm(total=total, initial=len(bars), unit="bar", desc=symbol, disable=not show) as bar_:
        while cursor < until:
            rows = await feed.ohlcv(symbol, timeframe, cursor, feed.page_limit)
            fresh: list[Bar] = []
            for row in rows:
                parsed = parse_row(row, symbol, timeframe)
                if isinstance(parsed, SkipReason):
                    skipped[parsed] += 1
                elif (
                    parsed.start >= cursor
                    and parsed.end <= until
                    and (not fresh or parsed.start > fresh[-1].start)
                ):
                    fresh.append(parsed)
            if not fresh:
                break
            bars.extend(fresh)
            added += len(fresh)
            cursor = fresh[-1].end
            pages += 1
            on_page(pages)
            bar_.update(len(fresh))
            if pages % CHECKPOINT_PAGES == 0:
                _write(path, bars)
    if added:
        _write(path, bars)
    gaps = sum(1 for a, b in itertools.pairwise(bars) if b.start - a.start != timeframe.duration)
    return DownloadReport(symbol, path, len(bars), added, skipped, gaps)
