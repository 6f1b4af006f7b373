"""The options every verb that reads files of bars takes: --time-column, --date-format,
--timezone, --strict.

Only the standard library here: the parsers are built on every start of the CLI, and pyarrow
(behind ReadOptions) loads only when a file is read.
"""

from __future__ import annotations

import argparse
import zoneinfo
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trader.market.files import ReadOptions


def add_reading_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the options to `parser`, and return it."""
    group = parser.add_argument_group("reading files of bars")
    group.add_argument(
        "--time-column",
        metavar="NAME",
        help="the column of bar times (default: timestamps, timestamp, datetime, date, time or "
        "open_time, else an unnamed first column)",
    )
    group.add_argument(
        "--date-format",
        type=_date_format,
        metavar="FORMAT",
        help="strptime format of the times, e.g. '%%d/%%m/%%Y %%H:%%M' (default: ISO 8601, epoch "
        "numbers, or month/day or day/month where the file's values say which)",
    )
    group.add_argument(
        "--timezone",
        type=_timezone,
        metavar="ZONE",
        help="IANA zone of times written without one, e.g. Asia/Shanghai (default: UTC)",
    )
    group.add_argument(
        "--strict",
        action="store_true",
        help="refuse files out of time order or with a time repeated with other values, "
        "instead of sorting them or keeping the first",
    )
    return parser


def reading_options(args: argparse.Namespace) -> ReadOptions:
    from trader.market.files import ReadOptions  # noqa: PLC0415 - pyarrow only when reading

    return ReadOptions(
        time_column=args.time_column,
        date_format=args.date_format,
        timezone=args.timezone,
        strict=args.strict,
    )


def _date_format(text: str) -> str:
    if "%" not in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a strptime format (no % directive), e.g. %d/%m/%Y %H:%M"
        )
    return text


def _timezone(text: str) -> str:
    try:
        zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time zone; give an IANA name such as Asia/Shanghai"
        ) from None
    return text
