"""`trader backtest --costs-from FILE`: the costs a daemon really paid (`trader shortfall` writes
them, `FILE_NAME` in its report folder) become the backtest's cost settings, so the next
backtest is calibrated on what the venue did. The report says which costs are measured (from
which file, period and fills) and which stay modelled.

What each setting takes (the paper broker's and the replay's own definitions, which
`trader.domain.shortfall_costs` measures in the same terms):

    broker.slippage_bps       the mean slippage of market-order fills beyond the touch at the
                              decision (the paper broker fills a market order at the touch
                              worsened by it)
    broker.taker_fee_bps      fees over notional of taker fills
    broker.maker_fee_bps      ... of maker fills
    market.replay_spread_bps  the mean quoted spread of fills with a real quote (ask - bid over
                              the mid: the replay quotes close -+ half of it), with
                              market.replay_spread = "fixed": the spread measured, not estimated

Means weigh every fill once (the measurement's own convention), so the backtest pays on average
what the daemon paid. Figures are rounded to 0.01 bps. A figure the settings cannot take (a
negative slippage or fee: price improvement, a maker rebate) is taken as 0, and the report says
so. The measured figures win over every layer of the settings (defaults, the TOML file, .env,
the environment): the person asked for them by naming the file; the report names the value each
replaced and where it came from. A grid over a measured setting is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trader.config.loader import Origin
    from trader.config.schema import Settings
    from trader.domain.shortfall_costs import MeasuredCosts

FORMAT = "trader.measured_costs/1"
FILE_NAME = "costs.json"  # in `trader shortfall`'s report folder
HUNDREDTH = Decimal("0.01")
SLIPPAGE, TAKER, MAKER = "broker.slippage_bps", "broker.taker_fee_bps", "broker.maker_fee_bps"
SPREAD = "market.replay_spread_bps"
MEASURABLE = (SPREAD, SLIPPAGE, TAKER, MAKER)
# What no costs file measures: they stay modelled whatever the file says.
NEVER_MEASURED = {
    "broker.max_volume_share": "the share of a bar's volume a fill may take",
}


class CostsFileError(Exception):
    """The file cannot be used: the message says why."""


# --- the file ---------------------------------------------------------------------------------


def costs_document(
    measured: MeasuredCosts,
    *,
    venue: str,
    mode: str,
    currency: str,
    begin: datetime,
    end: datetime,
    ledger: Path,
    modelled: MeasuredCosts | None = None,
) -> dict[str, object]:
    """What `trader shortfall` writes: the daemon's measured costs (`actual`), and the replay's
    (`modelled`) for comparison, with where they come from. `ledger`'s digest is taken here."""
    fills = sum(int(g.fills) for g in measured.groups)
    return {
        "format": FORMAT,
        "venue": venue,
        "mode": mode,
        "currency": currency,
        "period": {
            "from": begin.astimezone(UTC).isoformat(),
            "to": end.astimezone(UTC).isoformat(),
        },
        "ledger": {"path": str(ledger), "sha256": _sha256(ledger)},
        "fills": fills,
        "actual": measured.as_dict(),
        "modelled": None if modelled is None else modelled.as_dict(),
    }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Figure:
    """One measured figure: its value in bps and the fills it is the mean of."""

    bps: float
    fills: int


@dataclass(frozen=True)
class CostsFile:
    path: Path
    sha256: str
    venue: str
    mode: str
    begin: datetime
    end: datetime
    ledger: str
    fills: int
    figures: Mapping[str, Figure]  # by setting key, only those the file measured
    limit_fill_ratio: float | None

    @property
    def period(self) -> str:
        return f"{self.begin:%Y-%m-%d %H:%M} .. {self.end:%Y-%m-%d %H:%M} UTC"


