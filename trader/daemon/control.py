"""What an operator can ask of a running daemon: pause, resume, flatten, reload. Each runs
between ticks (under the tick lock), changes the trading state only through its explicit
transitions, records the change in the ledger and tells telemetry.

- pause: HALTED ("paused by <who>"): no order at all until resumed. Persisted: a restart
  stays paused.
- resume: ACTIVE again, and the configured strategies back if a flatten had replaced them.
- flatten: every symbol's strategy becomes "flatten", which wants no position: the next ticks
  cancel resting orders and close positions at market, through the usual risk checks, real
  quotes and deterministic order ids. Once nothing is held or resting, trading is HALTED
  ("flattened by <who>") until resumed. A halted daemon is first made ACTIVE for this (the
  flatten strategy never opens anything).
- reload: re-read the settings; strategy and risk apply now, other changes need a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

from trader.clock import Clock
from trader.config.loader import ConfigError
from trader.config.record import recorded_settings, settings_digest, settings_text
from trader.config.schema import Settings
from trader.daemon.reload import SettingsSource, apply_reload, plan_reload
from trader.engine.pipeline import Engine
from trader.engine.report import TickReport
from trader.ledger.runs import record_reload
from trader.logging import get_logger
from trader.risk.state import TradingState, TradingStatus
from trader.strategy.base import Decision, DecisionContext, stand_aside
from trader.strategy.select import strategies_for
from trader.strategy.shorts import account_short_refusal


class FlattenStrategy:
    """Wants no position in any symbol: the planner cancels and closes."""

    name = "flatten"

    def __init__(self, by: str) -> None:
        self.by = by

    def decide(self, ctx: DecisionContext) -> Decision:
        return stand_aside(self.name, ctx, f"flatten requested by {self.by}", {})


class Controller:
    def __init__(
        self,
        engine: Engine,
        lock: asyncio.Lock,
        clock: Clock,
        reload_source: SettingsSource,
        on_reloaded: Callable[[list[str], list[str]], None] = lambda applied, restart: None,
    ) -> None:
        self.engine = engine
        self.lock = lock
        self.clock = clock
        self._reload_source = reload_source
        self._on_reloaded = on_reloaded
        self.flattening: str | None = None  # who asked, while a flatten is under way
        self._log = get_logger("trader.control")

    async def run(self, command: str, by: str) -> str:
        """Carry out `command`; a sentence saying what was done (or why nothing was)."""
        handlers = {
            "pause": self.pause,
            "resume": self.resume,
            "flatten": self.flatten,
            "reload": self.reload,
        }
        async with self.lock:
            result = await handlers[command](by)
        self._log.warning("operator command", command=command, by=by, result=result)
        return result

    async def pause(self, by: str) -> str:
        change = self.engine.risk.halt(f"paused by {by}", self.clock.now())
        await self._record(change)
        return "trading halted" if change else "trading was already halted"

    async def resume(self, by: str) -> str:
        if self.flattening is not None:
            self.flattening = None
            settings = self.engine.settings
            self.engine.strategies = strategies_for(
                settings.strategy,
                settings.market.symbols,
                both_sides=settings.exchange.rests_both_sides,
                short_refusal=account_short_refusal(settings),
            )
        change = self.engine.risk.resume(f"resumed by {by}", self.clock.now())
        await self._record(change)
        return "trading active" if change else "trading was already active"

    async def flatten(self, by: str) -> str:
        symbols = self.engine.settings.market.symbols
        self.engine.strategies = {symbol: FlattenStrategy(by) for symbol in symbols}
        self.flattening = by
        if self.engine.risk.state is TradingState.HALTED:
            change = self.engine.risk.resume(f"flattening for {by}", self.clock.now())
            await self._record(change)
        return "closing every position and order from the next tick"

    async def reload(self, by: str) -> str:
        try:
            loaded = self._reload_source()
            plan = plan_reload(self.engine.settings, loaded)
        except (ConfigError, ValueError) as error:
            problems = error.problems if isinstance(error, ConfigError) else [str(error)]
            self._log.error("reload refused: settings kept", by=by, problems=problems)
            return "refused: " + "; ".join(problems)[:300]
        if plan.applied:
            apply_reload(self.engine, plan.settings)
            await self._record_settings(plan.settings)
            if self.flattening is not None:  # a flatten outlasts a reload
                self.engine.strategies = {
                    s: FlattenStrategy(self.flattening) for s in self.engine.settings.market.symbols
                }
        if plan.needs_restart:
            self._log.warning("settings changed that need a restart", keys=plan.needs_restart)
        self._log.info("settings reloaded", by=by, applied=plan.applied)
        self._on_reloaded(plan.applied, plan.needs_restart)
        applied = ", ".join(plan.applied) or "nothing"
        restart = (
            f"; needs a restart: {', '.join(plan.needs_restart)}" if plan.needs_restart else ""
        )
        return f"applied: {applied}{restart}"

    async def _record_settings(self, settings: Settings) -> None:
        """The settings in force from now, in the ledger (`trader shortfall` replays with
        them); a write that fails is said, the reload stands."""
        text = settings_text(recorded_settings(settings))
        try:
            await record_reload(
                self.engine.ledger.database, settings_text=text, digest=settings_digest(text),
                at=self.clock.now(), wall=datetime.now(UTC),
            )  # fmt: skip
        except Exception as error:
            self._log.error("reloaded settings not recorded", error=repr(error))

    async def after_tick(self, report: TickReport) -> None:
        """Called under the tick lock after each tick: a flatten that has finished halts."""
        if self.flattening is None or report.portfolio is None:
            return
        if report.portfolio.positions or self.engine.broker.open_orders():
            return
        change = self.engine.risk.halt(f"flattened by {self.flattening}", report.at)
        await self._record(change)

    async def _record(self, change: TradingStatus | None) -> None:
        if change is None:
            return
        try:
            await self.engine.ledger.record_status(change, self.engine.risk.day)
        except Exception:
            # The state holds in memory; the ledger may be full or gone, which the next tick
            # will meet and halt on anyway.
            self._log.exception("the trading state could not be recorded")
        self._log.warning("trading state", state=str(change.state), reason=change.reason)
        self.engine.hooks.on_state(change)
