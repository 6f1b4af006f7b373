"""A shortfall attribution in one line: "live made 1.8% less than its backtest: 1.1% spread,
0.5% fees, 0.2% delay". Percentages are of the actual run's starting equity (amounts in the
cash currency where it has none), largest parts first. A part is shown in the line's sense:
with "less", 1.1% spread means spread cost 1.1%, and -0.2% slippage that slippage made up
0.2%; with "the same", each part is its signed effect on the actual run's P&L."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Context, Decimal, localcontext

from trader.domain.money import ZERO
from trader.domain.shortfall import Attribution, Part

SHOWN = 4  # parts named in the line; the rest are counted

# What each part measures, for a report's table (the formulas: `trader.domain.shortfall`).
MEANING = {
    Part.QUOTE: "the real quote's mid at a decision against the modelled quote's",
    Part.LATE_TICKS: "the same, at ticks the daemon ran late: the later quote's",
    Part.SPREAD: "half the quoted spread, paid crossing it, against the modelled",
    Part.DELAY: "the mid's move between the decision and the fill",
    Part.SLIPPAGE: "the fill price beyond the quote and the move",
    Part.FEES: "fees paid against the modelled fees",
    Part.MISSED_FILLS: "fills the model expected and the venue gave none of",
    Part.PARTIAL_FILLS: "the rest of orders the venue filled only in part",
    Part.EXTRA_FILLS: "fills the venue gave beyond what the model expected",
    Part.SKIPPED_TICKS: "orders of ticks the daemon skipped, and what followed from them",
    Part.HALTS: "orders of ticks the daemon ran halted, and what followed from them",
    Part.RISK_ACTIONS: "orders the risk checks refused or cut, and what followed from them",
    Part.SIZING: "orders sized from a different equity",
    Part.STARTING_POSITIONS: "positions the runs started with differently",
    Part.REMAINDER: "equity the fills and the marks do not explain",
}


def verdict(attribution: Attribution, actual: str = "live", modelled: str = "its backtest") -> str:
    difference = attribution.difference
    amount = _amount_in(attribution)
    if difference < 0:
        head, sense = f"{actual} made {amount(-difference)} less than {modelled}", -1
    elif difference > 0:
        head, sense = f"{actual} made {amount(difference)} more than {modelled}", 1
    else:
        head, sense = f"{actual} made exactly what {modelled} made", 0
    order = list(Part)
    moved = sorted(
        ((part, value) for part, value in attribution.parts.items() if value),
        key=lambda item: (-abs(item[1]), order.index(item[0])),
    )
    if not moved:
        return head
    said = [
        f"{amount(value * sense) if sense else _signed(amount(value), value)} {part.label}"
        for part, value in moved[:SHOWN]
    ]
    if len(moved) > SHOWN:
        said.append(f"and {len(moved) - SHOWN} smaller")
    joiner = ": " if sense else "; its parts offset: "
    return head + joiner + ", ".join(said)


def _amount_in(attribution: Attribution) -> Callable[[Decimal], str]:
    """How an amount is said: as a percentage of the starting equity, or in cash without one."""
    start = attribution.start_equity
    if start <= 0:
        return lambda value: f"{value.normalize():f} {attribution.currency}"

    def percent(value: Decimal) -> str:
        with localcontext(Context(prec=28)):  # a display value: rounding is fine here
            return _percent(float(value / start) * 100)

    return percent


def _signed(text: str, value: Decimal) -> str:
    return text if value < ZERO or text.startswith("-") else "+" + text


def _percent(value: float) -> str:
    if abs(value) >= 0.1:
        return f"{value:.1f}%"
    if abs(value) >= 0.001:
        return f"{value:.3f}%"
    return "<0.001%" if value > 0 else ">-0.001%"
