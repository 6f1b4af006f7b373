"""The Alpaca emulator's account as Alpaca's paper accounts are: a margin account by default
(`account_type="cash"` for a cash account), valued from the venue's balances and the replayed
prices, with the buying powers, margins and positions `/v2/account` and `/v2/positions` show.

Alpaca's rules as its account documentation states them (alpacahq/alpaca-docs,
data/webapi/entities/account-v2.yaml, and the example alpaca-py 0.44 records in
tests/trading/trading_client/test_account_routes.py):

- `multiplier` "1" for a cash account or under $2,000 of equity, "2" (Reg T) from $2,000,
  "4" (day-trading buying power) from $25,000; the equity judged is `last_equity`, the
  equity at the previous trading day's 16:00 ET close. (Alpaca's text reserves 4 for
  flagged pattern day traders; its recorded account shows 4 on an unflagged $103k account
  with `daytrading_buying_power` = 4 x (last_equity - last_maintenance_margin): we follow
  the recorded answer, as the task's brief does.)
- `buying_power`: 4 x (last_equity - last_maintenance_margin) when the multiplier is 4,
  2 x max(equity - initial_margin, 0) when 2, the cash when 1; less what open orders that
  open positions hold ("your available buying power is reduced by your existing open buy
  long and sell short orders", docs Orders at Alpaca, Buying Power).
- Crypto is never collateral (it counts in full in the margins) and is bought with cash
  only: `non_marginable_buying_power` is the cash not held for orders.
- Reg T margins: 50% initial, 30% maintenance (the asset's `maintenance_margin_requirement`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, Literal

from trader.domain import decimal_from_float
from trader.emulator.alpaca_wire import MAINTENANCE_PERCENT, asset_id, text
from trader.emulator.market import Instrument
from trader.emulator.sessions import NEW_YORK, Sessions
from trader.emulator.venue import Account, Venue, VenueOrder, VenueTrade

AccountType = Literal["margin", "cash"]
PDT_EQUITY = Decimal(25_000)
REG_T_EQUITY = Decimal(2_000)
INITIAL = Decimal("0.5")
MAINTENANCE = Decimal(MAINTENANCE_PERCENT) / 100
SHORT_COLLAR = Decimal("1.03")  # a short's order value: 3% above the ask (docs, Buying Power)
CLOSE = time(16)  # last_equity's moment, New York time
_VALUES = (
    "avg_entry_price", "market_value", "cost_basis", "unrealized_pl", "unrealized_plpc",
    "unrealized_intraday_pl", "unrealized_intraday_plpc", "current_price", "lastday_price",
    "change_today",
)  # fmt: skip


@dataclass(frozen=True)
class Valuation:
    cash: Decimal
    long: Decimal  # market value of long positions
    short: Decimal  # market value of short positions (negative)
    initial: Decimal  # Reg T initial margin
    maintenance: Decimal

    @property
    def equity(self) -> Decimal:
        return self.cash + self.long + self.short


@dataclass
class AlpacaAccounts:
    venue: Venue
    sessions: Sessions | None
    account_type: AccountType = "margin"

    @property
    def margin(self) -> bool:
        return self.account_type == "margin"

    def may_borrow(self, account: Account, instrument: Instrument, side: str) -> bool:
        """The venue's hook: a margin account buys stocks on margin and sells short what
        Alpaca lends (shortable and easy to borrow); crypto never (cash only, no shorts)."""
        if not self.margin or instrument.asset_class != "us_equity":
            return False
        return side == "BUY" or (instrument.shortable and instrument.easy_to_borrow)

    # --- values -------------------------------------------------------------------------

    def price(self, instrument: Instrument, at: datetime | None = None) -> Decimal | None:
        """The close of the last bar closed by `at` (by now when None)."""
        if at is None:
            return self.venue.market.last_price(instrument.venue_id)
        market = self.venue.market
        bars = market.bars(instrument.venue_id, market.timeframe(instrument.venue_id))
        closed = [bar for bar in bars if bar.end <= at]
        return decimal_from_float(closed[-1].close) if closed else None

    def holdings(self, account: Account, at: datetime | None = None) -> dict[str, Decimal]:
        """Each asset's total, now or as it stood at `at` (the trades since undone)."""
        held = {asset: b.total for asset, b in account.balances.items()}
        if at is not None:
            for trade in account.trades:
                if trade.time > at:
                    for asset, change in _changes(self.venue.instrument(trade.symbol), trade):
                        held[asset] = held.get(asset, Decimal(0)) - change
        return held

    def value(self, account: Account, at: datetime | None = None) -> Valuation:
        held = self.holdings(account, at)
        long = short = initial = maintenance = Decimal(0)
        for instrument in self.venue.market.instruments:
            qty = held.get(instrument.base, Decimal(0))
            price = self.price(instrument, at)
            if not qty or price is None or instrument.quote != "USD":
                continue
            worth = qty * price
            long, short = (long + worth, short) if worth > 0 else (long, short + worth)
            stock = instrument.asset_class == "us_equity"
            initial += abs(worth) * (INITIAL if stock else 1)
            maintenance += abs(worth) * (MAINTENANCE if stock else 1)
        return Valuation(held.get("USD", Decimal(0)), long, short, initial, maintenance)

    def last_close(self, now: datetime) -> datetime:
        """16:00 New York time of the trading day before today's (weekdays when no calendar
        is known: a crypto-only account)."""
        today = now.astimezone(NEW_YORK).date()
        if self.sessions is not None:
            days = self.sessions.days(today - timedelta(days=14), today - timedelta(days=1))
            if days:
                return days[-1][2]
        day = today - timedelta(days=1)
        while day.weekday() >= 5:
            day -= timedelta(days=1)
        return datetime.combine(day, CLOSE, NEW_YORK)

    def multiplier(self, last_equity: Decimal) -> int:
        if not self.margin or last_equity < REG_T_EQUITY:
            return 1
        return 4 if last_equity >= PDT_EQUITY else 2

    # --- buying power -------------------------------------------------------------------

    def opening_value(self, account: Account, order: VenueOrder) -> Decimal:
        """What an open stock order that opens (or adds to) a position holds of the buying
        power: a buy's price, a short's max(limit, 103% of the ask); crypto holds cash,
        which the venue locks itself."""
        instrument = self.venue.instrument(order.symbol)
        return self.opening(account, instrument, order.side, order.remaining, order.price)

    def opening(
        self,
        account: Account,
        instrument: Instrument,
        side: str,
        qty: Decimal,
        limit: Decimal | None,
    ) -> Decimal:
        if instrument.asset_class != "us_equity":
            return Decimal(0)
        held = account.balance(instrument.base).total
        opens = qty - max(-held, Decimal(0)) if side == "BUY" else qty - max(held, Decimal(0))
        book = self.venue.market.top_of_book(instrument.venue_id)
        if opens <= 0 or book is None:
            return Decimal(0)
        if side == "BUY":
            return opens * (limit if limit is not None else book[1])
        return opens * max(limit or Decimal(0), book[1] * SHORT_COLLAR)

    def powers(self, account: Account, now: datetime) -> dict[str, Decimal | int]:
        """Alpaca's buying powers and the figures they rest on."""
        current, last = self.value(account), self.value(account, self.last_close(now))
        multiplier = self.multiplier(last.equity)
        held = sum(
            (self.opening_value(account, o) for o in account.orders.values() if o.is_open),
            Decimal(0),
        )
        cash_free = account.balance("USD").free
        regt = max(current.equity - current.initial, Decimal(0)) * 2 if self.margin else cash_free
        daytrading = max(last.equity - last.maintenance, Decimal(0)) * 4 if multiplier == 4 else 0
        buying = {4: Decimal(daytrading), 2: regt}.get(multiplier, cash_free)
        floor = Decimal(0)
        return {
            "multiplier": multiplier,
            "buying_power": max(buying - held, floor),
            "regt_buying_power": max(regt - held, floor),
            "daytrading_buying_power": max(daytrading - held, floor) if daytrading else floor,
            "non_marginable_buying_power": max(cash_free, floor),
            "last_equity": last.equity,
            "last_maintenance_margin": last.maintenance,
        }

    # --- answers ------------------------------------------------------------------------

    def account_json(self, account: Account, now: datetime, day_trades: int) -> dict[str, Any]:
        """`/v2/account` with the fields Alpaca's recorded answer has
        (tests/data/alpaca/recorded/account.json)."""
        value, p = self.value(account), self.powers(account, now)
        equity = value.equity
        return {
            "id": "00000000-0000-4000-a000-000000000001", "account_number": "PA0EMU000001",
            "status": "ACTIVE", "crypto_status": "ACTIVE", "currency": "USD",
            "cash": text(value.cash), "buying_power": text(_d(p["buying_power"])),
            "regt_buying_power": text(_d(p["regt_buying_power"])),
            "daytrading_buying_power": text(_d(p["daytrading_buying_power"])),
            "non_marginable_buying_power": text(_d(p["non_marginable_buying_power"])),
            "options_buying_power": "0", "options_approved_level": "0",
            "options_trading_level": "0", "accrued_fees": "0",
            "equity": text(equity), "last_equity": text(_d(p["last_equity"])),
            "portfolio_value": text(equity), "long_market_value": text(value.long),
            "short_market_value": text(value.short), "initial_margin": text(value.initial),
            "maintenance_margin": text(value.maintenance),
            "last_maintenance_margin": text(_d(p["last_maintenance_margin"])), "sma": "0",
            "multiplier": str(p["multiplier"]), "pattern_day_trader": False,
            "daytrade_count": day_trades, "trading_blocked": False, "transfers_blocked": False,
            "account_blocked": False, "trade_suspended_by_user": False,
            "shorting_enabled": self.margin, "created_at": "2020-01-01T00:00:00Z",
        }  # fmt: skip

    def positions_json(self, account: Account, now: datetime) -> list[dict[str, Any]]:
        """`/v2/positions` in the shape of Alpaca's recorded position
        (tests/data/alpaca/recorded/position_long.json); a short has a negative `qty` and
        `market_value` and `side` "short". An asset no pair lists (USDT spent on USDT
        pairs) is a crypto position without a price."""
        out = []
        listed = {i.base: i for i in self.venue.market.instruments}
        for asset, balance in sorted(account.balances.items()):
            if asset == "USD" or balance.total == 0:
                continue
            instrument = listed.get(asset)
            out.append(self._position(account, asset, instrument, balance.free, now))
        return out

    def _position(
        self,
        account: Account,
        asset: str,
        instrument: Instrument | None,
        free: Decimal,
        now: datetime,
    ) -> dict[str, Any]:
        qty = account.balance(asset).total
        stock = instrument is not None and instrument.asset_class == "us_equity"
        head = {
            "asset_id": asset_id(instrument) if instrument else asset,
            "symbol": asset if stock else f"{asset}USD",
            "exchange": "NASDAQ" if stock else "CRYPTO",
            "asset_class": "us_equity" if stock else "crypto",
            "qty": text(qty), "qty_available": text(free if qty > 0 else qty),
            "side": "long" if qty > 0 else "short",
        }  # fmt: skip
        price = self.price(instrument) if instrument else None
        if instrument is None or price is None:
            return head | dict.fromkeys(_VALUES)
        entry = average_entry(account.trades, instrument.venue_id)
        lastday = self.price(instrument, self.last_close(now)) or price
        basis, worth = qty * entry, qty * price
        pl, today = worth - basis, qty * (price - lastday)
        return head | {
            "avg_entry_price": text(entry), "market_value": text(worth),
            "cost_basis": text(basis), "unrealized_pl": text(pl),
            "unrealized_plpc": text(_ratio(pl, basis)), "unrealized_intraday_pl": text(today),
            "unrealized_intraday_plpc": text(_ratio(today, qty * lastday)),
            "current_price": text(price), "lastday_price": text(lastday),
            "change_today": text(_ratio(price - lastday, lastday)),
        }  # fmt: skip

    def day_trades(self, account: Account, now: datetime) -> int:
        """Stocks bought and sold on one session's date, over the last five sessions
        (extended hours included, as Alpaca's PDT rule counts them)."""
        if self.sessions is None:
            return 0
        today = now.astimezone(NEW_YORK).date()
        dates = [d for d, _, _ in self.sessions.days(today - timedelta(days=30), today)]
        recent = set(dates[-5:])
        sides: dict[tuple[date, str], set[bool]] = {}
        for trade in account.trades:
            instrument = self.venue.instrument(trade.symbol)
            day = trade.time.astimezone(NEW_YORK).date()
            if instrument.asset_class == "us_equity" and day in recent:
                sides.setdefault((day, trade.symbol), set()).add(trade.is_buyer)
        return sum(1 for both in sides.values() if len(both) == 2)


