"""The live perp broker on the real ccxt `binanceusdm` (and `aster`) against the futures
emulator: start-up, reduce-only exits, and the venue's refusals classified by their code.

Sources: ccxt 4.5.90 ccxt/binance.py (`fetch_position_mode` -> GET /fapi/v1/positionSide/dual,
`set_margin_mode` -> POST /fapi/v1/marginType raising MarginModeAlreadySet on -4046,
`set_leverage` -> POST /fapi/v1/leverage answering {"leverage", "maxNotionalValue"},
`fetch_leverage_tiers` -> GET /fapi/v1/leverageBracket, `create_order` with `reduceOnly`,
its `exceptions` table for the messages); ccxt/aster.py (the same under /fapi/v3, no
`fetchLeverageTiers`); Binance "Error Codes" (USDⓈ-M futures): -2019 "Margin is
insufficient.", -2022 "ReduceOnly Order is rejected.", -4164 notional below the minimum,
-2027 "Exceeded the maximum allowable position at current leverage.", -4061 "Order's position
side does not match user's setting.", -1021 timestamp outside the recvWindow, -4046 "No need to
change margin type.", -4059 "No need to change position side.", -4048 margin type cannot be
changed with a position.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import ccxt.async_support as ccxt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.integration.futures_setup import ETH, START, spec
from tests.integration.perp_live_setup import PerpLive, perp_live
from trader.broker.factory import build_broker
from trader.broker.live.perp import PerpLiveBroker
from trader.broker.live.perp_positions import Sizes, VenuePosition
from trader.broker.live.perp_setup import is_no_change
from trader.broker.safety import StartRefused
from trader.broker.venue_errors import Meaning, classify
from trader.config.schema import Settings
from trader.domain import Order, OrderStatus, OrderType, Side
from trader.emulator import Fault
from trader.emulator.futures_market import DEFAULT_BRACKETS
from trader.ledger import Database
from trader.ledger.reconciliation import ReconciliationLedger

pytestmark = pytest.mark.integration


def reduce_only(live: PerpLive, client_order_id: str) -> bool:
    (order,) = [o for o in live.p.account.orders.values() if o.client_order_id == client_order_id]
    return bool(order.reduce_only)


# --- start-up ------------------------------------------------------------------------------


async def test_startup_sets_margin_mode_and_leverage_and_reads_the_brackets() -> None:
    async with perp_live(max_leverage=2.5, margin_mode="isolated") as live:
        setting = live.p.account.setting("ETHUSDT")
        assert (setting.leverage, setting.margin_type) == (3, "ISOLATED")  # 2.5 rounded up
        terms = live.broker.terms
        assert terms is not None
        assert terms.leverage == 3
        read = terms.brackets[ETH].brackets
        # The emulator lists Binance's BTCUSDT tiers (its leverage FAQ); read back whole.
        assert [(b.notional_floor, b.notional_cap, b.maint_margin_ratio, b.cum,
                 b.initial_leverage) for b in read] == [
            (b.notional_floor, b.notional_cap, b.maint_margin_ratio, b.cum, b.initial_leverage)
            for b in DEFAULT_BRACKETS
        ]  # fmt: skip
        paths = live.p.api.requests
        for route in ("/fapi/v1/positionSide/dual", "/fapi/v1/leverageBracket",
                      "/fapi/v1/marginType", "/fapi/v1/leverage"):  # fmt: skip
            assert any(r.startswith(route) for r in paths), route


async def test_cross_margin_is_set_when_asked() -> None:
    async with perp_live(margin_mode="isolated") as live:
        assert live.p.account.setting("ETHUSDT").margin_type == "ISOLATED"
    async with perp_live(margin_mode="cross", prepare=False) as live:
        live.p.account.setting("ETHUSDT").margin_type = "ISOLATED"
        await live.broker.prepare()
        assert live.p.account.setting("ETHUSDT").margin_type == "CROSSED"


async def test_a_second_start_takes_no_need_to_change_as_success() -> None:
    async with perp_live() as live:
        before = sum(1 for r in live.p.api.requests if r.startswith("/fapi/v1/marginType"))
        terms = await live.broker.prepare()  # the margin type is already ISOLATED: -4046
        after = sum(1 for r in live.p.api.requests if r.startswith("/fapi/v1/marginType"))
        assert after == before + 1
        assert terms.margin_mode == "isolated"
        # -4059: asking for the position mode the account already has.
        with pytest.raises(ccxt.BaseError) as raised:
            await live.broker.exchange.set_position_mode(False)
        assert "-4059" in str(raised.value)
        assert is_no_change(raised.value)
        # Anything else is not "no change".
        with pytest.raises(ccxt.BaseError) as other:
            await live.broker.exchange.set_leverage(126, ETH)
        assert not is_no_change(other.value)


async def test_hedge_mode_is_refused_with_a_clear_message() -> None:
    async with perp_live(prepare=False) as live:
        live.p.account.dual_side = True
        with pytest.raises(StartRefused, match=r"hedge mode.*one-way mode only"):
            await live.broker.prepare()
        assert live.p.account.setting("ETHUSDT").leverage == 20  # nothing was set


async def test_a_leverage_the_first_bracket_does_not_allow_is_refused_naming_it() -> None:
    async with perp_live(max_leverage=126, prepare=False) as live:
        with pytest.raises(StartRefused, match=r"126x.*ETH/USDT:USDT.*at most 125x"):
            await live.broker.prepare()


async def test_an_open_position_in_another_margin_mode_refuses_the_start() -> None:
    async with perp_live(prepare=False) as live:
        await live.p.exchange.create_order(ETH, "market", "buy", 1)  # cross, Binance's default
        with pytest.raises(StartRefused, match="has a position in that symbol: close it first"):
            await live.broker.prepare()


async def test_an_open_position_is_taken_as_the_starting_size() -> None:
    async with perp_live(margin_mode="cross", max_leverage=20, prepare=False) as live:
        await live.p.exchange.create_order(ETH, "market", "buy", 2)
        terms = await live.broker.prepare()
        assert terms.positions[ETH].size == Decimal(2)
        done = await live.submit(live.order(Side.SELL, "2"))  # closes it: reduce-only
        assert done.order.status is OrderStatus.FILLED
        assert reduce_only(live, done.order.client_order_id)
        assert live.position() == 0


# --- reduce-only exits ---------------------------------------------------------------------


async def test_exits_go_reduce_only_and_entries_do_not() -> None:
    async with perp_live() as live:
        steps = [(Side.BUY, "1", False), (Side.SELL, "0.4", True), (Side.SELL, "0.6", True),
                 (Side.SELL, "1", False), (Side.BUY, "1", True)]  # fmt: skip
        held = Decimal(0)
        for side, amount, expected in steps:
            done = await live.submit(live.order(side, amount))
            assert done.order.status is OrderStatus.FILLED
            assert reduce_only(live, done.order.client_order_id) is expected, (side, amount)
            held += side.sign * Decimal(amount)
            assert live.position() == held
        assert held == 0


async def test_a_reversal_is_not_reduce_only() -> None:
    async with perp_live() as live:
        await live.submit(live.order(Side.BUY, "1"))
        done = await live.submit(live.order(Side.SELL, "3"))
        assert done.order.status is OrderStatus.FILLED
        assert not reduce_only(live, done.order.client_order_id)
        assert live.position() == Decimal(-2)


async def test_an_exit_whose_position_is_gone_is_rejected_not_reversed() -> None:
    async with perp_live() as live:
        await live.submit(live.order(Side.BUY, "1"))
        # Something else closes the position at the venue; the broker still holds 1.
        await live.p.exchange.create_order(ETH, "market", "sell", 1, params={"reduceOnly": True})
        done = await live.submit(live.order(Side.SELL, "1"))
        assert done.order.status is OrderStatus.REJECTED
        assert done.reason is not None
        assert done.reason.startswith("reduce_only_rejected")
        assert live.position() == 0  # never opened a short


# --- the venue's refusals, by code -----------------------------------------------------------


async def test_margin_insufficient_2019_is_a_refusal_not_a_halt() -> None:
    async with perp_live(wallet=Decimal(1000), max_leverage=5) as live:
        done = await live.submit(live.order(Side.BUY, "60"))  # IM 6,000 / 5 > 1,000
        assert done.order.status is OrderStatus.REJECTED
        assert done.reason is not None
        assert done.reason.startswith("margin_insufficient")
        assert "-2019" in done.reason
        assert live.position() == 0
        after = await live.submit(live.order(Side.BUY, "1"))  # still trading
        assert after.order.status is OrderStatus.FILLED


async def test_over_the_leverages_notional_cap_2027_is_rejected() -> None:
    async with perp_live(wallet=Decimal(10_000), max_leverage=125, margin_mode="cross") as live:
        done = await live.submit(live.order(Side.BUY, "600"))  # 60,000 > 50,000 at 125x
        assert done.order.status is OrderStatus.REJECTED
        assert done.reason is not None
        assert done.reason.startswith("over_leverage_cap")


async def test_a_hedge_mode_switch_after_start_is_rejected_4061() -> None:
    async with perp_live() as live:
        live.p.account.dual_side = True
        done = await live.submit(live.order(Side.BUY, "1"))
        assert done.order.status is OrderStatus.REJECTED
        assert done.reason is not None
        assert done.reason.startswith("position_side_mismatch")


async def test_below_the_minimum_notional_4164_never_leaves_and_is_classified() -> None:
    async with perp_live() as live:  # ETH lists a 20 USDT minimum notional
        assert live.instruments[ETH].min_notional == Decimal(20)
        done = await live.submit(live.order(Side.BUY, "0.1"))  # 10 USDT
        assert done.order.status is OrderStatus.REJECTED
        assert "minimum" in (done.reason or "")
        assert not live.p.account.orders  # refused here, never sent
        # Had it been sent, the venue's -4164 reads as a rejection of its own kind.
        with pytest.raises(ccxt.ExchangeError) as raised:
            await live.p.exchange.create_order(ETH, "market", "buy", 0.1)
        found = classify(raised.value)
        assert (found.meaning, found.label) == (Meaning.REJECTED, "below_min_notional")


async def test_a_stale_timestamp_1021_is_retried_then_not_sent() -> None:
    async with perp_live() as live:
        wall = live.p.api.private.wall_ms
        live.p.api.private.wall_ms = lambda: wall() + 120_000  # the server 2 minutes ahead
        done = await live.submit(live.order(Side.BUY, "1"))
        assert done.order.status is OrderStatus.REJECTED
        assert done.reason is not None
        assert "stale_timestamp" in done.reason
        assert not live.p.account.orders
        live.p.api.private.wall_ms = wall
        assert (await live.submit(live.order(Side.BUY, "1"))).order.status is OrderStatus.FILLED


# --- Aster ---------------------------------------------------------------------------------


async def test_aster_starts_and_trades_through_the_v3_alias() -> None:
    async with perp_live(venue="aster", max_leverage=3) as live:
        assert live.broker.exchange.id == "aster"
        assert live.broker.exchange.options["builderFee"] is False  # no fee to ccxt's builder
        setting = live.p.account.setting("ETHUSDT")
        assert (setting.leverage, setting.margin_type) == (3, "ISOLATED")
        terms = live.broker.terms
        assert terms is not None
        assert (
            terms.brackets[ETH].brackets[0].initial_leverage == DEFAULT_BRACKETS[0].initial_leverage
        )
        mark = len(live.p.api.requests)  # (the harness's own binanceusdm client came first)
        opened = await live.submit(live.order(Side.BUY, "1"))
        closed = await live.submit(live.order(Side.SELL, "1"))
        assert opened.order.status is closed.order.status is OrderStatus.FILLED
        assert reduce_only(live, closed.order.client_order_id)
        assert live.position() == 0
        paths = live.p.api.requests
        assert any(r.startswith("/fapi/v3/leverageBracket") for r in paths)
        assert any(r.startswith("/fapi/v3/order") for r in paths)
        for route in ("/fapi/v3/marginType", "/fapi/v3/leverage", "/fapi/v3/positionSide/dual"):
            assert any(r.startswith(route) for r in paths), route
        assert not any(r.startswith("/fapi/v1/") for r in paths[mark:])
        report = await live.broker.reconcile(live.ledger(), live.now)
        assert report.ok, report.text


def test_spec_default_minimum_is_what_the_tests_assume() -> None:
    assert spec("ETH").instrument.min_notional == Decimal(20)


async def test_aster_finds_an_order_whose_answer_was_lost_by_its_client_id() -> None:
    async with perp_live(venue="aster") as live:
        live.p.api.faults.add(
            Fault("status", "/fapi/v3/order", method="POST", status=503, after=True)
        )
        order = live.order(Side.BUY, "1")
        done = await live.submit(order)  # the answer lost after the venue took it
        assert done.order.status is OrderStatus.FILLED
        assert done.reason == "found at the venue"
        assert live.position() == 1
        assert live.sent_once()


# --- the reduce-only decision, as a property ---------------------------------------------------


@given(
    held=st.integers(-50, 50).map(lambda n: Decimal(n) / 10),
    amount=st.integers(1, 60).map(lambda n: Decimal(n) / 10),
    side=st.sampled_from([Side.BUY, Side.SELL]),
)
def test_an_order_is_reduce_only_exactly_when_it_neither_grows_nor_flips_the_position(
    held: Decimal, amount: Decimal, side: Side
) -> None:
    sizes = Sizes()
    sizes.reset({ETH: VenuePosition(ETH, held, Decimal(100), None, None, None, None, None, "BOTH")}
                if held else {})  # fmt: skip
    order = Order.create(
        strategy="p", symbol=ETH, side=side, type=OrderType.MARKET, amount=amount,
        limit_price=None, tick_time=START, leg="x",
    )  # fmt: skip
    after = held + side.sign * amount
    shrinks = abs(after) < abs(held) or after == 0
    same_side = after == 0 or held == 0 or (after > 0) == (held > 0)
    assert sizes.reduces(order) is (held != 0 and shrinks and same_side)


# --- the daemon's factory --------------------------------------------------------------------


async def test_the_factory_builds_a_prepared_perp_broker_with_the_wallet_as_baseline(
    tmp_path: Path,
) -> None:
    async with perp_live(prepare=False, wallet=Decimal(1000)) as live:
        settings = Settings(
            ledger={"path": tmp_path / "ledger.sqlite3"},
            market={"kind": "perp", "symbols": [ETH]},
            broker={"mode": "live", "margin_mode": "cross", "lock_dir": tmp_path / "locks"},
            risk={"max_leverage": 3},
            exchange={"id": "binanceusdm"},
        )
        database = await Database.open(settings.ledger.path)
        try:
            broker, _cash = await build_broker(
                settings, live.feed, live.instruments, database, live.now
            )
            try:
                assert isinstance(broker, PerpLiveBroker)
                setting = live.p.account.setting("ETHUSDT")
                assert (setting.leverage, setting.margin_type) == (3, "CROSSED")
                # The baseline is the wallet, not ccxt's total (the margin balance).
                assert await ReconciliationLedger(database).baseline() == {"USDT": Decimal(1000)}
            finally:
                broker.close()
        finally:
            await database.close()
