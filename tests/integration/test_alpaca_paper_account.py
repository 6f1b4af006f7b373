"""The Alpaca emulator's default account is a paper margin account as Alpaca opens one, over
its HTTP API: $100,000, buying power 4x/2x, shorts of stocks Alpaca lends, `last_equity` at
the previous session's close, the pattern-day-trader refusal judged on it; a cash account
is the option. The market is tests/integration/alpaca_paper.py's (recorded MSFT, AAPL and
SOL/USDT paths)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from tests.integration.alpaca_paper import KEY, NEW_YORK, TUESDAY, Paper, paper

pytestmark = pytest.mark.integration


def _value(p: Paper, symbol: str, qty: Decimal, at: datetime) -> Decimal:
    return qty * p.last_close(symbol, at)


async def test_a_new_paper_account_is_a_100k_margin_account_with_day_trading_power():
    """Alpaca's paper accounts open with $100,000 on margin; its recorded account (alpaca-py
    tests/trading/trading_client/test_account_routes.py) has multiplier "4" above $25,000
    and daytrading_buying_power = 4 x (last_equity - last_maintenance_margin); Reg T power
    is 2 x (equity - initial_margin) (alpacahq/alpaca-docs account-v2.yaml)."""
    async with paper() as p:
        _, account = await p.get("/v2/account")
    assert (account["cash"], account["equity"], account["last_equity"]) == ("100000",) * 3
    assert account["multiplier"] == "4"
    assert account["shorting_enabled"] is True
    assert account["daytrading_buying_power"] == account["buying_power"] == "400000"
    assert account["regt_buying_power"] == "200000"
    assert account["non_marginable_buying_power"] == "100000"


async def test_last_equity_is_the_equity_at_the_previous_close_not_now():
    """`last_equity`: "Equity as of previous trading day at 16:00:00 ET" (alpacahq/alpaca-docs
    data/webapi/entities/account-v2.yaml). Bought on Tuesday, the stock moves: on Tuesday
    last_equity is still Monday's $100,000; on Wednesday it is Tuesday's close, valued at
    the recorded bar closed by then, while equity follows the price."""
    async with paper() as p:
        status, bought = await p.order("MSFT", "buy", "100")
        assert status == 200, bought
        assert bought["status"] == "filled", bought
        cash = Decimal(100_000) - Decimal(bought["filled_avg_price"]) * 100
        _, tuesday = await p.get("/v2/account")
        p.clock.advance_to(TUESDAY + timedelta(days=1, hours=2))
        _, wednesday = await p.get("/v2/account")
        tuesday_close = TUESDAY.replace(hour=16)
        now = p.clock.now()
    assert Decimal(tuesday["last_equity"]) == 100_000
    assert Decimal(tuesday["cash"]) == cash
    expected = cash + _value(p, "MSFT", Decimal(100), tuesday_close)
    assert Decimal(wednesday["last_equity"]) == expected
    assert Decimal(wednesday["equity"]) == cash + _value(p, "MSFT", Decimal(100), now)
    assert wednesday["equity"] != wednesday["last_equity"]


async def test_a_short_of_a_stock_alpaca_lends_works_and_shows_as_a_short():
    """A margin account sells short a stock Alpaca lists as shortable and easy to borrow
    (docs, Margin and Short Selling): the position has `side` "short" and a negative qty and
    market value, the account a negative `short_market_value` and the proceeds in cash (less
    the regulatory fees of a sale); a buy covers it."""
    async with paper() as p:
        status, sold = await p.order("MSFT", "sell", "20")
        assert status == 200, sold
        assert sold["status"] == "filled", sold
        assert sold["position_intent"] == "sell_to_open"
        _, positions = await p.get("/v2/positions")
        _, account = await p.get("/v2/account")
        proceeds = Decimal(sold["filled_avg_price"]) * 20
        fees = sum(t.commission for t in p.venue.accounts[KEY].trades)  # regulatory, on sales
        status, covered = await p.order("MSFT", "buy", "20")
        _, after = await p.get("/v2/positions")
        price = p.last_close("MSFT")
    [short] = positions
    assert (short["symbol"], short["side"], short["qty"]) == ("MSFT", "short", "-20")
    assert Decimal(short["market_value"]) == -20 * price
    assert Decimal(account["short_market_value"]) == -20 * price
    assert Decimal(account["cash"]) == 100_000 + proceeds - fees
    assert status == 200
    assert covered["position_intent"] == "buy_to_close"
    assert after == []


async def test_shorts_alpaca_does_not_take_are_refused_with_its_words():
    """Refused: a fraction of a share short, a stock Alpaca does not lend, crypto (never
    shorted: "insufficient qty available", alpaca-py's recorded 403 in
    test_position_routes.py), and any short in a cash account ("account is not allowed to
    short", the same file). A cash account has multiplier "1" and buying power = cash."""
    async with paper() as p:
        fraction = await p.order("MSFT", "sell", "0.5")
        unlent = await p.order("AAPL", "sell", "1")
        coin = await p.order("BTC/USD", "sell", "1")
    async with paper(account_type="cash") as p:
        cash_short = await p.order("MSFT", "sell", "1")
        _, account = await p.get("/v2/account")
    assert fraction == (
        403,
        {"code": 40310000, "message": "fractional orders cannot be sold short"},
    )
    for (status, body), symbol in ((unlent, "AAPL"), (coin, "BTC/USD")):
        assert status == 403, body
        assert body["code"] == 40310000, body
        assert body["message"].startswith("insufficient qty available for order (requested: 1")
        assert (body["symbol"], body["available"]) == (symbol, "0")
    assert cash_short == (403, {"code": 40310000, "message": "account is not allowed to short"})
    assert (account["multiplier"], account["shorting_enabled"]) == ("1", False)
    assert account["buying_power"] == account["cash"] == "100000"


async def _day_trade(p: Paper) -> None:
    for side in ("buy", "sell"):
        status, done = await p.order("MSFT", side, "1")
        assert status == 200, done
        assert done["status"] == "filled", done


async def test_the_pattern_day_trader_refusal_judges_last_equity_not_equity():
    """Alpaca's PDT protection refuses a fourth day trade in five sessions of an account
    under $25,000 (docs, User Protection), judged on the previous close's equity
    (`last_equity`). Three day trades Tuesday to Thursday; on Friday crypto fees take the
    equity under $25,000 while last_equity is above: the fourth day trade is taken. On
    Monday last_equity (Friday's close) is under $25,000: the next one is refused 403,
    code 40310100."""
    async with paper(cash=Decimal(25_150)) as p:
        for day in range(3):
            p.clock.advance_to(TUESDAY + timedelta(days=day))
            await _day_trade(p)
        p.clock.advance_to(TUESDAY + timedelta(days=3))  # Friday
        for _ in range(40):  # round trips in crypto, each paying Alpaca's fees
            _, account = await p.get("/v2/account")
            if Decimal(account["equity"]) < 25_000:
                break
            await p.order("BTC/USD", "buy", "500")
            held = p.venue.accounts[KEY].balance("BTC").free
            await p.order("BTC/USD", "sell", str(held))
        assert Decimal(account["equity"]) < 25_000 <= Decimal(account["last_equity"]), account
        assert account["daytrade_count"] == 3
        await _day_trade(p)  # the fourth: last_equity is above $25,000
        p.clock.advance_to(datetime(2025, 3, 10, 11, 5, tzinfo=NEW_YORK))  # Monday
        _, monday = await p.get("/v2/account")
        assert Decimal(monday["last_equity"]) < 25_000, monday
        assert (await p.order("MSFT", "buy", "1"))[0] == 200
        refused = await p.order("MSFT", "sell", "1")
    assert refused == (
        403,
        {"code": 40310100, "message": "trade denied due to pattern day trading protection"},
    )