def average_entry(trades: list[VenueTrade], venue_id: str) -> Decimal:
    """The average price of the position the trades leave (a side that closes part of it
    keeps the average; one that crosses zero starts a new one at its price)."""
    held, average = Decimal(0), Decimal(0)
    for trade in trades:
        if trade.symbol != venue_id:
            continue
        qty = trade.qty if trade.is_buyer else -trade.qty
        if held == 0 or (held > 0) == (qty > 0):
            average = (average * abs(held) + trade.price * abs(qty)) / (abs(held) + abs(qty))
        elif abs(qty) > abs(held):
            average = trade.price
        held += qty
        if held == 0:
            average = Decimal(0)
    return average


def _changes(instrument: Instrument, trade: VenueTrade) -> list[tuple[str, Decimal]]:
    """What one trade did to each asset's total (the venue's `_trade`, as amounts)."""
    fee_in_base = trade.commission if trade.commission_asset == instrument.base else 0
    fee_in_quote = trade.commission if trade.commission_asset == instrument.quote else 0
    sign = 1 if trade.is_buyer else -1
    return [
        (instrument.base, sign * trade.qty - fee_in_base),
        (instrument.quote, -sign * trade.quote_qty - fee_in_quote),
    ]


def _ratio(part: Decimal, whole: Decimal) -> Decimal:
    return (
        (part / abs(whole)).quantize(Decimal("0.00000001"), ROUND_HALF_EVEN)
        if whole
        else Decimal(0)
    )


def _d(value: Decimal | int) -> Decimal:
    return Decimal(value)
