"""Perp positions as the venue reports them, and the sizes the broker trades against.

- `VenuePosition`: one row of ccxt's `fetch_positions` (binanceusdm and aster: Position
  Information V3), read from the venue's own text in `info` (`positionAmt` signed, `entryPrice`,
  `markPrice`, `unRealizedProfit`, `liquidationPrice`, `isolatedMargin`, `notional`,
  `positionInitialMargin`). V3 names no leverage: it is |notional| / positionInitialMargin
  (Binance's initial margin is notional / leverage on the mark), rounded to a whole number.
- `Sizes`: each symbol's signed size as the broker last knew it (the venue's at start-up and
  at every reconciliation, moved by every fill booked since). It decides `reduceOnly`: an
  order against the position that is no larger than it only reduces or closes, and is sent
  reduce-only, so the venue refuses it (-2022) rather than open the other way if the
  position is gone meanwhile. An order larger than the position reverses it and goes without.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from trader.domain import ZERO, Fill, Order, exact
from trader.domain.side import Side


@dataclass(frozen=True)
class VenuePosition:
    symbol: str  # ccxt's unified symbol
    size: Decimal  # signed: positive long, negative short
    entry: Decimal
    mark: Decimal | None
    unrealised: Decimal | None
    liquidation: Decimal | None  # None where the venue shows 0 ("--": cannot be liquidated)
    margin_mode: str | None  # "isolated" | "cross"
    leverage: int | None
    side_field: str  # positionSide: BOTH in one-way mode
    margin: Decimal | None = None  # isolatedWallet (isolated), positionInitialMargin (cross)

    @property
    def side(self) -> str:
        return "long" if self.size > 0 else "short"

    def disagrees(self, leverage: int, margin_mode: str) -> str | None:
        """Why this position is not as start-up set the account, None when it is."""
        if self.side_field not in ("BOTH", ""):
            return f"{self.symbol}: a {self.side_field} position: hedge mode, not one-way"
        if self.margin_mode is not None and self.margin_mode != margin_mode:
            return (
                f"{self.symbol}: the open position is {self.margin_mode} margin, "
                f"broker.margin_mode is {margin_mode}"
            )
        if self.leverage is not None and self.leverage != leverage:
            return f"{self.symbol}: the open position is at {self.leverage}x, not {leverage}x"
        return None


def _decimal(info: Mapping[str, Any], key: str) -> Decimal | None:
    value = info.get(key)
    if value is None or value == "":
        return None
    return Decimal(str(value))


def read_position(raw: Mapping[str, Any]) -> VenuePosition | None:
    """One ccxt position; None for an empty row (no size)."""
    info = raw.get("info") or {}
    size = _decimal(info, "positionAmt")
    if size is None:  # a client that keeps no `info`: ccxt's unified fields
        contracts = Decimal(str(raw.get("contracts") or 0))
        size = contracts if raw.get("side") == "long" else -contracts
    if size == 0:
        return None
    liquidation = _decimal(info, "liquidationPrice")
    notional, initial = _decimal(info, "notional"), _decimal(info, "positionInitialMargin")
    leverage: int | None = None
    if notional is not None and initial:
        leverage = int((abs(notional) / initial).to_integral_value(ROUND_HALF_EVEN))
    elif raw.get("leverage"):
        leverage = int(raw["leverage"])
    isolated = _decimal(info, "isolatedMargin")
    mode = raw.get("marginMode")
    if mode is None and isolated is not None:
        mode = "cross" if isolated == 0 else "isolated"
    return VenuePosition(
        symbol=str(raw.get("symbol")),
        size=size,
        entry=_decimal(info, "entryPrice") or Decimal(str(raw.get("entryPrice") or 0)),
        mark=_decimal(info, "markPrice"),
        unrealised=_decimal(info, "unRealizedProfit"),
        liquidation=liquidation if liquidation else None,
        margin_mode=str(mode) if mode else None,
        leverage=leverage,
        side_field=str(info.get("positionSide") or ""),
        margin=_decimal(info, "isolatedWallet") if mode == "isolated" else initial,
    )


def read_positions(raw: Iterable[Mapping[str, Any]]) -> dict[str, VenuePosition]:
    """The venue's open positions by symbol."""
    positions = (read_position(row) for row in raw or ())
    return {p.symbol: p for p in positions if p is not None}


class Sizes:
    """Each symbol's signed position size as the broker knows it (see the module's doc)."""

    def __init__(self) -> None:
        self._size: dict[str, Decimal] = {}

    def reset(self, positions: Mapping[str, VenuePosition]) -> None:
        self._size = {symbol: p.size for symbol, p in positions.items()}

    def book(self, fills: Iterable[Fill]) -> None:
        for fill in fills:
            with exact():
                self._size[fill.symbol] = self.size(fill.symbol) + fill.side.sign * fill.amount

    def size(self, symbol: str) -> Decimal:
        return self._size.get(symbol, ZERO)

    def reduces(self, order: Order) -> bool:
        """Whether `order` only reduces or closes the position (it goes reduce-only)."""
        held = self.size(order.symbol)
        against = (held > 0 and order.side is Side.SELL) or (held < 0 and order.side is Side.BUY)
        return against and order.amount <= abs(held)
