"""An order that fills while the engine cancels it (a live venue's race) voids that symbol's
new orders for the tick: they were planned from a position that is gone."""

from __future__ import annotations

import pytest

from tests.integration.test_engine import SYMBOLS, recordings, run
from trader.clock import SimulatedClock
from trader.config.schema import Settings
from trader.domain import Fill, Liquidity, OrderStatus
from trader.domain.execution import Execution
from trader.forecast import BaselineForecaster
from trader.ledger import Database
from trader.market.quotes import FixedSpread
from trader.market.replay import ReplayMarketData
from trader.runner import build_engine, tick_times

pytestmark = pytest.mark.integration


async def test_a_fill_found_while_cancelling_drops_the_symbols_new_orders(tmp_path):
    settings = Settings(
        market={"symbols": list(SYMBOLS), "context_bars": 32, "replay_amount_step": "0.001"},
        forecast={"horizon": 4},  # maxdiff's orders rest four bars: the next tick cancels them
        strategy={"name": "maxdiff", "allow_short": True, "position_fraction": 0.1},
        ledger={"path": tmp_path / "ledger.sqlite3"},
    )
    recs = recordings()
    times = tick_times(recs, 32)
    clock = SimulatedClock(times[0])
    database = await Database.open(settings.ledger.path)
    built = await build_engine(
        settings, ReplayMarketData(recs, clock, FixedSpread(5)), database, times[0],
        forecasters=[BaselineForecaster(32)],
    )  # fmt: skip
    times = [(t, clock) for t in times]
    await run(built, times, 3)
    resting = {o.symbol for o in built.broker.open_orders()}
    assert "SOL/USDT" in resting, "maxdiff rests orders: something to cancel"
    real_cancel = built.broker.cancel

    async def cancel(order, at):
        done = await real_cancel(order, at)
        if order.symbol != "SOL/USDT" or done is None:
            return done
        # The venue says it filled first: the whole order, at its limit.
        fill = Fill(
            f"{order.client_order_id}-race", order.client_order_id, order.symbol, order.side,
            order.limit_price, order.remaining, 0, "USDT", Liquidity.MAKER, at,
        )  # fmt: skip
        return Execution(order.with_fill(fill), (fill,))

    built.broker.cancel = cancel  # type: ignore[method-assign]
    (report,) = await run(built, times[3:], 1)
    built.close()
    await database.close()
    new = [o for o in report.orders if o.status is OrderStatus.OPEN]
    assert [f.fill_id.endswith("-race") for f in report.fills if f.symbol == "SOL/USDT"]
    assert not [o for o in new if o.symbol == "SOL/USDT"]
    assert [o for o in new if o.symbol == "BTC/USDT"], "the other symbol trades as planned"
