"""The settings of trading itself: the strategy, the risk limits and the broker."""

from __future__ import annotations

import tempfile
from datetime import time
from decimal import Decimal
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator

from trader.config.section import Fraction, Money, Section
from trader.domain.capital_ramp import parse_ramp, ramp_text

StrategyName = Literal["simple", "ci_guard", "maxdiff"]


class StrategySettings(Section):
    name: StrategyName = Field("ci_guard", description="simple, ci_guard or maxdiff")
    per_symbol: dict[str, StrategyName] = Field(
        {}, description='strategy for particular symbols, e.g. {"SOL/USDT" = "maxdiff"}'
    )
    allow_short: bool = Field(False, description="short where the venue allows it")
    consensus: bool = Field(
        False, description="trade only when the primary and the consensus model agree"
    )
    consensus_model: Literal["toto", "toto2", "kronos", "baseline"] = Field(
        "kronos", description="the second model the consensus gate asks"
    )
    position_fraction: Fraction = Field(
        0.2, description="a position's size as a share of equity (then capped by risk)"
    )
    ci_lower_quantile: float = Field(0.4, gt=0, lt=0.5, description="ci_guard band: lower level")
    ci_upper_quantile: float = Field(0.6, gt=0.5, lt=1, description="ci_guard band: upper level")
    ci_multiplier: float = Field(1.0, gt=0, description="ci_guard band width multiplier")
    maxdiff_entry_quantile: float = Field(
        0.2, gt=0, lt=0.5, description="maxdiff buys at this quantile of the forecast low"
    )
    maxdiff_exit_quantile: float = Field(
        0.8, gt=0.5, lt=1, description="maxdiff sells at this quantile of the forecast high"
    )


class RiskSettings(Section):
    max_order_notional: Money = Field(Decimal(1000), description="largest single order, in cash")
    max_position_notional: Money = Field(Decimal(2500), description="largest position per symbol")
    max_total_exposure: Money = Field(Decimal(5000), description="largest sum of |positions|")
    max_orders_per_minute: int = Field(10, ge=1, description="order rate limit")
    max_daily_loss: Fraction = Field(
        0.05,
        description="halt after losing this share of the day's reference equity: the last "
        "equity before the day began (risk.day_zone; the previous session's close for a "
        "stock), so the day's first bar counts, on daily bars as on 1h; the daemon's halt "
        "waits for a person, a backtest's ends as backtest.on_halt says",
    )
    max_drawdown: Fraction = Field(
        0.10,
        description="only reducing orders after this drawdown from the running peak of equity "
        "(all time, not the day's: a slow slide over weeks counts); the daemon's waits for a "
        "person, whose resume measures both limits from the equity then; a backtest's ends as "
        "backtest.on_halt says (at the next day: measured from that day's start)",
    )
    min_edge_bps: float = Field(5.0, ge=0, description="expected edge required after fees+spread")
    max_leverage: float = Field(
        1.0,
        ge=1,
        le=125,
        description="perp: the most the positions' notional at the mark may be per unit of "
        "margin balance; the leverage set on each symbol at start-up (checked back) is this, "
        "rounded up to a whole number",
    )
    liquidation_buffer: float = Field(
        0.05,
        ge=0,
        lt=1,
        description="perp: reduce a position (reduce-only) before the mark comes within this "
        "share of the mark of its liquidation price; 0 turns the rule off",
    )
    day_zone: str = Field(
        "UTC",
        description="where the risk day is counted (IANA zone): UTC suits crypto and every "
        "exchange whose sessions end before UTC midnight (New York, Shanghai); a market whose "
        "session crosses it needs its own (Australia/Sydney for the ASX)",
    )
    day_rolls_at: time = Field(
        time(0, 0),
        description="the time of day in day_zone when a risk day ends: 00:00, or 17:00 with "
        "America/New_York for FX's conventional day",
    )

    @field_validator("day_zone")
    @classmethod
    def _known_zone(cls, zone: str) -> str:
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {zone!r}: give an IANA name") from None
        return zone


class BrokerSettings(Section):
    mode: Literal["paper", "live"] = Field("paper", description="paper or live")
    live_confirmation: bool = Field(
        False, description="must be true, with mode = live and API keys, to trade real money"
    )
    currency: str = Field("USDT", description="cash currency; every symbol is quoted in it")
    starting_cash: Money = Field(Decimal(10000), description="paper account's starting cash")
    maker_fee_bps: Decimal = Field(Decimal(10), ge=0, description="paper maker fee")
    taker_fee_bps: Decimal = Field(Decimal(10), ge=0, description="paper taker fee")
    slippage_bps: Decimal = Field(Decimal(2), ge=0, description="paper market-order slippage")
    max_volume_share: Fraction = Field(
        0.1, description="paper: a fill takes at most this share of a bar's volume (or quote size)"
    )
    on_shutdown: Literal["keep", "cancel"] = Field(
        "keep", description="what to do with open orders on a clean stop"
    )
    margin_mode: Literal["isolated", "cross"] = Field(
        "isolated",
        description="perp: each position's margin its own (isolated), or the whole wallet's "
        "(cross); set on each symbol at start-up and checked back; one-way position mode only "
        "(hedge mode is refused)",
    )
    liquidation_fee_bps: Decimal = Field(
        Decimal(50),
        ge=0,
        description="perp, paper and backtests: the liquidation fee, in bps of the notional "
        "closed, taken only out of the margin the close leaves (venues charge 50 to 125)",
    )
    capital_share: Fraction = Field(
        1.0,
        description="live: the share of the account's cash balance this daemon's ledger "
        "holds, fixed when the ledger's account is opened (0.5: two daemons share an "
        "account); live_capital_fraction and its ramp size within it",
    )
    live_capital_fraction: Fraction = Field(
        1.0,
        description="live: size positions from at most this share of the ledger's equity "
        "(`trader promote --fraction` writes it; 0.1: start live with 10% of the capital), "
        "raised by live_ramp",
    )
    live_ramp: str = Field(
        "",
        description='live: raise that share in steps, e.g. "0.1:7d,0.25:14d,1.0" (10% for 7 '
        "days, 25% for the next 14, then all), counted from promotion.at; its first step is "
        "live_capital_fraction",
    )
    capital_limit: Money | None = Field(
        None, description="live: and with at most this much cash, whatever the balance"
    )
    unknown_orders: Literal["leave", "cancel"] = Field(
        "leave",
        description="live: orders on the venue the ledger does not know, found when "
        "reconciling: reported and left alone, or reported and cancelled",
    )
    recv_window_ms: int = Field(
        5000,
        ge=100,
        le=60000,
        description="live: how long a signed request stays valid at the venue; an order whose "
        "answer was lost and that cannot be found after this long never arrived",
    )
    lock_dir: Path = Field(
        Path(tempfile.gettempdir()) / "trader-locks",
        description="live: host-wide folder of symbol locks, so two daemons on one host never "
        "trade the same symbol of the same account (every daemon must see the same folder: "
        "under systemd or in a container use /run/trader/locks, not the private /tmp)",
    )

    @field_validator("live_ramp")
    @classmethod
    def _ramp(cls, text: str) -> str:
        return ramp_text(parse_ramp(text))  # DomainError (a ValueError) names a wrong step
