"""The bar a paper record must clear before `trader promote` writes live settings
(`[promote]`), and the promotion those settings carry (`[promotion]`), which a live start
looks for and which anchors `broker.live_ramp`."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import Field, field_validator

from trader.config.section import Fraction, Section


class PromoteSettings(Section):
    min_days: int = Field(
        14, ge=1, description="24/7 markets: the paper record must hold ticks on this many "
        "calendar days (UTC)"
    )  # fmt: skip
    min_sessions: int = Field(
        10, ge=1, description="markets with sessions: ticks in this many trading sessions"
    )
    max_skipped_share: Fraction = Field(
        0.05,
        description="at most this share of the ticks the calendar expects over the record may "
        "be missed, failed or run halted",
    )
    max_shortfall_equity_share: Fraction = Field(
        0.01,
        description="paper may make less than its backtest replay by at most this share of "
        "the starting equity ...",
    )
    max_shortfall_pnl_share: Fraction = Field(
        0.5,
        description="... or by at most this share of the replay's profit, whichever allows more",
    )
    min_skill: float = Field(
        0.0,
        ge=-1,
        lt=1,
        description="the primary model's skill against the naive forecast (1 - CRPS / CRPS of "
        "the naive) must be above this at the low end of its interval",
    )
    skill_confidence: float = Field(
        0.9, gt=0.5, lt=1, description="the skill interval's confidence (block bootstrap)"
    )
    min_scored_forecasts: int = Field(
        30, ge=2, description="fewer scored forecasts than this cannot show skill"
    )
    max_drawdown_ratio: float = Field(
        1.5,
        ge=1,
        description="paper's deepest drawdown may be at most this many times the backtest "
        "replay's ...",
    )
    drawdown_allowance: Fraction = Field(
        0.005,
        description="... or the replay's plus this share, whichever is larger (a replay "
        "that barely drew down does not make any paper drawdown a failure)",
    )


class PromotionSettings(Section):
    at: datetime | None = Field(
        None,
        description="when `trader promote` passed the paper record (written by it): "
        "broker.live_ramp counts its days from here; a live start without it warns",
    )
    paper_ledger: Path | None = Field(None, description="the paper ledger it judged")
    paper_ledger_sha256: str | None = Field(None, description="that ledger's digest then")
    record: Path | None = Field(
        None,
        description="the promotion record (verdict, measures, thresholds), written beside the "
        "live settings",
    )
    record_sha256: str | None = Field(None, description="the record's digest, checked at start")

    @field_validator("at")
    @classmethod
    def _aware(cls, at: datetime | None) -> datetime | None:
        if at is not None and at.utcoffset() is None:
            raise ValueError("give the time with its zone, e.g. 2026-01-05T14:30:00Z")
        return at
