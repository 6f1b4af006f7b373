"""The running shortfall against the cost model, from real daemons. A paper daemon over a replay
pays exactly what its own cost model charges (the replay's spread, the configured slippage and
fees), so the realised costs it exports equal the modelled ones part by part, each fill counted
once and every fill priced. The same daemon on the emulator's real quotes, whose spread is ten
times the modelled one, pays that spread: the realised costs are three times the model's, as
the ledger's own record of each decision's quote says. Costs other than the defaults, so that
nothing matches by chance."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests.integration.daemon import (
    daemon_env,
    metrics_port,
    recording,
    running,
    scrape,
    stop,
    wait_until,
)
from tests.integration.emulated import SECOND, live_env
from trader.domain import Bar
from trader.emulator import EmulatedMarket, EmulatorServer, Instrument

pytestmark = pytest.mark.integration

SYMBOL = "SOL/USDT"
SPREAD, SLIP, TAKER = 1.0, 3.0, 0.5  # bps; the defaults are 5, 2 and 10
COSTS = {
    "TRADER_STRATEGY__NAME": "simple",  # market orders: they cross the spread and slip
    "TRADER_MARKET__REPLAY_SPREAD_BPS": str(SPREAD),
    "TRADER_BROKER__SLIPPAGE_BPS": str(SLIP),
    "TRADER_BROKER__TAKER_FEE_BPS": str(TAKER),
    "TRADER_BROKER__MAKER_FEE_BPS": "0.25",
    "TRADER_RISK__MIN_EDGE_BPS": "0",  # the baseline's small moves clear 2 fees + the spread
}


def _costs(port: int, symbol: str = SYMBOL) -> dict[str, float]:
    """One scrape's figures, once the daemon has booked a few fills."""
    values = scrape(port)

    def one(name: str, **labels: str) -> float:
        want = {"symbol": symbol, **labels}
        found = [v for (n, got), v in values.items() if n == name and dict(got) == want]
        assert len(found) == 1, (name, labels)
        return found[0]

    figures = {
        f"{kind} {part}": one("trader_fill_cost_bps_total", kind=kind, part=part)
        for kind in ("realised", "modelled")
        for part in ("spread", "slippage", "fees", "improvement")
    }
    figures["taker"] = one("trader_fill_cost_fills_total", liquidity="taker")
    figures["maker"] = one("trader_fill_cost_fills_total", liquidity="maker")
    figures["unpriced"] = one("trader_fill_cost_unpriced_total")
    figures["fills"] = sum(
        v
        for (n, got), v in values.items()
        if n == "trader_fills_total" and dict(got)["symbol"] == symbol
    )
    assert figures["taker"] >= 4
    # A scrape between a tick's counters would tear them: the next one is whole.
    assert figures["taker"] + figures["maker"] + figures["unpriced"] == figures["fills"]
    return figures


def test_a_paper_daemon_pays_its_own_cost_model_fill_by_fill(cli, tmp_path):
    data = recording(tmp_path, 48 + 400)
    env = daemon_env(tmp_path, **COSTS)
    daemon = cli.start("run", "--replay", str(data), "--speed", "3600", env=env)
    with running(daemon):
        port = metrics_port(daemon)
        figures = wait_until(lambda: _costs(port), "fills priced in the metrics", timeout=120)
        daemon.process.kill()
    takers = figures["taker"]
    assert figures["maker"] == 0  # market orders only
    assert figures["unpriced"] == 0  # every order was decided on a quote this run saw
    # Each taker fill: half the replay's spread to cross, the configured slippage beyond the
    # touch (the paper broker rounds the price against the daemon to 1e-8) and the taker fee
    # (rounded up to 1e-8 of the cash currency).
    assert figures["modelled spread"] == pytest.approx(takers * SPREAD / 2)
    assert figures["modelled slippage"] == pytest.approx(takers * SLIP)
    assert figures["modelled fees"] == pytest.approx(takers * TAKER)
    # Rounding to 1e-8 moves a fill of SOL at about 2 USDT by at most 0.00005 bps.
    for part in ("spread", "slippage", "fees"):
        realised, modelled = figures[f"realised {part}"], figures[f"modelled {part}"]
        assert realised == pytest.approx(modelled, abs=takers * 1e-4)
    assert figures["realised improvement"] == 0
    assert figures["modelled improvement"] == 0
    # The ledger booked the fills the metrics priced.
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as c:
        (booked,) = c.execute("SELECT count(*) FROM fills WHERE liquidity = 'taker'").fetchone()
    assert booked >= takers


