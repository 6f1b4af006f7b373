"""Reloading settings while running (SIGHUP, or the `reload` command): the strategy and risk
sections take effect from the next tick; a change anywhere else needs a restart, and says so.
Values are never logged (some are secrets): only the keys that changed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trader.config.fields import leaves
from trader.config.schema import Settings
from trader.engine.pipeline import Engine
from trader.engine.planning import Planner
from trader.strategy.select import strategies_for
from trader.strategy.shorts import account_short_refusal

RELOADABLE = ("strategy", "risk")


@dataclass(frozen=True)
class ReloadPlan:
    settings: Settings  # the running settings with the new strategy and risk sections
    applied: list[str]  # keys that changed and take effect now
    needs_restart: list[str]  # keys that changed but only a restart applies


def plan_reload(running: Settings, loaded: Settings) -> ReloadPlan:
    """What reloading `loaded` over `running` changes. Raises ValueError when the new sections
    do not fit the running ones (a quantile the strategy needs that the model does not give)."""
    applied: list[str] = []
    restart: list[str] = []
    for leaf in leaves().values():
        if leaf.read(running) != leaf.read(loaded):
            (applied if leaf.path[0] in RELOADABLE else restart).append(leaf.key)
    sections = {name: getattr(running, name) for name in Settings.model_fields}
    sections.update({name: getattr(loaded, name) for name in RELOADABLE})
    # Built anew, so the checks across sections run on the combination that will trade.
    merged = Settings(**sections)
    return ReloadPlan(merged, applied, restart)


def apply_reload(engine: Engine, settings: Settings) -> None:
    """Swap in the strategy and risk settings; called between ticks (under the tick lock)."""
    engine.settings = settings
    engine.planner = Planner.of(settings)
    engine.strategies = strategies_for(
        settings.strategy,
        settings.market.symbols,
        both_sides=settings.exchange.rests_both_sides,
        short_refusal=account_short_refusal(settings),
    )
    engine.risk.settings = settings.risk


SettingsSource = Callable[[], Settings]
