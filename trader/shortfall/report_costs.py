"""The report's costs section: what each run's fills paid (`measure_costs`), in the terms the
backtest's cost settings take, which of them `--costs-from` takes as measured, and which stay
modelled."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trader.backtest.document import (
    Block,
    Bullets,
    Paragraph,
    Table,
)
from trader.backtest.measured_costs import (
    FILE_NAME as COSTS_FILE,
)
from trader.backtest.measured_costs import (
    MAKER,
    MEASURABLE,
    NEVER_MEASURED,
    SLIPPAGE,
    SPREAD,
    TAKER,
    Figure,
)
from trader.domain import Liquidity, OrderType
from trader.domain.errors import DomainError
from trader.domain.money import ZERO
from trader.domain.shortfall_costs import MeasuredCosts, measure_costs
from trader.domain.shortfall_records import OrderRecord, Run
from trader.shortfall.compare import OrderComparison
from trader.shortfall.report_facts import Shortfall

# --- what the fills measure -------------------------------------------------------------------


def measured(
    orders: Iterable[OrderComparison],
) -> tuple[MeasuredCosts | None, MeasuredCosts | None, str | None]:
    """Each run's costs (`measure_costs`), from its orders with the quote its decision priced
    with (the daemon's own; where it recorded none, the replay's, as the attribution does);
    an order with no quote at all is left out and counted. (None, None, why) where the
    orders cannot be measured."""
    actual: list[OrderRecord] = []
    model: list[OrderRecord] = []
    unquoted = 0
    try:
        for c in orders:
            for order, quote, fills, into in (
                (c.actual_order, c.quote or c.modelled_quote, c.actual.fills, actual),
                (c.modelled_order, c.modelled_quote or c.quote, c.modelled.fills, model),
            ):
                if order is None:
                    continue
                if quote is None:
                    unquoted += 1
                    continue
                into.append(OrderRecord(order, quote, fills))
    except DomainError as error:
        return None, None, f"the fills cannot be measured: {error}"
    note = None
    if unquoted:
        note = f"{unquoted} orders left out (no quote recorded for their decision)"
    return (
        measure_costs(Run(ZERO, ZERO, tuple(actual))),
        measure_costs(Run(ZERO, ZERO, tuple(model))),
        note,
    )


def setting_figures(costs: MeasuredCosts) -> dict[str, Figure]:
    """The figures a costs file gives each setting (`trader.backtest.measured_costs`: the
    mean of market-order fills' slippage, of real-quoted fills' spread, fees by liquidity),
    for the replay's own fills, which are not written to a costs file's `actual`."""
    slippage = [g.slippage_bps for g in costs.groups if g.type is OrderType.MARKET]
    spread = [g.spread_bps for g in costs.groups]
    out = {}
    for key, found in ((SLIPPAGE, slippage), (SPREAD, spread)):
        counted = [(d.mean, d.count) for d in found if d is not None]
        fills = sum(n for _, n in counted)
        if fills:
            out[key] = Figure(math.fsum(m * n for m, n in counted) / fills, fills)
    for key, liquidity in ((TAKER, Liquidity.TAKER), (MAKER, Liquidity.MAKER)):
        if liquidity in costs.fee_bps:  # as the file: fees are not counted in fills
            out[key] = Figure(costs.fee_bps[liquidity], 0)
    return out


def cost_blocks(
    facts: Shortfall,
    figures: Mapping[str, Figure] | None,
    costs: tuple[MeasuredCosts | None, MeasuredCosts | None],
    problem: str | None,
) -> list[Block]:
    actual, model = costs
    replayed = _replayed_settings(facts)
    model_figures = setting_figures(model) if model is not None else {}
    rows = []
    for key in MEASURABLE:
        found = (figures or {}).get(key)
        mine = model_figures.get(key)
        rows.append(
            [
                f"`{key}`",
                replayed.get(key, "-"),
                "measured" if found is not None else "modelled",
                "-" if found is None else f"{found.bps:.2f}",
                "-" if found is None or not found.fills else f"{found.fills:,}",
                "-" if mine is None else f"{mine.bps:.2f}",
            ]
        )
    for key, what in NEVER_MEASURED.items():
        rows.append(
            [f"`{key}`", replayed.get(key, "-"), "modelled", f"not measured: {what}", "-", "-"]
        )
    blocks: list[Block] = [
        Paragraph(
            f"Measured from the {facts.name}'s fills against the quote each decision priced "
            f"with, in the terms the backtest's cost settings take; written to `{COSTS_FILE}`, "
            "which `trader backtest --costs-from` reads: the settings marked measured take the "
            "figure, the others stay modelled. The replay's column is what its own fills paid "
            "under the settings it ran with (its modelled costs, measured the same way)."
            if figures
            else f"Nothing measured: the {facts.name} filled nothing with a quote to measure "
            f"against, so every cost stays modelled and no `{COSTS_FILE}` is written."
        ),
        Table(
            [
                "setting",
                "replayed with",
                "--costs-from",
                f"{facts.name} (bps)",
                "fills",
                "replay (bps)",
            ],
            rows,
            [False, True, False, True, True, True],
        ),
    ]
    if problem:
        blocks.append(Paragraph(problem))
    if actual is not None and model is not None:
        blocks.append(_groups_table(((facts.name, actual), ("replay", model))))
        ratios = [
            f"{name} {c.limit_fill_ratio:.1%} of the amount ordered "
            f"({c.limit_orders_filled} of {c.limit_orders} limit orders filled at all)"
            for name, c in ((facts.name, actual), ("replay", model))
            if c.limit_fill_ratio is not None
        ]
        fees = [
            f"{name} {', '.join(f'{k} {v:.2f} bps' for k, v in c.fee_bps.items()) or 'none'}"
            for name, c in ((facts.name, actual), ("replay", model))
        ]
        blocks.append(
            Bullets(
                [
                    "limit fill ratio: "
                    + ("; ".join(ratios) if ratios else "no limit orders")
                    + " (measured; no backtest setting takes it: bars trading through the "
                    "limit are modelled)",
                    "fees over notional, by liquidity: " + "; ".join(fees),
                ]
            )
        )
    return blocks


def _groups_table(runs: Sequence[tuple[str, MeasuredCosts]]) -> Table:
    def mean(dist: Any) -> str:
        return "-" if dist is None else f"{dist.mean:+.2f} (p50 {dist.percentiles[50]:+.2f})"

    rows = [
        [
            name,
            f"{g.side.value} {g.type.value}",
            str(g.fills),
            mean(g.spread_bps),
            mean(g.slippage_bps),
            mean(g.delay_bps),
            str(g.unknown_spread),
        ]
        for name, costs in runs
        for g in costs.groups
    ]
    return Table(
        ["run", "orders", "fills", "spread bps", "slippage bps", "delay bps", "spread unknown"],
        rows,
        [False, False, True, True, True, True, True],
    )


def _replayed_settings(facts: Shortfall) -> dict[str, str]:
    """Each cost setting as the replay ran it (every value, where the stretches differ)."""
    if facts.result is None:
        return {}
    out: dict[str, str] = {}
    for key in [*MEASURABLE, *NEVER_MEASURED]:
        section, name = key.split(".")
        values = list(
            dict.fromkeys(
                str(getattr(getattr(s.settings, section), name)) for s in facts.result.stretches
            )
        )
        if values:
            out[key] = " / ".join(values)
    spread = list(dict.fromkeys(s.settings.market.replay_spread for s in facts.result.stretches))
    if SPREAD in out and spread:
        out[SPREAD] += f" ({' / '.join(spread)})"
    return out
