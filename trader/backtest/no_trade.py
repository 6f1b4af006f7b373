"""Why a strategy never traded, in words, from what its run recorded: the reasons its decisions
gave for holding no position (the ledger's `decisions`, counted by kind), the orders it sent
that never filled, the orders the risk checks refused, and the ticks it skipped.

A strategy that made no trade may be right not to trade, so this alone does not fail a run;
but a table whose row shows 0 trades must say why before anything else (`findings`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from trader.backtest.skip_verdict import by_count

# A number as the strategies write them in their reasons (+1.2, -0.5, 1,234.5, 1e-05), not a
# digit inside a word (a model named toto2).
_NUMBER = re.compile(r"(?<![\w.])[+-]?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?(?![\w])")

# The reasons the strategies (trader/strategy/) give for holding no position, by kind, as a
# reader says them. A reason not here is shown as its kind.
_SAID = {
    "no trade: forecast # bps inside its band # bps": "the forecast stayed inside its band",
    "no trade: forecast # bps does not cover costs # bps": (
        "the forecast move was below its costs (fees both ways and the spread)"
    ),
    "no trade: forecast # bps is short-side and shorting is off": (
        "the forecast was down and shorting is off"
    ),
    "no trade: median forecast return # bps (long only)": (
        "the forecast was down and shorting is off"
    ),
    "no trade: median forecast return # bps (no move)": "the forecast had no move",
    "no trade: spread unknown (synthetic quote)": (
        "the spread was unknown (synthetic quotes: market.add_latest is off)"
    ),
    "no trade: forecast range # bps does not pay maker fees # bps": (
        "the forecast's range did not pay the maker fees"
    ),
    "no trade: the forecast range does not straddle the market": (
        "the forecast's range did not straddle the market"
    ),
    "no trade: the forecast has no high/low": "the forecast had no high and low",
}
_SAID_FROM = {  # kinds that name models: said by how they begin
    "no trade: models disagree": "the models disagreed",
    "no trade: consensus needs two models": "the consensus gate had one model",
}
_REFUSED = "(min_edge: the forecast move did not clear fees, spread and risk.min_edge_bps)"
_RESTING = {"expired", "canceled", "open"}  # a limit that rested and was never reached


def reason_kind(reason: str) -> str:
    """A decision's reason with its numbers taken out: the reasons of one kind alike."""
    return _NUMBER.sub("#", reason)


def said(kind: str) -> str:
    """A reason's kind as a reader says it."""
    if kind in _SAID:
        return _SAID[kind]
    for start, words in _SAID_FROM.items():
        if kind.startswith(start):
            return words
    return repr(kind)


@dataclass(frozen=True)
class Activity:
    """What one strategy's run did besides trading, all counted over the run."""

    ticks: int  # symbol-ticks: the run's ticks times its symbols
    symbols: int
    flat: Mapping[str, int]  # decisions to hold no position, by the reason's kind
    wanted: int  # decisions to hold a position
    orders: Mapping[str, int]  # orders sent, by final status
    refusals: Mapping[str, int]  # orders the risk checks refused, by rule
    skipped: Mapping[str, int]  # symbol-ticks skipped, by reason


def why_no_trade(activity: Activity) -> str:
    """Why a run with no fill made no trade: each cause with its count, the largest first."""
    unit = "ticks" if activity.symbols == 1 else "symbol-ticks"
    total = activity.ticks

    def at(n: int) -> str:
        return f"at all {total:,} {unit}" if n == total else f"at {n:,} of {total:,} {unit}"

    skipped = sum(activity.skipped.values())
    if total and skipped >= total:
        return f"skipped every tick ({by_count(activity.skipped)})"
    causes: dict[str, int] = {}
    for kind, n in activity.flat.items():
        words = said(kind)
        causes[words] = causes.get(words, 0) + n
    parts = [(n, f"{words} {at(n)}") for words, n in causes.items()]
    if activity.wanted:
        parts.append((activity.wanted, _wanted(activity, at(activity.wanted))))
    if skipped:
        parts.append((skipped, f"skipped {at(skipped)} ({by_count(activity.skipped)})"))
    parts.sort(key=lambda part: -part[0])
    return "; ".join(text for _, text in parts) or f"no decision in {total:,} {unit}"


def _wanted(activity: Activity, at: str) -> str:
    """Why the position it wanted `at` so many ticks came to no fill."""
    said_ = []
    orders = sum(activity.orders.values())
    if orders:
        counts = by_count(activity.orders)
        if set(activity.orders) <= _RESTING:
            said_.append(f"no fill: its limits were never reached ({orders:,} orders: {counts})")
        else:
            said_.append(f"no fill: none of its {orders:,} orders filled ({counts})")
    if activity.refusals:
        said_.append(
            f"the risk checks refused the orders it wanted, by {by_count(activity.refusals)}"
            + (f" {_REFUSED}" if "min_edge" in activity.refusals else "")
        )
    why = " and ".join(said_) or "it sent no order (the log says why)"
    return f"it wanted a position {at}, but {why}"
