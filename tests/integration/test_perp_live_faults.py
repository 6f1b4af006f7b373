"""The fault run and the kill run for the perp live broker on the futures emulator (the real
ccxt `binanceusdm`), after `test_live_fault_run.py`: market and limit orders, long and short,
exits reduce-only, cancels, amends and polls, with faults injected into one request in ten
(answers lost after the venue acted, held past and within the recvWindow, dropped
connections, 429/5xx, duplicate-id answers, garbage bodies). The kill run instead stops the
broker dead at random points, in-flight requests and all (its task cancelled), and starts a
new one on a new client: restore from the ledger, start-up again, reconcile, go on.

At the end: no client order id reached the venue twice, every trade the venue made is a fill
in the ledger (and nothing else is), the ledger's position is the venue's, and a
reconciliation (positions, funding, wallet) agrees.

The kill run is in-process: the daemon-level kill run (`test_live_kill_run.py`) needs
`trader sandbox --venue binanceusdm` and a daemon that trades perps end to end.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

import pytest

from tests.integration.futures_setup import ETH, HOUR, START, PerpSpec, spec
from tests.integration.perp_live_setup import PerpLive, fresh_broker, perp_live
from trader.domain import Bar, Order, OrderStatus, OrderType, Side
from trader.domain.execution import Execution
from trader.emulator import Fault
from trader.emulator.futures_market import FundingEvent

pytestmark = pytest.mark.integration
FAULT_RATE = 0.1
WALLET = Decimal(100_000)
PATH = "/fapi/v1/order"
DUPLICATE = '{"code": -2010, "msg": "Duplicate order sent."}'
BUSY = '{"code": -1003, "msg": "Too much request weight used."}'


def waving() -> PerpSpec:
    """ETH swinging 100 +- 4 over the hours (resting orders fill, both sides), funding every
    4 hours."""
    eth = spec("ETH", funding=[
        FundingEvent(START + timedelta(hours=h), Decimal("0.0001"), None) for h in range(4, 48, 4)
    ])  # fmt: skip

    def bars(spread: float) -> list[Bar]:
        out = []
        for n in range(48):
            a, b = 100 + 4 * math.sin(n / 2), 100 + 4 * math.sin((n + 1) / 2)
            out.append(Bar("ETH/USDT", HOUR, START + n * HOUR.duration, a,
                           max(a, b) + spread, min(a, b) - spread, b, 1000.0))  # fmt: skip
        return out

    eth.last, eth.mark = bars(0.5), bars(0.2)
    return eth


def fault(kind: str, rng: random.Random) -> Fault:
    method = {"order": "POST", "cancel": "DELETE", "amend": "*"}.get(kind, "GET")
    path = PATH if kind in ("order", "cancel", "amend") else "/fapi/v1/*"
    return rng.choice([
        Fault("delay", path, method=method, delay_s=0.5, after=True),  # timeout, order taken
        Fault("delay", path, method=method, delay_s=0.5),  # arrives late, within recvWindow
        Fault("delay", path, method=method, delay_s=1.3),  # refused on arrival (-1021)
        Fault("drop", path, method=method),
        Fault("drop", path, method=method, after=True),
        Fault("status", path, method=method, status=429, retry_after_s=0, body=BUSY),
        Fault("status", path, method=method, status=500),
        Fault("status", path, method=method, status=502, body="<html>502</html>", after=True),
        Fault("status", path, method=method, status=503, body="<html>503</html>"),
        Fault("status", path, method=method, status=400, body=DUPLICATE, after=True),
        Fault("malformed", path, method=method, body="<html>oops</html>", after=True),
    ])  # fmt: skip


@dataclass
class Run:
    live: PerpLive
    rng: random.Random
    operations: dict[str, int] = field(default_factory=dict)

    def held(self) -> Decimal:
        return sum((f.side.sign * f.amount for f in self.live.fills), Decimal(0))

    def resting(self) -> list[Order]:
        return [o for o in self.live.broker.open_orders() if o.status is OrderStatus.OPEN]

    def amount(self) -> Decimal:
        return Decimal(self.rng.randint(5, 40)) / 10

    def record(self, orders: Sequence[Order]) -> None:
        for order in orders:  # recorded before sending, as the engine does
            self.live.orders[order.client_order_id] = order

    def book(self, executions: Sequence[Execution | None]) -> None:
        self.live.book(list(executions))

    async def step(self, kind: str) -> None:
        live = self.live
        broker, quote, at = live.broker, live.quote(), live.now
        if kind == "order":
            held = self.held()
            side = Side.SELL if held > 15 else Side.BUY if held < -15 else self.rng.choice(
                [Side.BUY, Side.SELL])  # fmt: skip
            amount = abs(held) if held and self.rng.random() < 0.2 else self.amount()
            limit = None
            if self.rng.random() < 0.5:
                base = quote.bid if side is Side.BUY else quote.ask
                away = self.rng.uniform(-0.03, 0.002) * (1 if side is Side.BUY else -1)
                limit = (base * Decimal(repr(1 + away))).quantize(Decimal("0.01"))
            order = Order.create(
                strategy="faults", symbol=ETH, side=side,
                type=OrderType.LIMIT if limit is not None else OrderType.MARKET, amount=amount,
                limit_price=limit, tick_time=at, leg=f"l{len(live.orders)}",
            )  # fmt: skip
            self.record([order])
            self.book([await broker.submit(order, quote, at)])
        elif kind == "cancel" and self.resting():
            self.book([await broker.cancel(self.rng.choice(self.resting()), at)])
        elif kind == "amend" and self.resting():
            old = self.rng.choice(self.resting())
            assert old.limit_price is not None
            new = Order.create(
                strategy="faults", symbol=ETH, side=old.side, type=OrderType.LIMIT,
                amount=old.remaining, limit_price=(old.limit_price * Decimal("1.002")).quantize(
                    Decimal("0.01")), tick_time=at, leg=f"l{len(live.orders)}",
            )  # fmt: skip
            self.record([new])
            self.book(await broker.replace(old, new, quote, at))
        else:
            kind = "poll"
            self.book(await broker.on_market([], {}, at))
        self.operations[kind] = self.operations.get(kind, 0) + 1


async def settle(live: PerpLive) -> None:
    """Quiet: every lost answer settled once its recvWindow has passed; then reconciled."""
    await asyncio.sleep(2.2)
    for _ in range(5):
        live.book(await live.broker.on_market([], {}, live.now))
        if not any(o.status is OrderStatus.UNKNOWN for o in live.broker.open_orders()):
            break
        await asyncio.sleep(0.5)


def check_against_the_venue(live: PerpLive) -> None:
    account = live.p.account
    ids = [o.client_order_id for o in account.orders.values()]
    assert len(ids) == len(set(ids)), "an order reached the venue twice"
    assert set(ids) <= set(live.orders)
    trades = {f"ETHUSDT-{t.trade_id}": t for t in account.trades}
    fills = {f.fill_id: f for f in live.fills}
    assert len(fills) == len(live.fills), "a fill booked twice"
    assert set(fills) == set(trades)
    for fill_id, trade in trades.items():
        fill = fills[fill_id]
        assert (fill.price, fill.amount, fill.fee) == (trade.price, trade.qty, trade.commission)
    assert live.ledger().portfolio.amount(ETH) == live.position()


KINDS = ["order", "order", "order", "cancel", "amend", "poll"]


async def test_order_operations_with_one_fault_in_ten() -> None:
    rng = random.Random(20261129)  # noqa: S311 - a reproducible run
    async with perp_live(
        waving(),
        wallet=WALLET,
        margin_mode="cross",
        max_leverage=5,
        timeout_s=0.3,
        pause_s=0.05,
    ) as live:
        run, faults = Run(live, rng), 0
        for n in range(300):
            kind = rng.choice(KINDS)
            if rng.random() < FAULT_RATE:
                live.p.api.faults.add(fault(kind, rng))
                faults += 1
            await run.step(kind)
            live.p.api.faults.faults.clear()
            await asyncio.sleep(0.01)  # ticks are apart: a pause after a 5xx (pause_s) ends
            if n % 25 == 24:
                live.p.clock.advance_to(live.now + HOUR.duration)
        await settle(live)
        report = await live.broker.reconcile(live.ledger(), live.now)
        live.book(list(report.executions))
        account = live.p.account
        print(f"perp fault run: {run.operations}, faults {faults}, "
              f"venue orders {len(account.orders)}, trades {len(account.trades)}")  # fmt: skip
        assert faults >= 15
        assert len(live.p.account.trades) > 40, "the run traded"
        assert any(o.reduce_only for o in live.p.account.orders.values())
        assert report.ok, report.text
        check_against_the_venue(live)
        assert (await live.broker.reconcile(live.ledger(), live.now)).executions == ()


async def test_killed_at_random_points_and_restarted_the_ledger_equals_the_venue() -> None:
    rng = random.Random(20261130)  # noqa: S311 - a reproducible kill schedule
    async with perp_live(
        waving(),
        wallet=WALLET,
        margin_mode="cross",
        max_leverage=5,
        timeout_s=0.3,
        pause_s=0.05,
    ) as live:
        run, kills = Run(live, rng), 0
        for n in range(200):
            kind = rng.choice(KINDS)
            task = asyncio.ensure_future(run.step(kind))
            if rng.random() < 0.15:
                await asyncio.sleep(rng.uniform(0, 0.02))
                task.cancel()  # dead, mid-request or between requests
                await asyncio.gather(task, return_exceptions=True)
                kills += 1
                broker = await fresh_broker(live)
                broker.restore(list(live.ledger().open_orders), {})  # PENDING ones too
                await broker.prepare()  # start-up again: margin mode and leverage unchanged
                report = await broker.reconcile(live.ledger(), live.now)
                live.book(list(report.executions))
                assert not report.problems, report.text
            else:
                await task
            if n % 20 == 19:
                live.p.clock.advance_to(live.now + HOUR.duration)
        await settle(live)
        report = await live.broker.reconcile(live.ledger(), live.now)
        live.book(list(report.executions))
        assert kills >= 15
        assert len(live.p.account.trades) > 30, "the run traded"
        assert report.ok, report.text
        check_against_the_venue(live)
