"""What the shortfall report shows (`trader.shortfall.report`): the command's outcome as one
record, the fills' slippage, and how amounts and times are written."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trader.domain import Fill, Quote
from trader.domain.money import exact
from trader.domain.shortfall import Attribution
from trader.domain.shortfall_records import Period
from trader.shortfall.compare import Comparison, OrderComparison
from trader.shortfall.read import LedgerRecord

if TYPE_CHECKING:
    from trader.shortfall.replay import ReplayResult


JSON_FILE = "shortfall.json"  # beside report.md
MODELLED = "its backtest replay"  # how the verdict names the replay, as the command's line does
SHOWN = 10  # rows of the longer tables (the JSON has them all)
BPS = Decimal(10_000)


@dataclass(frozen=True)
class Slip:
    """One fill's price beyond the touch of the quote its decision priced with (the ask for a
    buy, the bid for a sell): what `broker.slippage_bps` models, the move until the fill
    included (`trader.domain.shortfall_costs`' definition)."""

    order: OrderComparison
    fill: Fill
    touch: Decimal
    bps: float
    cost: Decimal  # side * (price - touch) * amount, in the quote currency: exact


@dataclass(frozen=True)
class Shortfall:
    """What the report shows: the command's outcome, with the replay's ledger read back."""

    ledger: Path
    code: int
    lines: Sequence[str]
    actual: LedgerRecord
    modelled: LedgerRecord | None
    result: ReplayResult | None
    comparison: Comparison
    attribution: Attribution | None
    begin: datetime | None = None
    end: datetime | None = None
    period: Period | None = None  # what the attribution read: each run's orders and fills
    written: Sequence[Path] = ()  # what the command wrote in the folder already
    refusal: str | None = None  # why there is no attribution, as the command said it
    caveat_lines: Sequence[str] = ()  # orders the attribution took otherwise than recorded

    @property
    def name(self) -> str:
        """The daemon as the verdict names it: its broker (paper or live)."""
        return self.actual.runs[-1].broker if self.actual.runs else "the daemon"

    @property
    def venue(self) -> str:
        return self.actual.runs[-1].venue if self.actual.runs else "unrecorded"

    def ticks(self) -> list[datetime]:
        """The daemon's ticks in the period compared."""
        return [
            t.at
            for t in self.actual.ticks
            if (self.begin is None or t.at >= self.begin) and (self.end is None or t.at <= self.end)
        ]

    def refused(self) -> str | None:
        """Why there is no attribution, as the command said it."""
        if self.attribution is not None:
            return None
        return self.refusal or "attribution not possible"

    def caveats(self) -> list[str]:
        """What the command said the attribution could not take as recorded: orders left out
        (no quote at all) or priced with the replay's quote (the ledger kept none)."""
        return list(self.caveat_lines)


def slips(orders: Iterable[OrderComparison], actual: bool) -> list[Slip]:
    """Every fill of one run with a quote to price it against (daemon: its own quote, else
    the replay's; replay: its modelled quote, else the daemon's)."""
    out = []
    for c in orders:
        own, other = (c.quote, c.modelled_quote) if actual else (c.modelled_quote, c.quote)
        quote: Quote | None = own or other
        if quote is None:
            continue
        touch = quote.ask if c.side.sign > 0 else quote.bid
        for fill in (c.actual if actual else c.modelled).fills:
            with exact():
                beyond = c.side.sign * (fill.price - touch)
                cost = beyond * fill.amount
            out.append(Slip(c, fill, touch, float(beyond / touch * BPS), cost))
    return out


def means(values: Iterable[tuple[Any, float]]) -> dict[Any, float]:
    grouped: dict[Any, list[float]] = defaultdict(list)
    for key, value in values:
        grouped[key].append(value)
    return {key: math.fsum(v) / len(v) for key, v in sorted(grouped.items())}


def amount(value: Decimal) -> str:
    """Exact, without trailing zeros: the table's amounts add up to its total digit for digit."""
    return "0" if value == 0 else f"{value.normalize():f}"


def share(value: Decimal, start: Decimal) -> str:
    if start <= 0:
        return "n/a"
    return f"{float(value / start) * 100:+.3f}%"


def when(at: datetime | None) -> str:
    return "-" if at is None else at.strftime("%Y-%m-%d %H:%M:%S")


def said(line: str) -> str:
    return line.removeprefix("trader shortfall: ")
