"""Alpaca's cash is a decimal string (`/v2/account` "cash", as in alpaca-py's recorded answer
tests/data/alpaca/recorded/account.json). After fractional-share fills on a large account it
has more digits than a float keeps (16): the balance the reconciliation compares, exactly,
must be the venue's string, not a float of it. A live daemon with $1,000,000 and fractional
shares halted on a 5E-11 "difference" when the adapter went through float."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import SecretStr

from tests.integration.alpaca_paper import KEY, SECRET, paper
from tests.integration.alpaca_setup import alpaca_settings
from trader.broker.ccxt_orders import balance_totals
from trader.market.alpaca.feed import alpaca_exchange

pytestmark = pytest.mark.integration


async def test_cash_with_more_digits_than_a_float_keeps_is_read_exactly():
    async with paper(cash=Decimal("1000000")) as venue:
        status, order = await venue.order("MSFT", "buy", "0.123456789")
        assert status == 200, order
        status, account = await venue.get("/v2/account")
        cash = Decimal(account["cash"])
        assert len(cash.as_tuple().digits) > 16, cash  # a float could not hold it
        settings = alpaca_settings(venue.server.base_url, 5)
        keys = settings.alpaca.model_copy(
            update={"key_id": SecretStr(KEY), "secret_key": SecretStr(SECRET)}
        )
        exchange = alpaca_exchange(settings.model_copy(update={"alpaca": keys}), venue.clock)
        try:
            read = balance_totals(await exchange.fetch_balance())
        finally:
            await exchange.close()
        assert read["USD"] == cash
        assert read["MSFT"] == Decimal("0.123456789")
