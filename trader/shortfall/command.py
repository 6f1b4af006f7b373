"""`trader shortfall LEDGER`: read the daemon's ledger, replay its period, compare the two,
attribute the P&L difference, and say in the first line whether the replay reproduced every
decision, in the second the verdict. Exit 0 when it did; 1 naming the first tick where the same
forecast, position, quote and settings led to another decision; 65 for a ledger that cannot be
replayed or attributed (the reason first); 73 for an --out folder that cannot be written."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from trader.backtest.simulate import remove_ledger
from trader.config.schema import Settings
from trader.domain.errors import DomainError
from trader.domain.shortfall import Attribution
from trader.domain.shortfall_records import Period
from trader.domain.shortfall_verdict import verdict
from trader.exit_codes import EX_CANTCREAT, EX_DATAERR, EX_FAILED, EX_OK
from trader.private_files import NotWritable, UnsafePath, owned_folder, usable_folder, write_file
from trader.shortfall.attribute import Attributed, NotAttributable, attribution
from trader.shortfall.compare import Comparison, OrderComparison, compare
from trader.shortfall.read import LedgerRecord, UnreadableLedger, read_ledger
from trader.shortfall.replay import NotReplayable, ReplayResult, replay


@dataclass(frozen=True)
class ShortfallRequest:
    ledger: Path
    settings: Settings  # used only for a ledger that recorded none
    overrides: Mapping[str, Any]
    begin: datetime | None = None
    end: datetime | None = None
    keep: Path | None = None  # a folder for the replay's ledger and comparison.json


@dataclass(frozen=True)
class ShortfallOutcome:
    code: int
    lines: list[str]  # the first says what happened
    record: LedgerRecord | None = None  # the daemon's ledger (actual)
    result: ReplayResult | None = None
    comparison: Comparison | None = None
    attribution: Attribution | None = None
    modelled: LedgerRecord | None = None  # the replay's ledger
    period: Period | None = None  # what the attribution read (`measure_costs` of each run)
    written: list[Path] = field(default_factory=list)  # under --out
    refused: str | None = None  # why there is no attribution, as said in the lines
    caveats: tuple[str, ...] = ()  # orders the attribution took otherwise than recorded


OUT = "the --out folder"


def run_shortfall(request: ShortfallRequest) -> ShortfallOutcome:
    try:
        record = read_ledger(request.ledger)
    except UnreadableLedger as error:
        return ShortfallOutcome(EX_DATAERR, [f"trader shortfall: {error}"])
    if not record.ticks:
        return ShortfallOutcome(EX_DATAERR, [f"trader shortfall: {request.ledger} has no ticks"])
    if request.keep is not None:
        try:
            usable_folder(request.keep, OUT)
        except (UnsafePath, NotWritable) as error:
            return ShortfallOutcome(EX_CANTCREAT, [f"trader shortfall: {error}"])
    with tempfile.TemporaryDirectory(prefix="trader-shortfall-") as scratch:
        folder = owned_folder(request.keep, OUT) if request.keep else Path(scratch)
        target = folder / "replay.sqlite3"
        remove_ledger(target)  # a replay of an earlier run into the same --out
        try:
            result = asyncio.run(replay(record, request.settings, request.overrides, target))
            modelled = read_ledger(target)
        except (NotReplayable, UnreadableLedger, ValueError) as error:
            return ShortfallOutcome(EX_DATAERR, [f"trader shortfall: cannot replay: {error}"])
        changed = [(x.begin, x.end) for x in result.stretches if x.overridden]
        comparison = compare(
            record, modelled, request.begin, request.end,
            overridden=lambda at: any(b <= at <= e for b, e in changed),
        )  # fmt: skip
        attributed: Attributed | None = None
        refused: str | None = None
        try:
            attributed = attribution(record, modelled, request.begin, request.end)
        except (NotAttributable, DomainError) as error:
            refused = f"attribution not possible: {error}"
        parts = attributed.attribution if attributed is not None else None
        period = attributed.period if attributed is not None else None
        written = []
        if request.keep is not None:
            document = json.dumps(as_json(comparison, parts), indent=1)
            written.append(write_file(folder / "comparison.json", document, what=OUT))
    if comparison.ticks_both == 0:
        return ShortfallOutcome(EX_DATAERR, [
            f"trader shortfall: the replay ran none of the daemon's ticks "
            f"({len(record.ticks)} in its ledger): nothing to compare",
        ], record, result, comparison, modelled=modelled)  # fmt: skip
    caveats = _caveats(attributed) if attributed is not None else ()
    lines = _said(record, modelled, result, comparison)
    lines[1:1] = _attribution_lines(record, attributed, refused) + list(caveats)
    if comparison.first_unexplained is not None:
        code = EX_FAILED
    else:
        code = EX_DATAERR if attributed is None or attributed.unquoted else EX_OK
    return ShortfallOutcome(
        code, lines, record, result, comparison, parts, modelled, period, written, refused,
        caveats,
    )  # fmt: skip


def _attribution_lines(
    record: LedgerRecord, attributed: Attributed | None, refused: str | None
) -> list[str]:
    """The verdict in one line, then every part (zeros too) in the account's currency."""
    if attributed is None:
        return [str(refused)]
    parts = attributed.attribution
    broker = record.runs[-1].broker if record.runs else "the daemon"
    lines = [verdict(parts, actual=broker, modelled="its backtest replay")]
    lines.append(
        f"P&L: daemon {parts.actual_pnl:f}, replay {parts.modelled_pnl:f}, difference "
        f"{parts.difference:f} {parts.currency}, in parts: "
        + ", ".join(f"{part.label} {value:f}" for part, value in parts.parts.items())
    )
    if parts.remainder_reason:
        lines.append(f"remainder: {parts.remainder_reason}")
    return lines


