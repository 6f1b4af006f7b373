"""The live skill's part in the daemon: started from the ledger once the engine is (the
rolling windows and the forecasts still waiting), then after each tick: score what closed,
update the metrics, publish `forecast_score` events. A failure here is logged and costs only
the skill figures of that tick, never the tick."""

from __future__ import annotations

from datetime import datetime

from structlog.typing import FilteringBoundLogger as Logger

from trader.daemon.skill import LiveSkill
from trader.engine.report import TickReport
from trader.ledger.database import Database
from trader.ledger.scores import ScoreStore
from trader.ledger.write_failure import write_failure
from trader.runner import model_names
from trader.service.parts import Parts
from trader.skill.live import NAIVE
from trader.telemetry import events


async def start_skill(parts: Parts, database: Database, now: datetime, log: Logger) -> None:
    settings, engine, metrics = parts.settings, parts.engine, parts.skill_metrics
    assert engine is not None
    assert metrics is not None
    live = LiveSkill(
        ScoreStore(database),
        engine.market,
        model_names(settings),
        window=settings.forecast.skill_window,
        jump_limit=settings.forecast.stability_jump_sigmas,
        naive_window=settings.forecast.naive_window,
    )
    update = await live.start(now)
    metrics.resume((await live.store.counts()).items())
    metrics.observe(update, live.rolling)
    parts.skill = live
    log.info("live skill", waiting=live.pending, window=settings.forecast.skill_window)


async def observe_skill(parts: Parts, report: TickReport, log: Logger) -> None:
    live, metrics = parts.skill, parts.skill_metrics
    if live is None or metrics is None:
        return
    try:
        update = await live.after_tick(report)
        metrics.observe(update, live.rolling)
        if parts.link is not None:
            for score in update.scores:
                parts.link.publish(events.forecast_score(
                    parts.settings.instance, report.at, score,
                    live.rolling.figures(score.model, score.symbol),
                    live.rolling.figures(NAIVE, score.symbol),
                ))  # fmt: skip
    except Exception as error:
        if (reason := write_failure(error)) is not None:  # the tick's own line said it: halted
            log.warning("live skill not recorded", reason=reason, at=report.at.isoformat())
        else:
            log.exception("live skill failed for a tick", at=report.at.isoformat())
