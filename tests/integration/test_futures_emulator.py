"""ccxt's real `binanceusdm` client (4.5.90) on the futures emulator: markets, settings,
orders and Binance's refusals, positions on the mark price, faults.

Sources: the routes each ccxt method calls, ccxt/binance.py (fetch_markets, set_leverage,
set_margin_mode, set_position_mode, fetch_leverage_tiers, create_order, fetch_positions_risk,
fetch_balance, fetch_my_trades); the error codes and messages, Binance's USDⓈ-M error-code
page as ccxt's exception table quotes it (binance.py 'exceptions'): -2019 "Margin is
insufficient.", -2022 "ReduceOnly Order is rejected.", -4164 "Order's notional must be no
smaller than ... (unless you choose reduce only).", -4061, -4046 "No need to change margin
type.", -4059 "No need to change position side.", -4028 "Invalid leverage", -1021.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import ccxt.async_support as ccxt
import pytest

from tests.integration.futures_setup import (
    ETH,
    HOUR,
    SOL,
    START,
    TAKER,
    Perps,
    flat,
    perps,
    spec,
)
from trader.emulator import Fault
from trader.market.ccxt_feed import point_at

pytestmark = pytest.mark.integration


def d(value: object) -> Decimal:
    return Decimal(str(value))


async def trades(p: Perps, symbol: str = ETH) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = await p.exchange.fetch_my_trades(symbol)
    return rows


async def test_markets_are_linear_perpetuals_with_the_listed_filters() -> None:
    async with perps(spec("ETH", min_notional="20"), spec("SOL")) as p:
        market = p.exchange.market(ETH)
        assert market["swap"]
        assert market["linear"]
        assert market["settle"] == "USDT"
        assert market["contractSize"] == 1
        assert d(market["limits"]["cost"]["min"]) == Decimal(20)
        assert d(market["precision"]["amount"]) == Decimal("0.001")
        assert d(market["precision"]["price"]) == Decimal("0.01")
        assert SOL in p.exchange.markets


async def test_leverage_margin_type_and_their_no_op_refusals() -> None:
    async with perps() as p:
        answer = await p.exchange.set_leverage(10, ETH)
        assert answer["leverage"] == 10
        assert p.account.setting("ETHUSDT").leverage == 10
        await p.exchange.set_leverage(125, ETH)  # the first bracket's most (BTCUSDT's tiers)
        await p.exchange.set_margin_mode("isolated", ETH)
        assert p.account.setting("ETHUSDT").margin_type == "ISOLATED"
        # Setting it again: -4046, which ccxt raises as MarginModeAlreadySet.
        with pytest.raises(ccxt.MarginModeAlreadySet, match="-4046"):
            await p.exchange.set_margin_mode("isolated", ETH)
        with pytest.raises(ccxt.ExchangeError, match="-4059"):
            await p.exchange.set_position_mode(False)


async def test_leverage_above_the_symbols_first_bracket_is_invalid() -> None:
    async with perps() as p:
        listing = p.venue.perps.listing("ETHUSDT")
        assert listing is not None
        listing.brackets[0] = replace(listing.brackets[0], initial_leverage=20)
        await p.exchange.set_leverage(20, ETH)
        with pytest.raises(ccxt.ExchangeError, match="-4028"):
            await p.exchange.set_leverage(21, ETH)


async def test_leverage_tiers_are_the_brackets_with_binances_cum() -> None:
    async with perps() as p:
        tiers = (await p.exchange.fetch_leverage_tiers([ETH]))[ETH]
        # Binance's BTCUSDT brackets (FAQ 360033162192): 0.4% to 50k at 125x, 0.5% to 250k...
        assert [(t["minNotional"], t["maxNotional"]) for t in tiers[:3]] == [
            (0, 50_000), (50_000, 250_000), (250_000, 1_000_000)]  # fmt: skip
        assert [t["maintenanceMarginRate"] for t in tiers[:3]] == [0.004, 0.005, 0.01]
        # cum_3 = 250,000 x (1% - 0.5%) + 50 = 1,300 (the FAQ's worked figure).
        assert tiers[2]["info"]["cum"] == 1300


async def test_a_long_and_a_short_then_reduce_only_exits_realise_their_pnl() -> None:
    async with perps(spec("ETH"), spec("SOL", price=20.0)) as p:
        await p.exchange.create_order(ETH, "market", "buy", 2)
        await p.exchange.create_order(SOL, "market", "sell", 5)
        positions = {x["symbol"]: x for x in await p.exchange.fetch_positions()}
        assert positions[ETH]["side"] == "long"
        assert positions[ETH]["contracts"] == 2
        assert positions[SOL]["side"] == "short"
        assert positions[SOL]["contracts"] == 5
        # The mark moves, the last price does not: unrealised P&L is on the mark.
        listing = p.venue.perps.listing("ETHUSDT")
        assert listing is not None
        listing.mark_bars[10:] = flat("ETH/USDT", 104.0, 0.2)[10:]
        listing.__post_init__()
        p.advance(11)
        position = next(x for x in await p.exchange.fetch_positions() if x["symbol"] == ETH)
        entry = d(position["entryPrice"])
        assert d(position["markPrice"]) == Decimal(104)
        assert d(position["unrealizedPnl"]) == 2 * (Decimal(104) - entry)
        await p.exchange.create_order(ETH, "market", "sell", 2, params={"reduceOnly": True})
        await p.exchange.create_order(SOL, "market", "buy", 5, params={"reduceOnly": True})
        assert await p.exchange.fetch_positions() == []
        for symbol, sign in ((ETH, 1), (SOL, -1)):
            opened, closed = await trades(p, symbol)
            expected = sign * d(closed["amount"]) * (d(closed["price"]) - d(opened["price"]))
            assert d(closed["info"]["realizedPnl"]) == expected
            for trade in (opened, closed):
                fee = (d(trade["price"]) * d(trade["amount"]) * TAKER).quantize(Decimal("1e-8"))
                assert d(trade["fee"]["cost"]) == fee
        incomes = p.account.incomes
        wallet = Decimal(1000) + sum((r.income for r in incomes), Decimal(0))
        assert p.account.wallet == wallet
        balance = await p.exchange.fetch_balance()
        assert d(balance["USDT"]["total"]) == wallet


async def test_reduce_only_that_would_open_or_increase_is_refused_2022() -> None:
    async with perps() as p:
        with pytest.raises(ccxt.ExchangeError, match="-2022"):
            await p.exchange.create_order(ETH, "market", "sell", 1, params={"reduceOnly": True})
        await p.exchange.create_order(ETH, "market", "buy", 1)
        with pytest.raises(ccxt.ExchangeError, match="-2022"):
            await p.exchange.create_order(ETH, "market", "buy", 1, params={"reduceOnly": True})


async def test_below_the_minimum_notional_is_refused_4164_unless_reduce_only() -> None:
    async with perps(spec("ETH", min_notional="20")) as p:
        with pytest.raises(ccxt.ExchangeError, match="-4164"):
            await p.exchange.create_order(ETH, "market", "buy", "0.1")  # ~10 USDT
        await p.exchange.create_order(ETH, "market", "buy", 1)
        # A reduce-only order below the minimum is accepted (Binance: "unless reduce only").
        await p.exchange.create_order(ETH, "market", "sell", "0.1", params={"reduceOnly": True})
        position = (await p.exchange.fetch_positions())[0]
        assert d(position["contracts"]) == Decimal("0.9")


async def test_an_order_needing_more_margin_than_available_is_refused_2019() -> None:
    async with perps(wallet=Decimal(100)) as p:
        await p.exchange.set_leverage(5, ETH)
        # 6 x ~100 / 5x = ~120 USDT of initial margin > 100 available.
        with pytest.raises(ccxt.ExchangeError, match="-2019"):
            await p.exchange.create_order(ETH, "market", "buy", 6)
        await p.exchange.create_order(ETH, "market", "buy", 4)  # ~80 USDT fits
        # Closing needs no margin, even at the limit.
        await p.exchange.create_order(ETH, "market", "sell", 4)


async def test_a_position_over_the_leverages_notional_cap_is_refused_2027() -> None:
    async with perps(wallet=Decimal(10_000)) as p:
        await p.exchange.set_leverage(125, ETH)  # 125x: the first bracket only, up to 50,000
        with pytest.raises(ccxt.ExchangeError, match="-2027"):
            await p.exchange.create_order(ETH, "market", "buy", 501)  # ~50,100 USDT
        await p.exchange.set_leverage(100, ETH)  # 100x reaches the second bracket's 250,000
        await p.exchange.create_order(ETH, "market", "buy", 501)


async def test_a_hedge_mode_position_side_in_one_way_mode_is_refused_4061() -> None:
    async with perps() as p:
        with pytest.raises(ccxt.ExchangeError, match="-4061"):
            await p.exchange.create_order(ETH, "market", "buy", 1, params={"positionSide": "LONG"})
        await p.exchange.set_position_mode(True)
        with pytest.raises(ccxt.ExchangeError, match="-4061"):
            await p.exchange.create_order(ETH, "market", "buy", 1)


async def test_a_stop_goes_to_the_algo_route_and_fills_when_the_last_price_reaches_it() -> None:
    spec_ = spec("ETH")
    spec_.last = [
        *spec_.last[:12],
        *flat("ETH/USDT", 95.0, 0.5)[12:],  # from 12:00 the last price trades at 95
    ]
    async with perps(spec_) as p:
        await p.exchange.create_order(ETH, "market", "buy", 1)
        stop = await p.exchange.create_order(
            ETH, "market", "sell", 1, params={"stopLossPrice": 96, "reduceOnly": True}
        )
        assert p.api.requests[-1].startswith("/fapi/v1/algoOrder")
        assert stop["status"] == "open"
        p.advance(13)
        assert await p.exchange.fetch_positions() == []
        closed = (await trades(p))[-1]
        assert d(closed["price"]) == Decimal(96)
        assert closed["datetime"].startswith((START + 13 * HOUR.duration).strftime("%Y-%m-%dT%H"))


async def test_mark_index_and_premium_klines_are_the_recorded_series() -> None:
    eth = spec("ETH")
    eth.mark = flat("ETH/USDT", 101.0, 0.2)  # the mark 1% over the last price (the index here)
    async with perps(eth) as p:
        mark = await p.exchange.fetch_ohlcv(ETH, "1h", limit=3, params={"price": "mark"})
        index = await p.exchange.fetch_ohlcv(ETH, "1h", limit=3, params={"price": "index"})
        premium = await p.exchange.fetch_ohlcv(ETH, "1h", limit=3, params={"price": "premiumIndex"})
        assert [c[4] for c in mark] == [101.0] * 3
        assert [c[4] for c in index] == [100.0] * 3
        assert [c[4] for c in premium] == pytest.approx([0.01] * 3)
        assert mark[-1][0] == index[-1][0] == int((START + 10 * HOUR.duration).timestamp() * 1000)
        assert p.api.requests[-1].startswith("/fapi/v1/premiumIndexKlines")


async def test_open_orders_and_cancels_plain_and_conditional() -> None:
    async with perps() as p:
        resting = await p.exchange.create_order(ETH, "limit", "buy", 1, 90)
        stop = await p.exchange.create_order(ETH, "market", "buy", 1, params={"triggerPrice": 110})
        assert [o["id"] for o in await p.exchange.fetch_open_orders(ETH)] == [resting["id"]]
        algo = await p.exchange.fetch_open_orders(ETH, params={"trigger": True})
        assert [o["id"] for o in algo] == [stop["id"]]
        assert (await p.exchange.cancel_order(resting["id"], ETH))["status"] == "canceled"
        await p.exchange.cancel_order(stop["id"], ETH, params={"trigger": True})
        assert await p.exchange.fetch_open_orders(ETH) == []
        assert await p.exchange.fetch_open_orders(ETH, params={"trigger": True}) == []
        with pytest.raises(ccxt.ExchangeError, match="-2011"):
            await p.exchange.cancel_order(resting["id"], ETH)


async def test_a_held_answer_times_the_client_out() -> None:
    async with perps() as p:
        p.api.faults.add(Fault("delay", "/fapi/v1/premiumIndex", delay_s=1.5))
        p.exchange.timeout = 500
        with pytest.raises(ccxt.RequestTimeout):
            await p.exchange.fetch_funding_rate(ETH)
        rates = await p.exchange.fetch_funding_rates([ETH])
        assert list(rates) == [ETH]


async def test_a_stale_timestamp_is_refused_1021() -> None:
    async with perps() as p:
        wall = p.api.private.wall_ms
        p.api.private.wall_ms = lambda: wall() + 120_000  # the server's clock 2 minutes ahead
        with pytest.raises(ccxt.InvalidNonce, match="-1021"):
            await p.exchange.fetch_balance()


async def test_an_order_whose_answer_is_lost_is_on_the_venue() -> None:
    fault = Fault("status", "/fapi/v1/order", method="POST", status=503, after=True)
    async with perps() as p:
        p.api.faults.add(fault)
        with pytest.raises(ccxt.OperationFailed, match="-1001"):  # a 503 with Binance's body
            await p.exchange.create_order(ETH, "market", "buy", 1, params={"clientOrderId": "c1"})
        order = await p.exchange.fetch_order("", ETH, params={"clientOrderId": "c1"})
        assert order["status"] == "closed"
        assert order["filled"] == 1
        # The connection dropped after the order took effect: the venue has it.
        p.api.faults.add(Fault("drop", "/fapi/v1/order", method="POST", after=True))
        with pytest.raises(ccxt.NetworkError):
            await p.exchange.create_order(ETH, "market", "buy", 1, params={"clientOrderId": "c2"})
        order = await p.exchange.fetch_order("", ETH, params={"clientOrderId": "c2"})
        assert order["status"] == "closed"
        assert (await p.exchange.fetch_positions())[0]["contracts"] == 2


# --- Aster: Binance's futures API under /fapi/v3 with EIP-712-signed requests ---------------
# ccxt/aster.py (4.5.90): fetch_markets -> fapiPublicGetV3ExchangeInfo (and the spot sapi v3
# one), create_order -> fapiPrivatePostV3Order, fetch_positions -> V3PositionRisk after
# V3LeverageBracket, fetch_balance -> V3Balance; `sign`: user, signer, nonce, EIP-712 signature.
ASTER_KEY = "0x" + "11" * 32
OTHER_KEY = "0x" + "22" * 32


def aster(p: Perps, private_key: str, **options: object) -> ccxt.aster:
    client = ccxt.aster(
        {"privateKey": private_key, "timeout": 3000,
         "options": {"defaultType": "swap", "builderFee": False, **options}}
    )  # fmt: skip
    point_at(client, p.base_url)
    return client


async def test_aster_trades_through_the_v3_alias_with_checked_signatures() -> None:
    async with perps() as p:
        client = aster(p, ASTER_KEY)
        user = client.eth_get_address_from_private_key(ASTER_KEY).lower()
        p.api.private.aster_users[user] = p.exchange.apiKey
        try:
            await client.load_markets()
            assert ETH in client.markets
            await client.create_order(ETH, "market", "buy", 1)
            (position,) = await client.fetch_positions()
            assert position["contracts"] == 1
            assert position["side"] == "long"
            assert any(r.startswith("/fapi/v3/order") for r in p.api.requests)
            assert d((await client.fetch_balance())["USDT"]["total"]) == p.account.wallet
        finally:
            await client.close()
        # A request signed by another key, in the registered user's name, is refused.
        forger = aster(p, OTHER_KEY, cachedWalletAddress=user,
                       privateKeyHashForCachedWalletAddress=client.hash(
                           client.encode(OTHER_KEY), "keccak", "hex"))  # fmt: skip
        try:
            await forger.load_markets()
            with pytest.raises(ccxt.ExchangeError, match="-1022"):
                await forger.fetch_positions()
        finally:
            await forger.close()