def _caveats(attributed: Attributed) -> tuple[str, ...]:
    """The orders the attribution took otherwise than the ledger recorded them."""
    lines = []
    if attributed.borrowed:
        lines.append(
            f"orders priced with the replay's quote (the ledger kept none for their decision):"
            f" {len(attributed.borrowed)}: their spread and quote show as slippage"
        )
    if attributed.unquoted:
        lines.append(
            f"orders left out of the attribution (no quote recorded for their decision): "
            f"{len(attributed.unquoted)} (first {attributed.unquoted[0]})"
        )
    return tuple(lines)


def _equity_line(actual: LedgerRecord, modelled: LedgerRecord) -> str:
    """The last equity each booked, and the difference (actual less modelled)."""
    if not actual.equity or not modelled.equity:
        return "equity: not booked by both"
    (a_at, a), (m_at, m) = actual.equity[-1], modelled.equity[-1]
    when = a_at.isoformat() if a_at == m_at else f"{a_at.isoformat()} / {m_at.isoformat()}"
    return f"equity booked at {when} (each at its own marks): daemon {a:f}, replay {m:f}"


def _said(
    record: LedgerRecord, modelled: LedgerRecord, result: ReplayResult, comparison: Comparison
) -> list[str]:
    bug = comparison.first_unexplained
    if bug is not None:
        first = (
            f"trader shortfall: the replay did not reproduce the daemon's decisions: first at "
            f"{bug.describe()}, on the same forecast, position, quote and settings"
        )
    else:
        other = sum(1 for d in comparison.decision_differences if not d.unexplained)
        first = (
            "trader shortfall: the replay reproduced every decision "
            + ("made on the same inputs " if other else "")
            + f"({comparison.decisions_compared} compared over {comparison.ticks_both} ticks"
            + (f"; {other} differ where the quote, position or settings did)" if other else ")")
        )
    outcomes = Counter(str(o.outcome) for o in comparison.orders)
    lines = [first, _equity_line(record, modelled)]
    explained = [d for d in comparison.decision_differences if not d.unexplained]
    if explained:
        lines.append(f"decisions that differ where their inputs did: {len(explained)}")
    lines.append(
        "orders: " + (", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())) or "none")
    )
    terms = sum(1 for o in comparison.orders if o.terms_differ)
    if terms:
        lines.append(f"orders placed with other terms (amount, limit, expiry): {terms}")
    if comparison.ticks_only_modelled:
        lines.append(
            f"ticks the daemon did not run: {len(comparison.ticks_only_modelled)} (first "
            f"{comparison.ticks_only_modelled[0].isoformat()})"
        )
    if comparison.ticks_only_actual:
        lines.append(
            f"ticks the replay could not run: {len(comparison.ticks_only_actual)} (first "
            f"{comparison.ticks_only_actual[0].isoformat()})"
        )
    return lines + _daemon_lines(record, modelled, result)


def _daemon_lines(record: LedgerRecord, modelled: LedgerRecord, result: ReplayResult) -> list[str]:
    """What the daemon's ledger says of its starts, lateness and halts, and what the replay
    did otherwise than it (overrides, forecasts it lacked)."""
    lines = []
    runs = record.runs
    if runs:
        starts = sum(1 for r in runs if r.began_by == "start")
        killed = sum(1 for r in runs[:-1] if r.stopped_at is None)
        reloads = len(runs) - starts
        lines.append(
            f"daemon starts: {starts} ({killed} without a recorded stop), settings "
            f"{len({r.settings_digest for r in runs})} distinct"
            + (f", reloads: {reloads}" if reloads else "")
        )
    else:
        lines.append("the ledger recorded no settings (older than schema 10): replayed with "
                     "the settings given here")  # fmt: skip
    overridden: list[tuple[str, Any, Any]] = []  # once each, though every stretch has it
    for stretch in result.stretches:
        overridden += [d for d in stretch.overridden if d not in overridden]
    lines += [f"overridden: {k} = {used!r} (the daemon ran with {recorded!r})"
              for k, recorded, used in overridden]  # fmt: skip
    if result.missing:
        lines.append(f"forecasts the ledger lacked: {dict(sorted(result.missing.items()))}")
    if result.computed:
        lines.append(
            "forecasts the model made anew where the daemon decided nothing (it or the "
            f"exchange was down): {dict(sorted(result.computed.items()))}"
        )
    late = [t for t in record.late if not t.missed]
    missed = [t for t in record.late if t.missed]
    if late or missed:
        worst = max(t.lateness_s for t in record.late)
        lines.append(f"ticks the daemon ran late: {len(late)}, missed: {len(missed)} (the "
                     f"latest {worst:.1f} s)")  # fmt: skip
    if record.refusals or modelled.refusals:
        lines.append(
            f"orders the risk checks refused: daemon {len(record.refusals)}, replay "
            f"{len(modelled.refusals)}"
        )
    halts = [e for e in record.events if e.state != "active"]
    if halts:
        lines.append(f"trading state changes: {len(halts)} (first {halts[0].reason})")
    lines += result.notes
    return lines


def _order_json(o: OrderComparison) -> dict[str, Any]:
    def filled(side: Any) -> dict[str, Any]:
        return {
            "amount": str(side.amount), "notional": str(side.notional), "fee": str(side.fee),
            "first_at": side.first_at.isoformat() if side.first_at else None,
            "fills": len(side.fills),
        }  # fmt: skip

    def quote(q: Any) -> dict[str, str] | None:
        return None if q is None else {"bid": str(q.bid), "ask": str(q.ask), "source": q.source}

    return {
        "client_order_id": o.client_order_id, "symbol": o.symbol, "side": o.side.value,
        "type": o.type.value, "decided_at": o.decided_at.isoformat(), "outcome": str(o.outcome),
        "actual": filled(o.actual), "modelled": filled(o.modelled),
        "quote": quote(o.quote), "modelled_quote": quote(o.modelled_quote),
    }  # fmt: skip


def as_json(comparison: Comparison, parts: Attribution | None = None) -> dict[str, Any]:
    bug = comparison.first_unexplained
    return {
        "attribution": parts.as_dict() if parts is not None else None,
        "reproduced": bug is None,
        "first_unexplained": bug.describe() if bug is not None else None,
        "ticks_both": comparison.ticks_both,
        "ticks_only_actual": [t.isoformat() for t in comparison.ticks_only_actual],
        "ticks_only_modelled": [t.isoformat() for t in comparison.ticks_only_modelled],
        "decisions_compared": comparison.decisions_compared,
        "decision_differences": [d.describe() for d in comparison.decision_differences],
        "orders": [_order_json(o) for o in comparison.orders],
    }
