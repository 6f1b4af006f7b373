"""What Alpaca checks before it takes an order, and when it works it: the emulator's order
admission (the venue core then checks and locks balances).

Sources, each rule beside its own:
- Wash trades: Alpaca's "User Protection" page (docs.alpaca.markets/docs/user-protection,
  "Preventing Wash Trades") rejects an order that could fill against an open order of the
  same account on the same symbol: a market order against any open order of the other side,
  a buy limit at or above an open sell limit, a sell limit at or below an open buy limit
  (its table, as its users quote it). The page says HTTP 403; the recorded answer of
  2024-01-04 (github.com/Petersoj/alpaca-java issue #145) is HTTP 422 with code 42210000
  and "potential wash trade detected. use complex orders": we answer that recorded body,
  as the task's brief prescribes. The page says the rule applies to crypto too.
- Extended hours: only limit orders with time_in_force day (all others "rejected with an
  error"), no fractional shares ("Fractional shares and orders with notional sizes are not
  available during extended hours trading"): alpacahq/alpaca-docs content/trading/orders.md.
- Shorts: a margin account sells short a stock Alpaca lists as shortable and easy to borrow,
  in whole shares; a cash account is refused with the recorded 403 "account is not allowed
  to short" (alpaca-py tests/trading/trading_client/test_position_routes.py); crypto is
  never shorted (the venue refuses a sale of more than is held, in the recorded
  "insufficient qty available" shape of the same file).
- The pattern-day-trader rule judges `last_equity` ("PDT protection ... equity as of the
  previous trading day", docs User Protection): a fourth day trade in five sessions of an
  account under $25,000 is refused 403, code 40310100.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from trader.emulator.alpaca_account import PDT_EQUITY, AlpacaAccounts
from trader.emulator.alpaca_history import Refused
from trader.emulator.alpaca_hours import Timing, timing
from trader.emulator.alpaca_wire import alpaca_symbol, text
from trader.emulator.market import Instrument
from trader.emulator.sessions import NEW_YORK
from trader.emulator.venue import Account

WASH_TRADE = "potential wash trade detected. use complex orders"
EXTENDED_LIMIT_DAY = "extended hours order must be DAY limit orders"
PDT_DAY_TRADES = 3  # day trades already made in five sessions before the refused fourth


class RefusedWith(Refused):
    """A refusal whose body carries fields beside code and message (Alpaca's 403 for a
    sale of more than is available names the symbol and the quantities)."""

    def __init__(self, status: int, code: int, message: str, extra: dict[str, Any]) -> None:
        super().__init__(status, code, message)
        self.extra = extra


@dataclass(frozen=True)
class Ask:
    """An order as it was asked for."""

    instrument: Instrument
    side: str  # BUY | SELL
    type: str  # MARKET | LIMIT
    tif: str  # DAY | GTC | IOC | FOK
    qty: Decimal
    price: Decimal | None
    extended: bool

    @property
    def stock(self) -> bool:
        return self.instrument.asset_class == "us_equity"

    @property
    def whole(self) -> bool:
        return self.qty == self.qty.to_integral_value()


@dataclass
class OrderRules:
    accounts: AlpacaAccounts

    def admit(self, account: Account, ask: Ask, now: datetime) -> Timing:
        """Refuses (raises Refused) what Alpaca refuses; says when the order works."""
        self._form(ask)
        self._wash_trade(account, ask)
        if not ask.stock:
            return Timing(None, None)
        self._short(account, ask)
        self._pattern_day_trader(account, ask, now)
        self._buying_power(account, ask, now)
        sessions = self.accounts.sessions
        when = None
        if sessions is not None:
            when = timing(sessions, now, extended=ask.extended, day=ask.tif == "DAY")
        if when is None:
            raise Refused(422, 40010001, "no trading session is known for this order")
        return when

    def intent(self, account: Account, ask: Ask) -> str:
        """Alpaca's `position_intent` of a plain order: opening or closing what is held."""
        held = account.balance(ask.instrument.base).total
        closing = held < 0 if ask.side == "BUY" else held > 0
        return f"{ask.side.lower()}_to_{'close' if closing else 'open'}"

    def _form(self, ask: Ask) -> None:
        name = alpaca_symbol(ask.instrument)
        if not ask.instrument.tradable:
            raise Refused(422, 40010001, f"asset {name} is not tradable")
        if ask.tif not in ({"DAY", "GTC", "IOC", "FOK"} if ask.stock else {"GTC", "IOC"}):
            raise Refused(422, 40010001, "invalid time_in_force")
        if not ask.whole:
            if not ask.instrument.fractionable:
                raise Refused(422, 40310000, "fractional orders are not supported for this asset")
            if ask.stock and ask.tif != "DAY":
                raise Refused(422, 40010001, "fractional orders must be DAY orders")
        if ask.extended and ask.stock:
            if ask.type != "LIMIT" or ask.tif != "DAY":
                raise Refused(422, 42210000, EXTENDED_LIMIT_DAY)
            if not ask.whole:
                raise Refused(422, 42210000, "fractional orders are not accepted in extended hours")

    def _wash_trade(self, account: Account, ask: Ask) -> None:
        for order in account.orders.values():
            if not order.is_open or order.symbol != ask.instrument.venue_id:
                continue
            if order.side == ask.side:
                continue
            if ask.price is None or order.price is None:
                raise Refused(422, 42210000, WASH_TRADE)
            buy, sell = (ask.price, order.price) if ask.side == "BUY" else (order.price, ask.price)
            if buy >= sell:
                raise Refused(422, 42210000, WASH_TRADE)

    def _short(self, account: Account, ask: Ask) -> None:
        balance = account.balance(ask.instrument.base)
        if ask.side != "SELL" or ask.qty <= balance.free:
            return
        if not self.accounts.margin:
            raise Refused(403, 40310000, "account is not allowed to short")
        instrument = ask.instrument
        if not (instrument.shortable and instrument.easy_to_borrow):
            raise sale_refusal(instrument, account, ask.qty)  # Alpaca lends none of it
        if not ask.whole:
            raise Refused(403, 40310000, "fractional orders cannot be sold short")

    def _pattern_day_trader(self, account: Account, ask: Ask, now: datetime) -> None:
        day = now.astimezone(NEW_YORK).date()
        sides = {
            t.is_buyer for t in account.trades
            if t.symbol == ask.instrument.venue_id and t.time.astimezone(NEW_YORK).date() == day
        }  # fmt: skip
        if (ask.side == "SELL") not in sides:  # no trade of the other side today
            return
        last_equity = self.accounts.value(account, self.accounts.last_close(now)).equity
        if last_equity < PDT_EQUITY and self.accounts.day_trades(account, now) >= PDT_DAY_TRADES:
            raise Refused(403, 40310100, "trade denied due to pattern day trading protection")

    def _buying_power(self, account: Account, ask: Ask, now: datetime) -> None:
        need = self.accounts.opening(account, ask.instrument, ask.side, ask.qty, ask.price)
        if need and need > Decimal(self.accounts.powers(account, now)["buying_power"]):
            raise Refused(403, 40310000, "insufficient buying power")


def sale_refusal(instrument: Instrument, account: Account, qty: Decimal) -> RefusedWith:
    """The venue found less to sell than asked: Alpaca's recorded 403."""
    balance = account.balance(instrument.base)
    message = (
        f"insufficient qty available for order (requested: {text(qty)}, available: "
        f"{text(max(balance.free, Decimal(0)))})"
    )
    return RefusedWith(
        403, 40310000, message, _available(instrument, qty, balance.free, balance.locked)
    )


def _available(
    instrument: Instrument, qty: Decimal, free: Decimal, locked: Decimal
) -> dict[str, Any]:
    del qty  # named in the message only
    return {
        "available": text(max(free, Decimal(0))),
        "existing_qty": text(free + locked),
        "held_for_orders": text(locked),
        "symbol": alpaca_symbol(instrument),
    }