def read_costs_file(path: Path) -> CostsFile:
    """The file, checked; `CostsFileError` names what is wrong with it."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CostsFileError(f"{path}: no such file") from None
    except OSError as error:
        raise CostsFileError(f"{path}: cannot be read ({error.strerror or error})") from None
    try:
        document = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CostsFileError(f"{path}: not JSON ({error})") from None
    try:
        return _parse(path, hashlib.sha256(raw).hexdigest(), document)
    except _Bad as bad:
        raise CostsFileError(
            f"{path}: {bad} (a {FORMAT} file, as trader shortfall writes)"
        ) from None


class _Bad(Exception):
    pass


def _parse(path: Path, sha256: str, document: object) -> CostsFile:
    top = _object(document, "the file")
    if top.get("format") != FORMAT:
        raise _Bad(f"format is {top.get('format')!r}, not {FORMAT!r}")
    period = _object(top.get("period"), "period")
    begin, end = _time(period.get("from"), "period.from"), _time(period.get("to"), "period.to")
    if end < begin:
        raise _Bad("period.to is before period.from")
    ledger = _object(top.get("ledger"), "ledger")
    actual = _object(top.get("actual"), "actual")
    slippage, spread, fills = _groups(actual.get("groups"))
    if fills == 0 or top.get("fills") != fills:
        raise _Bad(
            "no fills: nothing was measured"
            if fills == 0
            else f"fills is {top.get('fills')!r} but its groups hold {fills}"
        )
    fees = _object(actual.get("fee_bps"), "actual.fee_bps")
    figures = {}
    for key, figure in ((SLIPPAGE, _weighted(slippage)), (SPREAD, _weighted(spread))):
        if figure is not None:
            figures[key] = figure
    for key, liquidity in ((TAKER, "taker"), (MAKER, "maker")):
        if liquidity in fees:  # the file does not count fills by liquidity: 0, not known
            figures[key] = Figure(_number(fees[liquidity], f"actual.fee_bps.{liquidity}"), 0)
    ratio = actual.get("limit_fill_ratio")
    return CostsFile(
        path, sha256, _text(top.get("venue"), "venue"), _text(top.get("mode"), "mode"),
        begin, end, _text(ledger.get("path"), "ledger.path"), fills, figures,
        None if ratio is None else _number(ratio, "actual.limit_fill_ratio"),
    )  # fmt: skip


def _groups(groups: object) -> tuple[list[Figure], list[Figure], int]:
    """Market orders' slippage, the spread and the fills, per group of the file."""
    if not isinstance(groups, list):
        raise _Bad("actual.groups is not a list")
    slippage: list[Figure] = []
    spread: list[Figure] = []
    fills = 0
    for n, item in enumerate(groups):
        group = _object(item, f"actual.groups[{n}]")
        count = _count(group.get("fills"), f"actual.groups[{n}].fills")
        fills += count
        if group.get("type") not in {"market", "limit"} or group.get("side") not in {"buy", "sell"}:
            raise _Bad(f"actual.groups[{n}]: side and type must be buy/sell and market/limit")
        measured_spread = _distribution(group.get("spread_bps"), f"actual.groups[{n}].spread_bps")
        if measured_spread is not None:
            spread.append(measured_spread)
        if group["type"] == "market":
            slip = _distribution(group.get("slippage_bps"), f"actual.groups[{n}].slippage_bps")
            if slip is not None:
                slippage.append(slip)
    return slippage, spread, fills


def _weighted(parts: Sequence[Figure]) -> Figure | None:
    fills = sum(p.fills for p in parts)
    if not fills:
        return None
    return Figure(math.fsum(p.bps * p.fills for p in parts) / fills, fills)


