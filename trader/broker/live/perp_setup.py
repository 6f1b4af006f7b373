"""Start-up of a live perp account (`market.kind = "perp"`): what must hold before any order.

1. Position mode: one-way only. An account in hedge mode (`dualSidePosition` true) is refused
   with what to change; the daemon never switches it (that is the account holder's choice,
   and Binance refuses the switch while anything is open: -4067/-4068).
2. Leverage brackets, read from the venue: ccxt's `fetch_leverage_tiers` (binanceusdm: GET
   /fapi/v1/leverageBracket); Aster's ccxt client has no unified method, so its raw
   `fapiPrivateGetV3LeverageBracket` (GET /fapi/v3/leverageBracket) is asked. The leverage
   `risk.max_leverage` asks for, rounded up, must be open in the first bracket (its
   `initialLeverage`), or the start is refused naming the symbol and its bracket.
3. Margin mode (`broker.margin_mode`) and leverage set per symbol through ccxt
   (`set_margin_mode`, `set_leverage`). "No need to change" answers (-4046 margin type,
   -4059 position side; ccxt raises the first as MarginModeAlreadySet) are success.
4. Checked back: the leverage the venue's answer names must be the one asked for; every open
   position must be one-way, in the margin mode asked for and at that leverage
   (`perp_positions.VenuePosition`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import ccxt.async_support as ccxt

from trader.broker.live.perp_positions import VenuePosition, read_positions
from trader.broker.safety import StartRefused
from trader.broker.venue_errors import classify, venue_code
from trader.domain import DomainError, Instrument
from trader.domain.perp import LeverageBrackets
from trader.domain.perp.from_portfolio import whole_leverage

NO_NEED_TO_CHANGE = frozenset({-4046, -4059})  # margin type, position side: already so
HEDGE_MODE = (
    "{venue}: the account is in hedge mode (dualSidePosition); the daemon trades one-way mode "
    "only: switch the account's position mode to one-way (no open positions or orders), then "
    "start again"
)


@dataclass(frozen=True)
class PerpTerms:
    """What start-up set and read: the leverage and margin mode of every symbol, their
    brackets, and the positions open at the venue then."""

    leverage: int
    margin_mode: str  # "isolated" | "cross", ccxt's words
    brackets: Mapping[str, LeverageBrackets]
    positions: Mapping[str, VenuePosition]


def is_no_change(error: BaseException) -> bool:
    """Whether `error` is a venue's "no need to change" (the setting already holds)."""
    return isinstance(error, ccxt.MarginModeAlreadySet) or venue_code(error) in NO_NEED_TO_CHANGE


def _check_contracts(instruments: Mapping[str, Instrument], venue: str) -> None:
    for symbol, instrument in sorted(instruments.items()):
        if not instrument.is_perp:
            raise StartRefused(f"{symbol} is not a perpetual at {venue}")
        if instrument.contract_size != 1:
            raise StartRefused(
                f"{symbol}: a contract is {instrument.contract_size} of the base asset; "
                "only one-unit contracts (Binance USDⓈ-M, Aster) are supported"
            )


async def prepare_perp_account(
    exchange: ccxt.Exchange,
    instruments: Mapping[str, Instrument],
    margin_mode: str,
    max_leverage: float,
) -> PerpTerms:
    """Check and set the account for one-way trading of `instruments`; StartRefused says what
    does not hold (and what to do), before anything is set at the venue."""
    venue = str(exchange.id)
    try:
        leverage = whole_leverage(max_leverage)
    except DomainError as error:
        raise StartRefused(f"risk.max_leverage: {error}") from error
    # The markets first: a restart's instruments are read from them (no baseline read has).
    await _ask(exchange.load_markets(), venue, "load its markets")
    _check_contracts(instruments, venue)
    symbols = sorted(instruments)
    mode = await _ask(exchange.fetch_position_mode(), venue, "read the position mode")
    if mode.get("hedged") is not False:
        raise StartRefused(HEDGE_MODE.format(venue=venue))
    brackets = await read_brackets(exchange, symbols)
    for symbol in symbols:
        first = brackets[symbol].brackets[0]
        if leverage > first.initial_leverage:
            raise StartRefused(
                f"{venue}: risk.max_leverage asks for {leverage}x, but {symbol}'s first leverage "
                f"bracket (notional up to {first.notional_cap}) allows at most "
                f"{first.initial_leverage}x: lower risk.max_leverage"
            )
    for symbol in symbols:
        await _set_margin_mode(exchange, symbol, margin_mode)
        answer = await _ask(
            exchange.set_leverage(leverage, symbol), venue, f"set {symbol}'s leverage"
        )
        named = (answer or {}).get("leverage")
        if named is None or int(named) != leverage:
            raise StartRefused(
                f"{venue}: asked to set {symbol}'s leverage to {leverage}x, it answered {named!r}"
            )
    raw = await _ask(exchange.fetch_positions(list(symbols)), venue, "read its positions")
    positions = read_positions(raw)
    for position in positions.values():
        wrong = position.disagrees(leverage, margin_mode)
        if wrong is not None:
            raise StartRefused(f"{venue}: {wrong}")
    return PerpTerms(leverage, margin_mode, brackets, positions)


