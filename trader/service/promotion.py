"""What a live start says of its promotion, once, before anything else: a live start without a
promotion record (`trader promote`) is allowed but warned of, as is one whose record is
missing or changed since; a promoted one says the share of capital it sizes from today.
Nothing here refuses a start or relaxes the live opt-ins (`config.strict.config_refusal`)."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

from structlog.typing import FilteringBoundLogger

from trader.config.schema import Settings
from trader.engine.planning import live_capital

FIX = "run `trader promote --paper LEDGER` on a paper record and start with the settings it writes"


def promotion_problem(settings: Settings) -> str | None:
    """Why this live start has no promotion it can show (None: it has one)."""
    promotion = settings.promotion
    if promotion.at is None:
        return "no promotion record: promotion.at is not set"
    if promotion.record is None:
        return None  # promoted, its record kept elsewhere: the settings say when
    path = Path(promotion.record)
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as error:
        return f"the promotion record {path} cannot be read: {error.strerror or error}"
    if promotion.record_sha256 is not None and digest != promotion.record_sha256:
        return f"the promotion record {path} changed since it was written (sha256 {digest[:12]})"
    return None


def say_promotion(settings: Settings, now: datetime, log: FilteringBoundLogger) -> None:
    """A live start's first lines: the warning, or the capital share in force."""
    if settings.broker.mode != "live":
        return
    problem = promotion_problem(settings)
    if problem is not None:
        log.warning("live start without a promotion", reason=problem, fix=FIX)
    capital = live_capital(settings)
    if capital is not None:
        log.info(
            "live capital share",
            share=str(capital.share(now)),
            step=capital.step_at(now),
            ramp=settings.broker.live_ramp or None,
            promoted_at=settings.promotion.at.isoformat() if settings.promotion.at else None,
        )