def _zigzag(symbol: str, start: datetime, n: int, price: float) -> list[Bar]:
    """One-second bars 30 bps up for 12 bars, then 30 bps down for 12: the baseline's median
    move over its 16 follows, and the simple strategy (shorts allowed) turns with each leg."""
    bars = []
    for i in range(n):
        close = price * (1.003 if (i // 12) % 2 == 0 else 0.997)
        high, low = max(price, close) * 1.0005, min(price, close) * 0.9995
        bars.append(Bar(symbol, SECOND, start + timedelta(seconds=i), price, high, low, close, 5.0))
        price = close
    return bars


def _half_spreads(ledger) -> list[float]:  # type: ignore[no-untyped-def]
    """Each taker fill's half spread in bps, from the quote the ledger kept for its decision."""
    with sqlite3.connect(ledger) as c:
        rows = c.execute(
            "SELECT q.bid, q.ask FROM fills f JOIN orders o USING (client_order_id) "
            "JOIN decision_quotes q ON q.tick = o.created_at AND q.symbol = f.symbol "
            "WHERE f.liquidity = 'taker'"
        ).fetchall()
    halves = []
    for bid, ask in rows:
        mid = (Decimal(bid) + Decimal(ask)) / 2
        halves.append(float((Decimal(ask) - mid) / mid) * 10_000)
    return halves


async def test_real_quotes_wider_than_the_model_show_as_realised_costs_above_it(cli, tmp_path):
    symbol = "BTC/USDT"
    start = SECOND.floor(datetime.now(UTC)) - timedelta(seconds=120)
    market = EmulatedMarket(lambda: datetime.now(UTC), spread_bps=Decimal(20))
    market.add_listing(Instrument(symbol), _zigzag(symbol, start, 900, 60_000.0))
    server = EmulatorServer(market)
    await server.start()
    ledger = tmp_path / "ledger.sqlite3"
    try:
        env = live_env(
            server.base_url, ledger, TRADER_MARKET__SYMBOLS=symbol,
            TRADER_SCHEDULE__QUOTE_POLL_INTERVAL_S="0.5", TRADER_STRATEGY__ALLOW_SHORT="true",
            **(COSTS | {"TRADER_MARKET__REPLAY_SPREAD_BPS": "2"}),
        )  # fmt: skip
        with running(cli.start("run", env=env)) as daemon:
            port = await asyncio.to_thread(metrics_port, daemon)
            figures = await asyncio.to_thread(
                wait_until, lambda: _costs(port, symbol), "fills priced", 90
            )
            assert await asyncio.to_thread(stop, daemon) == 0
    finally:
        await server.stop()
    takers = figures["taker"]
    assert figures["unpriced"] == 0
    # The emulator's book is 20 bps wide around the last price: 10 to cross, against the
    # model's 1 (half of 2); the paper broker's slippage and fee are the model's.
    assert figures["realised spread"] / takers == pytest.approx(10, abs=0.01)
    assert figures["modelled spread"] == pytest.approx(takers * 1)
    assert figures["realised slippage"] == pytest.approx(takers * SLIP, abs=takers * 1e-4)
    assert figures["realised fees"] == pytest.approx(takers * TAKER, abs=takers * 1e-4)
    realised = sum(figures[f"realised {part}"] for part in ("spread", "slippage", "fees"))
    modelled = sum(figures[f"modelled {part}"] for part in ("spread", "slippage", "fees"))
    assert realised / modelled == pytest.approx((10 + SLIP + TAKER) / (1 + SLIP + TAKER), rel=1e-3)
    assert realised / modelled > 2  # TraderCostsAboveModel's factor, once a day of it holds
    # The ledger kept each decision's quote: the same spread, fill by fill.
    halves = _half_spreads(ledger)
    assert len(halves) >= takers
    assert halves == pytest.approx([10] * len(halves), abs=0.01)