async def read_brackets(
    exchange: ccxt.Exchange, symbols: Sequence[str]
) -> dict[str, LeverageBrackets]:
    """Each symbol's leverage brackets as the venue lists them."""
    venue = str(exchange.id)
    rows: dict[str, Any] = {}
    if exchange.has.get("fetchLeverageTiers"):
        tiers = await _ask(
            exchange.fetch_leverage_tiers(list(symbols)), venue, "read the leverage brackets"
        )
        for symbol in symbols:
            rows[symbol] = [tier.get("info") for tier in (tiers or {}).get(symbol) or ()]
    else:  # Aster: the raw route, one symbol at a time (Binance's answer shape)
        for symbol in symbols:
            market_id = exchange.market(symbol)["id"]
            route = getattr(exchange, "fapiPrivateGetV3LeverageBracket")  # noqa: B009 - ccxt's implicit API
            answer = await _ask(
                route({"symbol": market_id}), venue, f"read {symbol}'s leverage brackets"
            )
            listed = answer if isinstance(answer, list) else [answer]
            mine = [r for r in listed if isinstance(r, dict) and r.get("symbol") == market_id]
            rows[symbol] = mine[0].get("brackets") if mine else None
    out: dict[str, LeverageBrackets] = {}
    for symbol in symbols:
        if not rows.get(symbol):
            raise StartRefused(f"{venue} lists no leverage brackets for {symbol}")
        try:
            out[symbol] = LeverageBrackets.from_binance(symbol, rows[symbol])
        except DomainError as error:
            raise StartRefused(f"{venue}'s leverage brackets for {symbol}: {error}") from error
    return out


async def _set_margin_mode(exchange: ccxt.Exchange, symbol: str, margin_mode: str) -> None:
    venue = str(exchange.id)
    try:
        await exchange.set_margin_mode(margin_mode, symbol)
    except ccxt.BaseError as error:
        if is_no_change(error):
            return
        found = classify(error)
        code = venue_code(error)
        why = {
            -4047: "it has open orders in that symbol: cancel them first",
            -4048: "it has a position in that symbol: close it first",
        }.get(code or 0, f"{found.label}: {found.detail}")
        raise StartRefused(
            f"{venue}: could not set {symbol} to {margin_mode} margin (broker.margin_mode): {why}"
        ) from error


async def _ask(call: Any, venue: str, what: str) -> Any:
    """A start-up call; a failure refuses the start with the venue's reason."""
    try:
        return await call
    except ccxt.BaseError as error:
        if is_no_change(error):
            return None
        found = classify(error)
        code = venue_code(error)
        hint = " (a leverage the venue does not allow for this symbol)" if code == -4028 else ""
        raise StartRefused(
            f"{venue}: could not {what}: {found.label}: {found.detail}{hint}"
        ) from error


def wallet_balance(balance: Mapping[str, Any], currency: str = "USDT") -> Decimal | None:
    """The USDⓈ-M wallet balance of `currency` in a `fetch_balance` answer, from the venue's
    own text: ccxt's `total` is the margin balance (wallet + unrealised P&L), not the wallet
    (ccxt/binance.py `parse_balance_custom`: total = marginBalance)."""
    info = balance.get("info")
    rows: list[Any] = []
    if isinstance(info, dict):
        rows = info.get("assets") or []
    elif isinstance(info, list):  # /fapi/v3/balance (Aster's fetch_balance): a list of assets
        rows = info
    for row in rows:
        if isinstance(row, dict) and row.get("asset") == currency:
            value = row.get("walletBalance", row.get("balance"))
            if value is not None:
                return Decimal(str(value))
    return None
