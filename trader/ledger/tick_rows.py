"""Rows a tick adds beside its decisions, for `trader shortfall`: the quote each decision was
made on (with its source: real, modelled or synthetic), and the orders the risk checks
refused."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from trader.domain import Quote, Signal
from trader.ledger.codec import money_text, time_text
from trader.risk.engine import Verdict

DECISION_QUOTES = "INSERT OR REPLACE INTO decision_quotes VALUES (?, ?, ?, ?, ?, ?)"
RISK_REFUSALS = "INSERT OR REPLACE INTO risk_refusals VALUES (?, ?, ?, ?)"


def quote_rows(
    ticks: Iterable[tuple[str, Sequence[Signal], Mapping[str, Quote]]],
) -> list[tuple[object, ...]]:
    """Per tick (its time as stored, its decisions, its quotes): each decision's quote."""
    return [
        (tick, s.symbol, money_text(q.bid), money_text(q.ask), q.source.value, time_text(q.at))
        for tick, decisions, quotes in ticks
        for s in decisions
        if (q := quotes.get(s.symbol)) is not None
    ]


def refusal_rows(
    ticks: Iterable[tuple[str, Sequence[tuple[str, Verdict]]]],
) -> list[tuple[object, ...]]:
    """Per tick (its time as stored, its refusals by symbol): one row each."""
    return [
        (tick, symbol, verdict.rule, verdict.reason)
        for tick, refusals in ticks
        for symbol, verdict in refusals
    ]
