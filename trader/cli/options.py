"""What several verbs share: the common options (--config, --log-level, --log-format), loading
the settings with logging set up by them, the file-reading options, the model-check options and
the argument types.

Only the standard library at import: every verb's parser is built on each start of the CLI, so
`trader --help` must not pay for pydantic, pyarrow or torch.
"""

from __future__ import annotations

import argparse
import sys
import zoneinfo
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from trader.exit_codes import EX_CANTCREAT
from trader.private_files import NotWritable, UnsafePath, usable_folder

if TYPE_CHECKING:
    from trader.config import LoadedSettings
    from trader.config.loader import DataLayer
    from trader.market.files.options import ReadOptions

# The CLI's subparsers action, as typeshed types it (a string: not subscriptable at run time).
Verbs: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Load: TypeAlias = Callable[["DataLayer | None"], "LoadedSettings"]


def common_options() -> argparse.ArgumentParser:
    """The parent parser of every verb that reads the settings."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        type=Path,
        metavar="PATH",
        help="TOML settings file (default: $TRADER_CONFIG, else config/default.toml)",
    )
    common.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    common.add_argument("--log-format", choices=["auto", "json", "console"])
    return common


def load(args: argparse.Namespace, from_data: DataLayer | None = None) -> LoadedSettings:
    """The settings, and logging set up by them; `from_data`: what a replay's files decide."""
    from trader.config import load_from_environment  # noqa: PLC0415 - pydantic
    from trader.logging import configure_logging  # noqa: PLC0415 - structlog

    loaded = load_from_environment(args.config, from_data=from_data)
    overrides = {}
    if args.log_level:
        overrides["level"] = args.log_level
    if args.log_format:
        overrides["format"] = args.log_format
    configure_logging(
        loaded.settings.log.model_copy(update=overrides), secrets=loaded.secret_values()
    )
    return loaded


def loader(args: argparse.Namespace) -> Load:
    """`load` for a verb whose files decide part of the settings."""
    return lambda from_data: load(args, from_data)


def add_reading_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--time-column, --date-format, --timezone, --strict, --ticker: how a file of bars is
    read."""
    group = parser.add_argument_group("reading files of bars")
    group.add_argument(
        "--ticker",
        action="append",
        metavar="VALUE",
        help="the rows to read from a file whose Ticker (symbol, code, name...) column names "
        "several instruments: that column's value, one per file in order, or several for one "
        "file (default: the instrument --symbol names; a file of several needs one of them)",
    )
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
        "--prices",
        choices=["adjusted", "raw"],
        default="adjusted",
        help="where a file has an adjusted close (Adj Close): adjusted scales open, high, low "
        "and close by adjusted close / close and volume inversely, so that a split or a "
        "dividend is not booked as a loss, as a holder lived it and as most backtesters "
        "trade; raw trades the prices as written, naming one-bar moves like a split "
        "(default: adjusted)",
    )
    group.add_argument(
        "--strict",
        action="store_true",
        help="refuse files out of time order or with a time repeated with other values, "
        "instead of sorting them or keeping the first",
    )
    return parser


def reading_options(args: argparse.Namespace) -> ReadOptions:
    from trader.market.files.options import ReadOptions  # noqa: PLC0415 - only when reading

    return ReadOptions(
        time_column=args.time_column,
        date_format=args.date_format,
        timezone=args.timezone,
        strict=args.strict,
        prices=args.prices,
        tickers=tuple(args.ticker or ()),
    )


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """What the model checks (`trader doctor`, `trader bench compile`) share: which weights to
    run on, and what stands in when there are none."""
    parser.add_argument("--device", help="auto, cpu, cuda or cuda:N (default: forecast.device)")
    parser.add_argument("--weights", type=Path, metavar="DIR", help="checkpoint directory")
    parser.add_argument("--tokenizer", type=Path, metavar="DIR", help="Kronos tokenizer")
    parser.add_argument(
        "--size",
        choices=["published", "small"],
        default="published",
        help="architecture of the random weights used when no real ones are found",
    )


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def utc_date(text: str) -> datetime:
    return period_bound(text, end=False)


def utc_end(text: str) -> datetime:
    """The end of a period: a bare date means all of that day."""
    return period_bound(text, end=True)


def period_bound(text: str, *, end: bool) -> datetime:
    """A UTC date or time; a bare date as an end means the whole of that day."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date like 2024-01-31") from None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if end and len(text) <= len("2024-01-31"):
        return parsed + timedelta(days=1) - timedelta(milliseconds=1)
    return parsed


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


def out_refused(verb: str, out: Path | None) -> int | None:
    """--out checked before any work (creating nothing): a file in its place, a folder that
    cannot be written, a link or one others may write to gets one line and exit 73."""
    if out is None:
        return None
    try:
        usable_folder(out, "--out")
    except (NotWritable, UnsafePath, OSError) as error:
        sys.stderr.write(f"trader {verb}: {error}\n")
        return EX_CANTCREAT
    return None
