"""What the daemon says about itself: the start line, systemd's status text and the retained
MQTT status event."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from structlog.typing import FilteringBoundLogger as Logger

from trader import __version__
from trader.config.schema import Settings
from trader.service.parts import Parts
from trader.telemetry import events


def runtime(settings: Settings, model: str) -> str:
    """The execution mode the settings ask of `model` (the baseline has no other than eager)."""
    return "eager" if model == "baseline" else str(getattr(settings.forecast, model).runtime)


def model_fields(parts: Parts) -> dict[str, str | None]:
    slots, device = parts.slots, parts.device
    fields: dict[str, str | None] = {
        "model": parts.settings.forecast.model,
        "model_mode": slots[0].mode if slots and slots[0].model else None,
    }
    if device is not None:
        fields |= {"device": device.where, "device_fallback": device.fallback}
    return fields


def status_text(parts: Parts) -> str:
    settings, engine = parts.settings, parts.engine
    fields = model_fields(parts)
    state = f"{engine.risk.state} ({engine.risk.status.reason})" if engine else "?"
    return (
        f"{parts.phase}: {len(settings.market.symbols)} symbols "
        f"{settings.market.timeframe}, {fields['model']} {fields.get('model_mode')} on "
        f"{fields.get('device')}, {settings.broker.mode}, trading {state}"
    )


def status_event(parts: Parts, state: str, **extra: Any) -> events.Event:
    settings, engine, venue = parts.settings, parts.engine, parts.venue
    fields: dict[str, Any] = {
        "version": __version__,
        "pid": os.getpid(),
        "venue": venue.kind if venue else ("replay" if parts.replay else "live"),
        "exchange": settings.exchange.name,
        "broker_mode": settings.broker.mode,
        "symbols": list(settings.market.symbols),
        "timeframe": settings.market.timeframe,
        "quote_source": quote_source(parts),
        "trading_state": str(engine.risk.state) if engine else None,
        "trading_reason": engine.risk.status.reason if engine else None,
    }
    fields |= model_fields(parts)
    at = venue.clock.now() if venue else datetime.now(UTC)
    return events.status(settings.instance, at, state, **(fields | extra))


def publish_status(parts: Parts, state: str) -> None:
    """The retained status, where MQTT is on."""
    if parts.link is not None:
        parts.link.set_status(status_event(parts, state))


def log_start(parts: Parts, log: Logger) -> None:
    settings, config_file = parts.settings, parts.loaded.config_file
    model = settings.forecast.model
    log.info(
        "starting",
        version=__version__,
        pid=os.getpid(),
        venue="replay" if parts.replay else "live",
        broker_mode=settings.broker.mode,
        exchange=settings.exchange.name,
        clock=_clock(settings),
        symbols=settings.market.symbols,
        timeframe=settings.market.timeframe,
        model=model,
        model_mode=runtime(settings, model),
        device_requested=settings.forecast.device,
        quote_source=quote_source(parts),
        config_file=str(config_file) if config_file else None,
    )


def _clock(settings: Settings) -> str:
    """Whose time the daemon keeps: the wall clock's, or a sandbox's accelerated one."""
    clock = settings.exchange.clock
    if not clock.scaled:
        return "wall"
    return f"accelerated x{clock.speed:g} from {clock.origin or clock.wall_origin} (a sandbox's)"


def quote_source(parts: Parts) -> str:
    """Where quotes come from, truthfully: a replay's are modelled from its bars, never real."""
    if not parts.settings.market.add_latest:
        return "synthetic"
    return "modelled" if parts.replay is not None else "real"
