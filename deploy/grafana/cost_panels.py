"""The dashboard's costs panels: what fills paid against what the configured cost model (the
backtest's) charges the same fills, each fill in bps against the quote its order was decided on
(trader/telemetry/fill_cost_metrics.py; issue 43). Over the last day, as TraderCostsAboveModel
judges it: a window of fills, the same for a stock's session and 24/7 crypto."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as dm
from panel_kit import AMBER, RED, SYMBOLS, match, query, sel, stat, timeseries

COST = "trader_fill_cost_bps_total"
FACTOR = 2  # TraderCostsAboveModel's: realised over modelled


def _day(metric: str, by: str, *matchers: str) -> str:
    return f"sum by ({by}) (increase({sel(metric, SYMBOLS, *matchers)}[1d]))"


def cost_panels() -> list[Builder[dm.Panel] | db.Row]:
    realised = (
        f"({_day(COST, 'symbol', match('kind', 'realised'), match('part', 'improvement', '!='))}"
        f" - {_day(COST, 'symbol', match('kind', 'realised'), match('part', 'improvement'))})"
    )
    ratio = f"{realised} / {_day(COST, 'symbol', match('kind', 'modelled'))}"
    per_fill = (
        f"{_day(COST, 'kind, part')} / scalar(sum(increase("
        f"{sel('trader_fill_cost_fills_total', SYMBOLS)}[1d])))"
    )
    return [
        timeseries(
            "Costs against the model",
            "Per fill over the last day, in bps against the quote its order was decided on: "
            "what fills paid (realised) beside what the configured costs charge them "
            "(modelled: half of market.replay_spread_bps, broker.slippage_bps, the fees). "
            "Spread and slippage are taker fills'; improvement (better than the touch, fee "
            "rebates) comes off the realised cost.",
            query(per_fill, "{{kind}} {{part}}"),
        ),
        timeseries(
            "Realised over modelled cost",
            f"The last day's realised costs over the modelled ones, per symbol: above {FACTOR} "
            "(with at least 3 fills, for an hour) raises TraderCostsAboveModel. 1: the venue "
            "costs what the backtest assumes (a paper daemon's own model).",
            query(ratio, "{{symbol}}"),
            thresholds=[(1.5, AMBER), (FACTOR, RED)],
        ).span(8),
        stat(
            "Fills not priced",
            "Fills in the last day whose order's decision quote the daemon does not know (placed "
            "before a restart, or on a synthetic quote): in no cost above.",
            f"sum(increase({sel('trader_fill_cost_unpriced_total', SYMBOLS)}[1d]))",
            thresholds=[(1, AMBER)],
        )
        .span(4)
        .height(8),
    ]
