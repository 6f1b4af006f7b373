"""The measures of a paper record, each from where it is kept: the ledger's ticks and trading
state (days, ticks skipped), its forecast scores (skill), and `trader shortfall`'s replay of
the same period through the backtest's engine (the shortfall, the replay's drawdown)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from trader.config.promote_settings import PromoteSettings
from trader.config.record import settings_from_record
from trader.config.schema import Settings
from trader.domain import Timeframe
from trader.exit_codes import EX_FAILED
from trader.promote.days import Span, calendar_of, span_of
from trader.promote.skill import forecast_skill
from trader.promote.verdict import Measures
from trader.risk.state import TradingState
from trader.shortfall.command import ShortfallRequest, run_shortfall
from trader.shortfall.read import LedgerRecord, StateEvent, UnreadableLedger, read_ledger

CHUNK = 1 << 20


class NotMeasurable(Exception):
    """The ledger cannot be judged at all (not a ledger, no ticks): the message says why."""


@dataclass(frozen=True)
class Evidence:
    measures: Measures
    settings: Settings  # what the paper daemon last ran with (the live settings start here)
    ledger_sha256: str
    span: Span
    shortfall_lines: list[str]  # `trader shortfall`'s own account of the replay


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def drawdown(curve: Sequence[tuple[datetime, Decimal]]) -> float | None:
    """The deepest fall from a running peak, as a share of that peak."""
    if not curve:
        return None
    peak, deepest = curve[0][1], 0.0
    for _, equity in curve:
        peak = max(peak, equity)
        if peak > 0:
            deepest = max(deepest, float((peak - equity) / peak))
    return deepest


def halted_ticks(ticks: Sequence[datetime], events: Sequence[StateEvent]) -> int:
    """Ticks run while trading was halted (the last state change at or before each)."""
    changes = sorted(events, key=lambda e: e.at)
    count, state, k = 0, TradingState.ACTIVE.value, 0
    for at in ticks:
        while k < len(changes) and changes[k].at <= at:
            state, k = changes[k].state, k + 1
        count += state == TradingState.HALTED.value
    return count


def recorded(record: LedgerRecord, given: Settings) -> Settings:
    """The settings of the daemon's last start (`given` for a ledger that recorded none);
    ValueError for recorded settings this version refuses."""
    kept = record.settings.get(record.runs[-1].settings_digest) if record.runs else None
    return given if kept is None else settings_from_record(kept)


def _span(record: LedgerRecord, settings: Settings) -> Span:
    ticks = [t.at for t in record.ticks]
    symbol = next(iter(sorted(record.bars)), None)
    if symbol is None:
        timeframe = Timeframe(settings.market.timeframe)
        starts: list[int] = []
    else:
        timeframe = Timeframe(record.timeframes[symbol])
        starts = [int(row[0]) for row in record.bars[symbol]]
    named = settings.market.calendars.get(symbol or "", settings.market.calendar)
    return span_of(ticks, calendar_of(starts, timeframe, named, ticks), timeframe)


def _replayed(
    ledger: Path, given: Settings, overrides: Mapping[str, Any]
) -> tuple[Decimal | None, Decimal | None, float | None, list[str], list[str]]:
    """(paper P&L, replay P&L, replay drawdown, shortfall's lines, problems)."""
    outcome = run_shortfall(ShortfallRequest(ledger, given, overrides))
    lines = outcome.lines
    modelled = outcome.modelled  # the replay's ledger, as the shortfall read it
    if outcome.result is None or outcome.comparison is None or modelled is None:
        return None, None, None, lines, [lines[0] if lines else "the replay failed"]
    problems = []
    if outcome.code == EX_FAILED:
        problems.append(lines[0])  # the replay did not reproduce a decision: a bug, not costs
    parts = outcome.attribution
    if parts is not None:
        return parts.actual_pnl, parts.modelled_pnl, drawdown(modelled.equity), lines, problems
    record = outcome.record
    if record is None or not record.equity or not modelled.equity:
        return None, None, drawdown(modelled.equity), lines, [*problems, "no equity booked"]
    paper = record.equity[-1][1] - record.starting_cash
    replay = modelled.equity[-1][1] - modelled.starting_cash
    return paper, replay, drawdown(modelled.equity), lines, problems


def measure(
    ledger: Path, given: Settings, overrides: Mapping[str, Any], thresholds: PromoteSettings
) -> Evidence:
    try:
        record = read_ledger(ledger)
    except UnreadableLedger as error:
        raise NotMeasurable(str(error)) from error
    if not record.ticks:
        raise NotMeasurable(f"{ledger} has no ticks: the daemon never traded")
    settings = recorded(record, given)
    span = _span(record, settings)
    booked = [t.at for t in record.ticks]
    failed = sum(1 for t in record.ticks if t.outcome == "failed")
    halted = halted_ticks(booked, record.events)
    missed = max(0, span.expected_ticks - len(booked))
    paper, replay, replay_dd, lines, problems = _replayed(ledger, given, overrides)
    skill = forecast_skill(ledger, settings.forecast.model, thresholds.skill_confidence)
    measures = Measures(
        days=span.days,
        sessions=span.sessions,
        expected_ticks=max(span.expected_ticks, len(booked)),
        skipped_ticks=missed + failed + halted,
        currency=record.currency,
        starting_equity=record.starting_cash,
        paper_pnl=paper,
        replay_pnl=replay,
        paper_drawdown=drawdown(record.equity),
        replay_drawdown=replay_dd,
        skill=skill,
        problems=tuple(problems),
    )
    return Evidence(measures, settings, file_sha256(ledger), span, lines)
