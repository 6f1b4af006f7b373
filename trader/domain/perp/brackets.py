"""A symbol's leverage brackets: maintenance margin rate and maximum leverage by notional tier.

The shape is Binance USDⓈ-M's `GET /fapi/v1/leverageBracket` (one symbol's `brackets` list:
bracket, initialLeverage, notionalCap, notionalFloor, maintMarginRatio, cum), documented at
https://developers.binance.com/docs/derivatives/usds-margined-futures/account/rest-api/Notional-and-Leverage-Brackets
The maintenance amount `cum` follows Binance's FAQ "How to Calculate Liquidation Price of USDⓈ-M
Futures Contracts": cum_n = floor_n x (MMR_n - MMR_{n-1}) + cum_{n-1}, which makes the
maintenance margin continuous across a bracket boundary; a table that breaks it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import pairwise

from trader.domain.errors import DomainError
from trader.domain.money import decimal_from_float, exact, to_decimal

_FIELDS = ("bracket", "initialLeverage", "notionalCap", "notionalFloor", "maintMarginRatio", "cum")


@dataclass(frozen=True, slots=True)
class Bracket:
    """One tier: notionals in [floor, cap) pay `maint_margin_ratio` less `cum`."""

    number: int
    initial_leverage: int
    notional_floor: Decimal
    notional_cap: Decimal
    maint_margin_ratio: Decimal
    cum: Decimal

    def __post_init__(self) -> None:
        where = f"bracket {self.number}"
        if self.initial_leverage < 1:
            raise DomainError(f"{where}: initial leverage must be at least 1")
        if self.notional_floor < 0 or self.notional_cap <= self.notional_floor:
            raise DomainError(
                f"{where}: notional cap {self.notional_cap} must exceed floor {self.notional_floor}"
            )
        if not 0 <= self.maint_margin_ratio < 1:
            raise DomainError(f"{where}: maintenance margin ratio must be in [0, 1)")
        if self.cum < 0:
            raise DomainError(f"{where}: maintenance amount (cum) must not be negative")

    def maintenance_margin(self, notional: Decimal) -> Decimal:
        """|notional| x MMR - cum, exactly."""
        with exact():
            return abs(notional) * self.maint_margin_ratio - self.cum


def _number(row: Mapping[str, object], key: str, where: str) -> Decimal:
    value = row.get(key)
    if isinstance(value, float):
        return decimal_from_float(value, f"{where} {key}")
    if isinstance(value, Decimal | int | str) and not isinstance(value, bool):
        return to_decimal(value, f"{where} {key}")
    raise DomainError(f"{where}: {key} must be a number, got {value!r}")


def _integer(row: Mapping[str, object], key: str, where: str) -> int:
    value = _number(row, key, where)
    if value != value.to_integral_value():
        raise DomainError(f"{where}: {key} must be a whole number, got {value}")
    return int(value)


@dataclass(frozen=True, slots=True)
class LeverageBrackets:
    """A symbol's brackets, checked contiguous from zero, with rising rates and consistent cum."""

    symbol: str
    brackets: tuple[Bracket, ...]

    def __post_init__(self) -> None:
        if not self.brackets:
            raise DomainError(f"{self.symbol}: a leverage bracket table needs at least one bracket")
        first = self.brackets[0]
        if first.notional_floor != 0 or first.cum != 0:
            raise DomainError(
                f"{self.symbol} bracket {first.number}: the first bracket must start at notional 0 "
                "with cum 0"
            )
        for previous, current in pairwise(self.brackets):
            where = f"{self.symbol} bracket {current.number}"
            if current.number != previous.number + 1:
                raise DomainError(f"{where}: brackets must be numbered consecutively")
            if current.notional_floor != previous.notional_cap:
                raise DomainError(
                    f"{where}: floor {current.notional_floor} does not meet the previous cap "
                    f"{previous.notional_cap} (brackets must be contiguous)"
                )
            if current.maint_margin_ratio <= previous.maint_margin_ratio:
                raise DomainError(f"{where}: maintenance margin ratio must rise bracket by bracket")
            if current.initial_leverage > previous.initial_leverage:
                raise DomainError(f"{where}: initial leverage must not rise with the notional")
            with exact():
                expected = (
                    current.notional_floor
                    * (current.maint_margin_ratio - previous.maint_margin_ratio)
                    + previous.cum
                )
            if current.cum != expected:
                raise DomainError(
                    f"{where}: cum {current.cum} is inconsistent with the table, expected "
                    f"{expected} = {current.notional_floor} x ({current.maint_margin_ratio} - "
                    f"{previous.maint_margin_ratio}) + {previous.cum}"
                )

    @classmethod
    def from_binance(cls, symbol: str, rows: object) -> LeverageBrackets:
        """From one symbol's `brackets` list as /fapi/v1/leverageBracket returns it (JSON numbers
        or decimal strings, as ccxt's `info` keeps them)."""
        if isinstance(rows, str | bytes) or not isinstance(rows, Sequence):
            raise DomainError(f"{symbol}: leverage brackets must be a list of objects")
        parsed = []
        for index, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise DomainError(f"{symbol}: leverage bracket #{index + 1} is not an object")
            where = f"{symbol} bracket {row.get('bracket', f'#{index + 1}')}"
            missing = [key for key in _FIELDS if key not in row]
            if missing:
                raise DomainError(f"{where}: missing {', '.join(missing)}")
            parsed.append(
                Bracket(
                    number=_integer(row, "bracket", where),
                    initial_leverage=_integer(row, "initialLeverage", where),
                    notional_floor=_number(row, "notionalFloor", where),
                    notional_cap=_number(row, "notionalCap", where),
                    maint_margin_ratio=_number(row, "maintMarginRatio", where),
                    cum=_number(row, "cum", where),
                )
            )
        return cls(symbol, tuple(sorted(parsed, key=lambda bracket: bracket.number)))

    @property
    def max_notional(self) -> Decimal:
        return self.brackets[-1].notional_cap

    def bracket_for(self, notional: Decimal) -> Bracket:
        """The bracket whose [floor, cap) holds |notional|. Past the last cap (a price move can
        carry a position there; the exchange refuses to open it, -2027) the last bracket's rate
        goes on applying."""
        size = abs(notional)
        for bracket in self.brackets:
            if size < bracket.notional_cap:
                return bracket
        return self.brackets[-1]

    def maintenance_margin(self, notional: Decimal) -> Decimal:
        """Binance's MM = |notional| x MMR - cum in the bracket of that notional."""
        return self.bracket_for(notional).maintenance_margin(notional)

    def max_leverage(self, notional: Decimal) -> int:
        """The highest leverage a position of this notional may use."""
        if abs(notional) > self.max_notional:
            raise DomainError(
                f"{self.symbol}: notional {abs(notional)} is above the largest bracket cap "
                f"{self.max_notional}"
            )
        return self.bracket_for(notional).initial_leverage

    def max_notional_at(self, leverage: int) -> Decimal:
        """The largest notional a position at `leverage` may reach (cap of the last bracket that
        allows it)."""
        allowed = [bracket for bracket in self.brackets if bracket.initial_leverage >= leverage]
        if not allowed:
            raise DomainError(f"{self.symbol}: leverage {leverage} is above every bracket's")
        return allowed[-1].notional_cap
