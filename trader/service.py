"""The daemon's lifecycle: start, report ready, run until SIGTERM/SIGINT, stop cleanly.

This is the frame the later stages plug into (ledger recovery, broker reconciliation, market
data, model warm-up, the tick scheduler); today it starts, states what it was asked to run,
and stops cleanly.
"""

from __future__ import annotations

import asyncio
import os
import signal

from trader import __version__
from trader.config import LoadedSettings
from trader.logging import get_logger

# sysexits.h: the configuration forbids starting.
EX_CONFIG = 78


def live_refusal(loaded: LoadedSettings) -> str | None:
    """Why live mode must not start, or None. Live trading needs three explicit opt-ins."""
    settings = loaded.settings
    if settings.broker.mode != "live":
        return None
    if not settings.broker.live_confirmation:
        return "broker.mode = live needs broker.live_confirmation = true as well"
    if settings.exchange.api_key is None or settings.exchange.api_secret is None:
        return "broker.mode = live needs exchange.api_key and exchange.api_secret"
    return "the live broker is not available in this version; use broker.mode = paper"


class Service:
    def __init__(self, loaded: LoadedSettings) -> None:
        self._loaded = loaded
        self._log = get_logger("trader.service", instance=loaded.settings.instance)

    async def run(self) -> int:
        refusal = live_refusal(self._loaded)
        if refusal is not None:
            self._log.error("refusing to start", reason=refusal)
            return EX_CONFIG
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        received: list[str] = []

        def on_stop_signal(signum: signal.Signals) -> None:
            received.append(signum.name)
            stop.set()

        def on_reload_signal() -> None:
            self._log.warning("SIGHUP received; reloading settings is not available yet, ignored")

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, on_stop_signal, signum)
        loop.add_signal_handler(signal.SIGHUP, on_reload_signal)
        try:
            self._log_start()
            self._log.info("ready", note="skeleton: no ticks are scheduled yet")
            await stop.wait()
            self._log.info("stopping", signal=received[0])
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(signum)
        self._log.info("stopped", exit_code=0)
        return 0

    def _log_start(self) -> None:
        settings = self._loaded.settings
        model = settings.forecast.model
        runtime = getattr(settings.forecast, model).runtime if model != "baseline" else "eager"
        self._log.info(
            "starting",
            version=__version__,
            pid=os.getpid(),
            broker_mode=settings.broker.mode,
            exchange=settings.exchange.id,
            symbols=settings.market.symbols,
            timeframe=settings.market.timeframe,
            model=model,
            model_mode=runtime,
            device_requested=settings.forecast.device,
            quote_source="real" if settings.market.add_latest else "synthetic",
            config_file=str(self._loaded.config_file) if self._loaded.config_file else None,
        )
