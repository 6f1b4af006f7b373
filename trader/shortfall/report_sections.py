"""The shortfall report's sections as blocks (`trader.backtest.document`), in reading order:
"Read this first", the attribution, equity, decisions, orders and fills, then the ledger's
record (`report_record`) and the costs (`report_costs`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from trader.backtest.document import (
    Block,
    Bullets,
    Code,
    Heading,
    Image,
    Paragraph,
    Table,
)
from trader.backtest.measured_costs import (
    FILE_NAME as COSTS_FILE,
)
from trader.backtest.measured_costs import (
    Figure,
)
from trader.domain.money import ZERO
from trader.domain.shortfall import Attribution
from trader.domain.shortfall_costs import MeasuredCosts
from trader.domain.shortfall_verdict import MEANING, verdict
from trader.shortfall.compare import Comparison, FillOutcome
from trader.shortfall.report_costs import cost_blocks
from trader.shortfall.report_facts import (
    JSON_FILE,
    MODELLED,
    SHOWN,
    Shortfall,
    amount,
    said,
    share,
    slips,
    when,
)
from trader.shortfall.report_record import settings_blocks, tick_blocks

OUTCOMES = {
    FillOutcome.SAME: "the same fills, to the last digit",
    FillOutcome.DIFFERENT: "the same amount filled, at other prices, times or fees",
    FillOutcome.PARTIAL: "the venue filled less than the model",
    FillOutcome.OVERFILLED: "the venue filled more than the model",
    FillOutcome.MISSED: "the model filled, the venue did not",
    FillOutcome.EXTRA: "the venue filled, the model did not",
    FillOutcome.NEITHER: "placed by both, filled by neither",
    FillOutcome.ONLY_ACTUAL: "placed only by the daemon",
    FillOutcome.ONLY_MODELLED: "placed only by the replay",
}


def read_this_first(facts: Shortfall, costs: bool) -> list[str]:
    c = facts.comparison
    items = []
    a = facts.attribution
    if a is not None:
        items.append(verdict(a, actual=facts.name, modelled=MODELLED))
    else:
        items.append(f"no attribution: {said(facts.refused() or '')}")
    items.append(said(facts.lines[0]) if facts.lines else "nothing said")
    ticks = facts.ticks()
    if ticks:
        items.append(
            f"period compared: {when(ticks[0])} .. {when(ticks[-1])} UTC, {c.ticks_both:,} "
            f"ticks run by both, {c.decisions_compared:,} decisions and {len(c.orders):,} "
            f"orders compared"
        )
    not_compared = []
    if c.ticks_only_modelled:
        not_compared.append(
            f"{len(c.ticks_only_modelled)} ticks the daemon did not run (the "
            "replay shows what the model would have done)"
        )
    if c.ticks_only_actual:
        not_compared.append(f"{len(c.ticks_only_actual)} ticks the replay could not run")
    not_compared += facts.caveats()
    if facts.result is not None and facts.result.missing:
        missing = sum(facts.result.missing.values())
        not_compared.append(f"{missing} forecasts the ledger lacked (the replay ran without)")
    if facts.modelled is None:
        not_compared.append("the replay's ledger was not kept: no replay equity curve")
    items.append(
        "not compared: " + "; ".join(not_compared)
        if not_compared
        else "everything in the period was compared"
    )
    items.append(
        f"costs: measured from the {facts.name}'s fills in `{COSTS_FILE}` (for `trader backtest "
        f"--costs-from`); the rest modelled, see Costs"
        if costs
        else f"costs: none measured (the {facts.name} filled nothing): all modelled"
    )
    return items


def attribution_blocks(a: Attribution, name: str, images: Mapping[str, Image]) -> list[Block]:
    rows = [
        [part.label, amount(value), share(value, a.start_equity), MEANING[part]]
        for part, value in a.parts.items()
    ]
    rows.append(
        [
            f"difference ({name} less replay)",
            amount(a.difference),
            share(a.difference, a.start_equity),
            f"the {name}'s P&L {amount(a.actual_pnl)} less the replay's {amount(a.modelled_pnl)}",
        ]
    )
    blocks: list[Block] = [
        Paragraph(
            f"The {name}'s P&L less its replay's over the period, in {a.currency}, split into "
            f"parts that add up to the difference exactly (every part is shown, zeros too). "
            f"Percentages are of the {name}'s starting equity, {amount(a.start_equity)} "
            f"{a.currency}; a negative part cost the {name} against the model."
        ),
        Table(
            ["part", f"amount ({a.currency})", "% of start", "what it measures"],
            rows,
            [False, True, True, False],
        ),
        Paragraph(
            f"remainder: {a.remainder_reason}"
            if a.remainder_reason
            else "remainder: zero, every run's booked equity is what its fills and the marks "
            "make it"
        ),
    ]
    if "attribution" in images:
        blocks.append(images["attribution"])
    shares = sorted(a.orders, key=lambda s: -abs(sum(s.parts.values(), ZERO)))[:SHOWN]
    shares = [s for s in shares if s.parts]
    if shares:
        blocks += [
            Heading(3, "The orders that moved it most"),
            Table(
                ["decided at", "order", "symbol", "side", "type", "total", "parts"],
                [
                    [
                        when(s.decided_at),
                        f"`{s.key}`",
                        s.symbol,
                        s.side.value,
                        s.type.value,
                        amount(sum(s.parts.values(), ZERO)),
                        ", ".join(f"{p.label} {amount(v)}" for p, v in s.parts.items()),
                    ]
                    for s in shares
                ],
                [False, False, False, False, False, True, False],
            ),
        ]
    return blocks


def decision_blocks(c: Comparison) -> list[Block]:
    explained = [d for d in c.decision_differences if not d.unexplained]
    bug = c.first_unexplained
    blocks: list[Block] = [
        Paragraph(
            f"{c.decisions_compared:,} decisions made by both at the same tick for the same "
            f"symbol; {len(c.decision_differences):,} differ: {len(explained):,} where the "
            "quote, the position or the settings differed (a cost, not a fault), "
            f"{len(c.decision_differences) - len(explained):,} on the same forecast, position, "
            "quote and settings (a bug in the code)."
        )
    ]
    if bug is not None:
        blocks.append(Paragraph(f"The first decision not reproduced: {bug.describe()}."))
    if c.decision_differences:
        blocks.append(
            Table(
                [
                    "tick",
                    "symbol",
                    "daemon",
                    "replay",
                    "forecast",
                    "position",
                    "quote",
                    "settings",
                    "a bug",
                ],
                [
                    [
                        when(d.tick),
                        d.symbol,
                        _decided(d.actual),
                        _decided(d.modelled),
                        _same(d.same_forecast),
                        _same(d.same_position),
                        _same(d.same_quote),
                        _same(d.same_settings),
                        "yes" if d.unexplained else "no",
                    ]
                    for d in c.decision_differences[:SHOWN]
                ],
                [False] * 9,
            )
        )
    return blocks


def _decided(row: Any) -> str:
    return "no decision" if row is None else f"{row.direction} ({row.reason})"


def _same(flag: bool) -> str:
    return "same" if flag else "differs"


def order_blocks(facts: Shortfall, images: Mapping[str, Image]) -> list[Block]:
    c = facts.comparison
    counts = Counter(o.outcome for o in c.orders)
    blocks: list[Block] = [
        Paragraph(
            f"{len(c.orders):,} orders placed by either run, paired by client order id (the "
            "strategy, symbol, tick and leg: the same decision gives the same id in both); "
            f"{sum(o.terms_differ for o in c.orders):,} placed by both with other terms "
            "(amount, limit or expiry)."
        ),
        Table(
            ["outcome", "orders", "what it means"],
            [[str(o), str(counts.get(o, 0)), meaning] for o, meaning in OUTCOMES.items()],
            [False, True, False],
        ),
    ]
    worst = sorted(slips(c.orders, True), key=lambda s: -s.bps)[:SHOWN]
    if worst:
        blocks += [
            Heading(3, f"The {facts.name}'s worst slippages"),
            Paragraph(
                "Each fill's price beyond the touch of the quote its decision priced with (the "
                "ask for a buy, the bid for a sell), the move until the fill included: what "
                "`broker.slippage_bps` models. A negative figure is a better price."
            ),
            Table(
                [
                    "decided at",
                    "filled at",
                    "symbol",
                    "side",
                    "type",
                    "touch",
                    "price",
                    "amount",
                    "bps",
                    f"cost ({facts.actual.currency})",
                    "outcome",
                ],
                [
                    [
                        when(s.order.decided_at),
                        when(s.fill.at),
                        s.order.symbol,
                        s.order.side.value,
                        s.order.type.value,
                        amount(s.touch),
                        amount(s.fill.price),
                        amount(s.fill.amount),
                        f"{s.bps:+.2f}",
                        amount(s.cost),
                        str(s.order.outcome),
                    ]
                    for s in worst
                ],
                [False, False, False, False, False, True, True, True, True, True, False],
            ),
        ]
    if "slippage" in images:
        blocks.append(images["slippage"])
    return blocks


def report_blocks(
    facts: Shortfall,
    images: Mapping[str, Image],
    figures: Mapping[str, Figure] | None,
    costs: tuple[MeasuredCosts | None, MeasuredCosts | None] = (None, None),
    costs_problem: str | None = None,
) -> list[Block]:
    """The report's sections, in reading order."""
    a = facts.attribution
    blocks: list[Block] = [
        Heading(1, f"Shortfall: the {facts.name} daemon on {facts.venue} against {MODELLED}"),
        Paragraph(
            f"Ledger `{facts.ledger}`, replayed through the backtest's engine on the bars it "
            "stored, with the forecasts it made and the settings it recorded, then compared "
            "tick by tick and order by order."
        ),
        Heading(2, "Read this first"),
        Bullets(read_this_first(facts, bool(figures))),
        Heading(2, "Attribution"),
    ]
    if a is not None:
        blocks += attribution_blocks(a, facts.name, images)
    else:
        blocks.append(Paragraph(said(facts.refused() or "")))
    blocks += [Heading(2, "Equity")]
    if "equity" in images:
        blocks.append(images["equity"])
    blocks += [Paragraph(_equity(facts))]
    blocks += [Heading(2, "Decisions"), *decision_blocks(facts.comparison)]
    blocks += [Heading(2, "Orders and fills"), *order_blocks(facts, images)]
    blocks += [Heading(2, "Ticks, halts and restarts"), *tick_blocks(facts)]
    blocks += [
        Heading(2, "Costs: measured and modelled"),
        *cost_blocks(facts, figures, costs, costs_problem),
    ]
    blocks += [Heading(2, "The settings replayed"), *settings_blocks(facts)]
    blocks += [
        Heading(2, "What the command printed"),
        Code("\n".join(facts.lines)),
        Paragraph(
            f"Files: `{JSON_FILE}` (the comparison and the attribution, amounts as exact "
            f"decimals), `{COSTS_FILE}` (the measured costs), `replay.sqlite3` (the replay's "
            "ledger) and the plots."
        ),
    ]
    return blocks


def _equity(facts: Shortfall) -> str:
    said = []
    for name, record in ((facts.name, facts.actual), ("replay", facts.modelled)):
        if record is not None and record.equity:
            at, value = record.equity[-1]
            said.append(f"the {name}'s last booked equity {amount(value)} at {when(at)}")
    return ("; ".join(said) or "no equity booked") + (
        " (each at its own marks; the attribution values both at the same marks)."
    )
