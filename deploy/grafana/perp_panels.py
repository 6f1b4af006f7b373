"""The dashboard's perpetual-futures panels (issue 44): each position's side, size, leverage and
margin, its liquidation price and the distance from the mark to it against
risk.liquidation_buffer (as TraderPerpNearLiquidation and TraderPerpInsideLiquidationBuffer
judge it), unrealised P&L on the mark, the funding paid and received, the age of the mark each
tick valued on, and the buffer rule's reductions (trader/telemetry/perp_metrics.py). A spot
daemon's symbols stay flat here."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as dm
from panel_kit import (
    AMBER,
    GREEN,
    RED,
    SYMBOLS,
    per_hour,
    query,
    sel,
    stat,
    timeseries,
    value_map,
)

DISTANCE = "trader_perp_liquidation_distance_ratio"
BUFFER = "trader_perp_liquidation_buffer_ratio"
SIDE_MAP = value_map(("1", "LONG", GREEN), ("-1", "SHORT", AMBER), ("0", "FLAT", "text"))


def _by_symbol(metric: str) -> str:
    return f"max by (symbol) ({sel(metric, SYMBOLS)})"


def _funding_day(metric: str) -> str:
    return f"sum by (symbol) (increase({sel(metric, SYMBOLS)}[1d]))"


def perp_panels() -> list[Builder[dm.Panel] | db.Row]:
    return [
        db.Row("Perpetual positions"),
        stat(
            "Side",
            "Each perpetual position's side now: LONG, SHORT or FLAT.",
            _by_symbol("trader_perp_position_side"),
            legend="{{symbol}}",
        )
        .mappings(SIDE_MAP)
        .span(6)
        .height(8),
        timeseries(
            "Position size",
            "Signed size in the base asset: long above zero, short below.",
            query(_by_symbol("trader_perp_position_size"), "{{symbol}}"),
        ).span(6),
        timeseries(
            "Leverage",
            "The leverage set on each symbol; the account's positions' notional at the marks "
            "over its margin balance, against risk.max_leverage (an order past it is refused).",
            query(_by_symbol("trader_perp_leverage"), "{{symbol}}"),
            query(f"max({sel('trader_perp_account_leverage_ratio')})", "account"),
            query(f"max({sel('trader_perp_max_leverage')})", "max_leverage"),
        ).span(6),
        timeseries(
            "Margin",
            "What backs each position, in the cash currency: an isolated position's wallet, a "
            "cross position's initial margin at the mark.",
            query(_by_symbol("trader_perp_margin"), "{{symbol}}"),
        ).span(6),
        timeseries(
            "Liquidation price",
            "The mark price at which each position is liquidated (Binance's formula with the "
            "symbol's brackets); no line: none (flat, or covered down to a zero price).",
            query(_by_symbol("trader_perp_liquidation_price"), "{{symbol}}"),
        ).span(8),
        timeseries(
            "Distance to liquidation",
            "From the mark to the liquidation price, as a share of the mark, against "
            "risk.liquidation_buffer: inside twice the buffer warns, inside the buffer the "
            "risk rule reduces the position (reduce-only) and the alert is critical.",
            query(_by_symbol(DISTANCE), "{{symbol}}"),
            query(f"max({sel(BUFFER)})", "buffer"),
            query(f"2 * max({sel(BUFFER)})", "twice the buffer"),
        )
        .unit("percentunit")
        .span(8),
        timeseries(
            "Unrealised P&L on the mark",
            "Each position's unrealised P&L at the mark price (never the last trade).",
            query(_by_symbol("trader_perp_unrealized_pnl"), "{{symbol}}"),
        ).span(8),
        timeseries(
            "Funding over the last day",
            "Funding paid (positive) and received (negative) over the last day, by symbol, in "
            "the cash currency; net paid above 1% of equity raises TraderPerpFundingHigh.",
            query(
                f"{_funding_day('trader_perp_funding_paid_total')} - "
                f"{_funding_day('trader_perp_funding_received_total')}",
                "{{symbol}}",
            ),
        ),
        timeseries(
            "Mark age",
            "How old the mark price each tick valued a position on was: 0 when the venue's "
            "mark was read at the tick; above 0 when it could not be read and an earlier one "
            "stood in (the tick is degraded: TraderTicksDegraded, three in a row TraderNoOkTick), "
            "so the liquidation distance and the buffer rule judged an old mark.",
            query(_by_symbol("trader_perp_mark_age_seconds"), "{{symbol}}"),
            thresholds=[(1, RED)],
        ).unit("s"),
        timeseries(
            "Liquidation buffer reductions",
            "Reduce-only orders the liquidation buffer rule sent per hour, by symbol.",
            query(
                per_hour("trader_perp_buffer_reductions_total", SYMBOLS, by="symbol"),
                "{{symbol}}",
            ),
            bars=True,
            thresholds=[(1, RED)],
        ),
    ]
