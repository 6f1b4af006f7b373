"""Shorts in every strategy where the instrument allows them: on a perpetual simple, ci_guard,
maxdiff and the consensus gate go short; on spot crypto a short is refused with its reason
(a spot sell needs the coin held: Binance spot answers -2010 "Account has insufficient balance
for requested action", the venue's text as quoted in github.com/21jake/
Binance-volatility-trading-bot-JS/issues/6), and a take-profit sell of a long is kept. A
backtest's quiet stretches read the same outline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.engine.builders import context, forecast, quote
from trader.backtest.prepare import prepare
from trader.config.schema import Settings
from trader.config.trading_settings import StrategySettings
from trader.domain import Direction, Timeframe
from trader.market.replay import Recording
from trader.strategy.base import AtMarket, Outlined, RestingLimits
from trader.strategy.select import build_strategy, strategies_for
from trader.strategy.shorts import (
    SPOT_CRYPTO,
    account_short_refusal,
    modelled_short_caveat,
    short_refusal,
)

T0_MS = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000
PERP = short_refusal(kind="perp", venue="ccxt")
SPOT = short_refusal(kind="spot", venue="ccxt")
SHORTS = StrategySettings(allow_short=True)
FALLING = forecast(99.0, width=0.05)  # median -100 bps, band 10 bps: clears ci_guard's hurdle
STRADDLE = forecast(100.0, width=0.1, high=103.0, low=97.0)  # maxdiff's range straddles 100


def test_only_spot_crypto_refuses_a_short():
    assert PERP is None
    assert SPOT == SPOT_CRYPTO
    assert short_refusal(kind="spot", venue="alpaca") is None  # Alpaca keeps its own rules
    assert "spot crypto cannot be sold short" in SPOT_CRYPTO


@pytest.mark.parametrize("name", ["simple", "ci_guard"])
def test_at_market_strategies_go_short_on_a_perp_and_refuse_on_spot(name):
    perp = build_strategy(name, SHORTS, short_refusal=PERP).decide(
        context(FALLING, allow_short=True)
    )
    assert perp.signal.direction is Direction.SHORT
    assert perp.plan == AtMarket(Direction.SHORT)
    spot = build_strategy(name, SHORTS, short_refusal=SPOT).decide(
        context(FALLING, allow_short=True)
    )
    assert spot.signal.direction is Direction.FLAT
    assert spot.plan == AtMarket(Direction.FLAT)
    assert spot.edge_bps is None
    assert spot.signal.reason.startswith("no trade: short refused, spot crypto cannot be sold")
    assert perp.signal.reason in spot.signal.reason  # what the strategy wanted, and why not
    # A long is never touched by the gate.
    rising = forecast(101.0, width=0.05)
    long = build_strategy(name, SHORTS, short_refusal=SPOT).decide(
        context(rising, allow_short=True)
    )
    assert long.signal.direction is Direction.LONG


def test_a_refused_short_closes_a_long_it_would_have_reversed():
    spot = build_strategy("simple", SHORTS, short_refusal=SPOT)
    decision = spot.decide(context(FALLING, allow_short=True, position="3"))
    assert decision.plan == AtMarket(Direction.FLAT)


def test_maxdiff_rests_a_sell_entry_on_a_perp_and_only_the_buy_on_spot():
    perp = build_strategy("maxdiff", SHORTS, short_refusal=PERP)
    both = perp.decide(context(STRADDLE, allow_short=True)).plan
    assert isinstance(both, RestingLimits)
    assert both.buy_price is not None
    assert both.sell_price is not None
    spot = build_strategy("maxdiff", SHORTS, short_refusal=SPOT)
    decision = spot.decide(context(STRADDLE, allow_short=True))
    assert decision.plan == RestingLimits(both.buy_price, None, both.expires_at)
    assert decision.signal.direction is Direction.LONG
    assert decision.signal.reason.endswith(f"the sell entry refused: {SPOT_CRYPTO}")
    # Holding a long, the sell is its take-profit: it only reduces, and stays.
    held = spot.decide(context(STRADDLE, allow_short=True, position="2")).plan
    assert isinstance(held, RestingLimits)
    assert held.sell_price == both.sell_price


def test_maxdiff_with_only_a_sell_in_reach_stands_aside_on_spot():
    # The forecast low (97) is above the bid 96: no buy; the high (103) above the ask.
    q = quote("95.99", "96.01")
    perp = build_strategy("maxdiff", SHORTS, short_refusal=PERP).decide(
        context(STRADDLE, allow_short=True, q=q)
    )
    assert perp.plan == RestingLimits(None, perp.plan.sell_price, perp.plan.expires_at)  # type: ignore[union-attr]
    spot = build_strategy("maxdiff", SHORTS, short_refusal=SPOT).decide(
        context(STRADDLE, allow_short=True, q=q)
    )
    assert spot.plan == AtMarket(Direction.FLAT)
    assert "short refused" in spot.signal.reason


def test_the_consensus_gate_shorts_on_a_perp_when_both_models_fall_and_refuses_on_spot():
    settings = StrategySettings(allow_short=True, consensus=True, name="simple")
    kronos = forecast(98.5, width=0.05, model="kronos")
    ctx = context(FALLING, allow_short=True, others={"kronos": kronos})
    perp = build_strategy("simple", settings, short_refusal=PERP).decide(ctx)
    assert perp.signal.direction is Direction.SHORT
    spot = build_strategy("simple", settings, short_refusal=SPOT).decide(ctx)
    assert spot.signal.direction is Direction.FLAT
    assert "short refused" in spot.signal.reason


@pytest.mark.parametrize("name", ["simple", "ci_guard"])
def test_a_gated_strategy_stays_outlined_and_its_outline_is_its_decision(name):
    gated = build_strategy(name, SHORTS, short_refusal=SPOT)
    assert isinstance(gated, Outlined)
    ctx = context(FALLING, allow_short=True)
    outline = gated.outline(ctx.outlook)
    decision = gated.decide(ctx)
    assert (outline.direction, outline.reason) == (
        decision.signal.direction,
        decision.signal.reason,
    )
    assert outline.direction is Direction.FLAT
    # maxdiff is not outlined, gated or not.
    assert not isinstance(build_strategy("maxdiff", SHORTS, short_refusal=SPOT), Outlined)


def test_with_shorts_off_no_gate_is_added():
    plain = build_strategy("simple", StrategySettings(), short_refusal=SPOT)
    assert type(plain).__name__ == "SimpleStrategy"
    decision = plain.decide(context(FALLING))
    assert decision.signal.reason == "no trade: median forecast return -100.0 bps (long only)"


def test_the_daemon_refuses_spot_shorts_live_and_models_them_in_paper():
    live = Settings(broker={"mode": "live"})
    assert account_short_refusal(live) == SPOT_CRYPTO
    perp = Settings(broker={"mode": "live"}, market={"kind": "perp"})
    assert account_short_refusal(perp) is None
    alpaca = Settings(broker={"mode": "live"}, exchange={"venue": "alpaca"})
    assert account_short_refusal(alpaca) is None
    assert account_short_refusal(Settings()) is None  # paper: spot shorts modelled as before
    gated = strategies_for(SHORTS, ["SOL/USDT"], both_sides=True, short_refusal=SPOT)
    decision = gated["SOL/USDT"].decide(context(FALLING, allow_short=True))
    assert decision.signal.direction is Direction.FLAT


def test_paper_runs_and_backtests_of_spot_say_once_that_their_shorts_are_modelled() -> None:
    shorts = {"allow_short": True}
    caveat = modelled_short_caveat(Settings(strategy=shorts))
    assert caveat is not None
    assert SPOT_CRYPTO in caveat
    assert modelled_short_caveat(Settings()) is None  # no shorts: nothing to say
    assert modelled_short_caveat(Settings(strategy=shorts, broker={"mode": "live"})) is None
    assert modelled_short_caveat(Settings(strategy=shorts, market={"kind": "perp"})) is None
    assert modelled_short_caveat(Settings(strategy=shorts, exchange={"venue": "alpaca"})) is None


def test_a_spot_backtest_with_shorts_warns_before_its_figures() -> None:
    rows: list[tuple[int, float, float, float, float, float, float | None]] = [
        (T0_MS + i * 3_600_000, 100.0, 101.0, 99.0, 100.0, 10.0, 1000.0) for i in range(40)
    ]
    recordings = {"SOL/USDT": Recording("SOL/USDT", Timeframe("1h"), rows, Path("SOL_1h.csv"))}
    market = {"context_bars": 16}
    shorting = prepare(Settings(strategy={"allow_short": True}, market=market), recordings)
    assert [w for w in shorting.warnings if SPOT_CRYPTO in w] == [
        modelled_short_caveat(Settings(strategy={"allow_short": True}))
    ]
    plain = prepare(Settings(market=market), recordings)
    assert not [w for w in plain.warnings if SPOT_CRYPTO in w]
