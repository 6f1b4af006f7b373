"""The strategy each symbol trades, from the settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trader.config.trading_settings import StrategySettings
from trader.strategy.base import Strategy
from trader.strategy.ci_guard import CiGuardStrategy
from trader.strategy.consensus import ConsensusGate
from trader.strategy.maxdiff import MaxDiffStrategy
from trader.strategy.shorts import gate_shorts
from trader.strategy.simple import SimpleStrategy


def build_strategy(
    name: str,
    settings: StrategySettings,
    *,
    both_sides: bool = True,
    short_refusal: str | None = None,
) -> Strategy:
    """`both_sides`: the venue lets one symbol rest a buy and a sell at once
    (`exchange.rests_both_sides`); where it does not, maxdiff rests one side at a time.
    `short_refusal`: why the instrument cannot be shorted (`shorts.short_refusal`); with
    `allow_short` on, a short it would open is refused for it."""
    strategy: Strategy
    if name == "simple":
        strategy = SimpleStrategy()
    elif name == "ci_guard":
        strategy = CiGuardStrategy(
            settings.ci_lower_quantile, settings.ci_upper_quantile, settings.ci_multiplier
        )
    elif name == "maxdiff":
        strategy = MaxDiffStrategy(
            settings.maxdiff_entry_quantile, settings.maxdiff_exit_quantile, both_sides=both_sides
        )
    else:
        raise ValueError(f"no strategy named {name!r}")
    gated = ConsensusGate(strategy) if settings.consensus else strategy
    return gate_shorts(gated, short_refusal if settings.allow_short else None)


def strategies_for(
    settings: StrategySettings,
    symbols: Sequence[str],
    *,
    both_sides: bool,
    short_refusal: str | None = None,
) -> Mapping[str, Strategy]:
    """Each symbol's strategy; `both_sides`, `short_refusal`: as `build_strategy`'s
    (`both_sides` required here: the engine's strategies must know what their venue
    forbids)."""
    return {
        s: build_strategy(
            settings.per_symbol.get(s, settings.name),
            settings,
            both_sides=both_sides,
            short_refusal=short_refusal,
        )
        for s in symbols
    }