def _object(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(f"{what} is not an object")
    return value


def _text(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Bad(f"{what} is missing or not text")
    return value


def _time(value: object, what: str) -> datetime:
    try:
        at = datetime.fromisoformat(_text(value, what))
    except ValueError:
        raise _Bad(f"{what} is not an ISO time: {value!r}") from None
    if at.tzinfo is None:
        raise _Bad(f"{what} has no time zone: {value!r}")
    return at.astimezone(UTC)


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad(f"{what} is not a count: {value!r}")
    return value


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Bad(f"{what} is not a finite number: {value!r}")
    return float(value)


def _distribution(value: object, what: str) -> Figure | None:
    if value is None:
        return None
    found = _object(value, what)
    count = _count(found.get("count"), f"{what}.count")
    return Figure(_number(found.get("mean"), f"{what}.mean"), count) if count else None


# --- the settings -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    key: str
    value: Decimal
    figure: Figure
    replaced: str  # the value it replaced and where that came from
    note: str = ""  # e.g. a negative figure taken as 0


@dataclass(frozen=True)
class Modelled:
    key: str
    value: str
    why: str  # why it is not measured


@dataclass(frozen=True)
class CostCalibration:
    """What `--costs-from` did to the settings: each cost measured or modelled, and why."""

    source: CostsFile
    measured: tuple[Measured, ...]
    modelled: tuple[Modelled, ...]

    def apply(self, settings: Settings) -> Settings:
        broker: dict[str, object] = {}
        market: dict[str, object] = {}
        for item in self.measured:
            section, name = item.key.split(".")
            if section == "broker":
                broker[name] = item.value
            else:
                market[name] = float(item.value)
                market["replay_spread"] = "fixed"
        return settings.model_copy(
            update={
                "broker": settings.broker.model_copy(update=broker),
                "market": settings.market.model_copy(update=market),
            }
        )

    def headline(self) -> str:
        s = self.source
        measured = ", ".join(f"{m.key.split('.')[1]} {m.value}" for m in self.measured)
        return (
            f"costs measured by {s.mode} on {s.venue}, {s.period}, {s.fills:,} fills "
            f"({s.path}): {measured or 'none'}; the other costs are modelled"
        )

    def lines(self) -> list[str]:
        """One line per cost: measured (from what) or modelled (why)."""
        lines = []
        for m in self.measured:
            lines.append(
                f"measured: {m.key} = {m.value} (mean of {m.figure.fills:,} fills"
                if m.figure.fills
                else f"measured: {m.key} = {m.value} (fees over notional of its "
                f"{m.key.split('.')[1].split('_')[0]} fills"
            )
            lines[-1] += f"; replaces {m.replaced}){m.note}"
        lines += [f"modelled: {m.key} = {m.value} ({m.why})" for m in self.modelled]
        return lines

    def as_dict(self) -> dict[str, object]:
        s = self.source
        return {
            "file": str(s.path),
            "sha256": s.sha256,
            "venue": s.venue,
            "mode": s.mode,
            "period": {"from": s.begin.isoformat(), "to": s.end.isoformat()},
            "ledger": s.ledger,
            "fills": s.fills,
            "measured": {
                m.key: {"value": str(m.value), "fills": m.figure.fills, "replaced": m.replaced}
                for m in self.measured
            },
            "modelled": {m.key: {"value": m.value, "why": m.why} for m in self.modelled},
        }


def calibrate(
    source: CostsFile, settings: Settings, origins: Mapping[str, Origin]
) -> CostCalibration:
    measured, modelled = [], []
    for key in MEASURABLE:
        current = _read(settings, key)
        figure = source.figures.get(key)
        if figure is None:
            modelled.append(Modelled(key, str(current), _unmeasured(key)))
            continue
        value = Decimal(repr(figure.bps)).quantize(HUNDREDTH, ROUND_HALF_EVEN)
        note = ""
        if value < 0:
            note = f"; measured {value} bps, which the settings cannot take: 0"
            value = Decimal("0.00")
        origin = origins.get(key)
        replaced = f"{current} ({origin or 'default'})"
        if key == SPREAD and settings.market.replay_spread != "fixed":
            replaced += f", replay_spread {settings.market.replay_spread} -> fixed"
        measured.append(Measured(key, value, figure, replaced, note))
    for key, what in NEVER_MEASURED.items():
        modelled.append(Modelled(key, str(_read(settings, key)), f"{what}: not measured"))
    ratio = source.limit_fill_ratio
    if ratio is not None:
        modelled.append(
            Modelled(
                "limit fills",
                "bars trading through the limit",
                f"measured fill ratio {ratio:.1%}, which no backtest setting takes",
            )
        )
    return CostCalibration(source, tuple(measured), tuple(modelled))


def _read(settings: Settings, key: str) -> object:
    section, name = key.split(".")
    return getattr(getattr(settings, section), name)


def _unmeasured(key: str) -> str:
    return {
        SLIPPAGE: "no market-order fills measured",
        TAKER: "no taker fills measured",
        MAKER: "no maker fills measured",
        SPREAD: "no fill priced on a real quote",
    }[key]


def grid_conflicts(source: CostsFile, grid: Sequence[str]) -> list[str]:
    """The grid's keys (KEY=V1,V2) that the file sets: which value would a run take?"""
    keys = set(source.figures)
    if SPREAD in keys:
        keys.add("market.replay_spread")
    named = [item.split("=", 1)[0].strip() for item in grid]
    return [key for key in named if key in keys]
