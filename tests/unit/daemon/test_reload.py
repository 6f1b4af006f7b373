"""Reloading settings: strategy and risk apply, anything else is named as needing a restart,
and a combination that does not fit is refused without a value in the message."""

from __future__ import annotations

from decimal import Decimal

import pytest

from trader.config.schema import Settings
from trader.daemon.reload import plan_reload


def test_strategy_and_risk_apply_other_sections_need_a_restart():
    running = Settings(market={"symbols": ["SOL/USDT"]})
    loaded = Settings(
        market={"symbols": ["SOL/USDT", "BTC/USDT"]},
        strategy={"name": "maxdiff", "position_fraction": 0.1},
        risk={"max_order_notional": "500"},
        mqtt={"password": "hunter2-but-longer"},
    )
    plan = plan_reload(running, loaded)
    assert plan.applied == [
        "strategy.name",
        "strategy.position_fraction",
        "risk.max_order_notional",
    ]
    assert plan.needs_restart == ["market.symbols", "mqtt.password"]
    assert plan.settings.strategy.name == "maxdiff"
    assert plan.settings.risk.max_order_notional == Decimal(500)
    assert plan.settings.market.symbols == ["SOL/USDT"]  # not applied: needs a restart
    assert plan.settings.mqtt.password is None


def test_a_strategy_that_needs_quantiles_the_running_model_lacks_is_refused():
    levels = {"maxdiff_entry_quantile": 0.3, "maxdiff_exit_quantile": 0.7}
    running = Settings(forecast={"quantiles": [0.3, 0.4, 0.5, 0.6, 0.7]}, strategy=levels)
    loaded = Settings(strategy={"name": "maxdiff"})  # its defaults: 0.2 and 0.8
    with pytest.raises(ValueError, match=r"lacks \[0.2, 0.8\]"):
        plan_reload(running, loaded)
