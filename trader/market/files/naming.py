"""A file's symbol (BASE/QUOTE) from what the person gave, the file's name or its one
instrument, and how it was told: a name is never guessed from a word that is not a ticker."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from trader.domain import DomainError, check_symbol
from trader.market.files.instruments import INSTRUMENT_COLUMNS
from trader.market.files.options import ReplayDataError
from trader.market.files.report import Picked, shown

# Quote currencies recognised in names such as SOLUSDT_1h.csv.
QUOTES = ("USDT", "USDC", "FDUSD", "BUSD", "TUSD", "USD", "EUR", "GBP", "BTC", "ETH", "BNB")
# The quote of a symbol named by its ticker alone (GOOG_1d.csv, a Ticker column of AAPL): the
# currency US stock files are in. Said in the notes, with how to give another.
ASSUMED_QUOTE = "USD"
_TICKER = re.compile(r"^[A-Z][A-Z0-9]*$")  # as written: "prices" or "data" are not tickers
_TIMEFRAME = re.compile(r"^\d+(s|m|min|h|d|w|mo|M)$|^(daily|hourly|weekly|minute)$", re.I)


def symbol_from_name(path: Path) -> str | None:
    """SOLUSDT_1h.csv -> SOL/USDT; None when the name does not say base and quote."""
    named = _name_parts(path)
    return f"{named[0]}/{named[1]}" if named and named[1] else None


def _name_parts(path: Path) -> tuple[str, str | None] | None:
    """(base, quote) from SOLUSDT_1h.csv or MSFT_USD_1d.csv, (base, None) from GOOG_1d.csv:
    a ticker followed by a timeframe; None when the name says neither."""
    words = re.split(r"[_\-. ]", path.stem)
    joined = _joined(words[0])
    if joined is not None:
        return joined
    if len(words) < 2 or not _TICKER.match(words[0]):
        return None
    if words[1].upper() in QUOTES and (len(words) == 2 or _TIMEFRAME.match(words[2])):
        return words[0], words[1].upper()
    return (words[0], None) if _TIMEFRAME.match(words[1]) else None


def _joined(word: str) -> tuple[str, str] | None:
    """SOLUSDT -> (SOL, USDT)."""
    word = word.upper()
    quote = next((q for q in QUOTES if word.endswith(q) and len(word) > len(q)), None)
    return (word[: -len(quote)], quote) if quote else None


def _split(text: str) -> tuple[str, str | None]:
    """A value or --symbol as (base, quote): SOL/USDT, SOL-USDT, SOLUSDT, or a bare AAPL."""
    if "/" in text:
        base, _, quote = text.partition("/")
        return base, quote
    parts = re.split(r"[-_]", text)
    if len(parts) == 2 and parts[1].upper() in QUOTES:
        return parts[0], parts[1].upper()
    return _joined(text) or (text, None)


@dataclass(frozen=True)
class Naming:
    symbol: str
    note: str | None  # how it was told, when it was not given whole


def name_symbol(path: Path, given: str | None, picked: Picked | None, asked: bool) -> Naming:
    """The symbol: as given (its quote assumed if it has none), else from the file's name,
    else from its instrument column's one value (or the value asked for with --ticker:
    `asked`). ReplayDataError when nothing tells, or the name and the column disagree."""
    if given is not None:
        base, quote = _split(given)
        return _named(path, base, quote, f"--symbol {given}")
    column = f"its column {shown(picked.column)} ({picked.value})" if picked else None
    named = None if asked else _name_parts(path)
    if named is not None:
        if picked is not None and picked.value.upper() not in _spellings(*named):
            raise ReplayDataError(
                f"{path}: the file's name says {named[0]} but {column} says otherwise; rename "
                "the file, or give the symbol with --symbol BASE/QUOTE"
            )
        return _named(path, *named, "the file name")
    if column is not None and picked is not None:
        return _named(path, *_split(picked.value), column)
    raise ReplayDataError(
        f"{path}: cannot tell the symbol from the file name (such as SOLUSDT_1h.csv or "
        f"AAPL_USD_1d.csv) or a column naming it ({', '.join(INSTRUMENT_COLUMNS[:4])}...); "
        "give it with --symbol, e.g. ABC/USDT"
    )


def _spellings(base: str, quote: str | None) -> set[str]:
    if quote is None:
        return {base.upper()}
    return {base.upper(), *(f"{base}{s}{quote}".upper() for s in ("", "/", "-", "_"))}


def _named(path: Path, base: str, quote: str | None, source: str) -> Naming:
    """The symbol and the note saying where it came from (none for a whole --symbol)."""
    symbol = f"{base}/{quote or ASSUMED_QUOTE}"
    try:
        check_symbol(symbol)
    except DomainError:
        raise ReplayDataError(
            f"{path}: cannot make a symbol (BASE/QUOTE) of {source}; give it with --symbol, "
            "e.g. ABC/USD"
        ) from None
    if quote:
        whole = source.startswith("--symbol") and "/" in source
        return Naming(symbol, None if whole else f"symbol {symbol} from {source}")
    return Naming(
        symbol,
        f"symbol {symbol} from {source}, its quote currency {ASSUMED_QUOTE} assumed (give "
        f"--symbol {base}/EUR, say, for another)",
    )
