"""`trader doctor --venue alpaca`: a read-only look at the Alpaca account the daemon's keys
open (`exchange.alpaca`: the paper or the live environment, as `paper` picks), with what the
daemon will do about each finding, a verdict and an exit code in the device doctor's style:
0 OK, 1 DEGRADED (it trades, with a limit the settings should know of), 69 UNUSABLE (the
daemon would trade nothing, or read no bars), 75 no answer from Alpaca (try again), 78 no keys.

It reads the account, and with `feed = sip` one recent SIP bar of a configured stock (a
refusal means the plan does not allow SIP's recent data), and nothing else: no order, no
cancel. No key is printed: every configured secret is masked in what it writes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import ccxt.async_support as ccxt

from trader.config.schema import Settings
from trader.doctor.alpaca_account import Finding, Level, Symbols, account_findings, worst
from trader.doctor.verdict import EX_DEGRADED, EX_OK, Verdict
from trader.exit_codes import EX_CONFIG, EX_TEMPFAIL, EX_UNAVAILABLE
from trader.market.alpaca.exchange import AlpacaExchange
from trader.market.calendars.registry import CONTINUOUS
from trader.market.live_source import calendar_names, venue_clock

_MASK = "**********"
_NAME = "trader doctor --venue alpaca"


@dataclass(frozen=True)
class Look:
    account: dict[str, object] | None
    findings: list[Finding]
    failure: Verdict | None = None  # Alpaca could not be asked


def symbols_of(settings: Settings) -> Symbols:
    """Stocks are the symbols given an exchange's calendar (the daemon's own rule: Alpaca's
    stocks need one), crypto the rest."""
    names = calendar_names(settings.market)
    return Symbols(
        [s for s, n in names.items() if n != CONTINUOUS],
        [s for s, n in names.items() if n == CONTINUOUS],
    )


async def _feed(exchange: AlpacaExchange, settings: Settings, stocks: Sequence[str]) -> Finding:
    feed = settings.exchange.alpaca.feed
    what = f"exchange.alpaca.feed {feed}"
    if not stocks:
        return Finding("note", what, "not used: no stock among market.symbols")
    if feed == "iex":
        return Finding("ok", what, "the free feed: minute bars only where IEX traded (sparse)")
    symbol = stocks[0]
    try:
        await exchange.load_markets()
        bars = await exchange.fetch_ohlcv(symbol, "1m", None, 1)
    except (ccxt.NetworkError, ccxt.RateLimitExceeded) as error:
        return Finding("degraded", what, f"could not be checked now ({error})")
    except ccxt.BaseError as error:
        return Finding(
            "unusable",
            what,
            f"Alpaca refused a recent SIP bar of {symbol} ({error}): the plan does not allow "
            "SIP's recent data, so the daemon would read no bars of its stocks: set "
            "exchange.alpaca.feed = iex, or subscribe to SIP",
        )
    served = "a recent SIP bar was served" if bars else "no bar in the last minutes, no refusal"
    return Finding("ok", what, f"{symbol}: {served}: the plan allows SIP")


async def look(exchange: AlpacaExchange, settings: Settings) -> Look:
    """The account's findings, or why Alpaca could not be asked."""
    symbols = symbols_of(settings)
    try:
        account = await exchange.account()
    except ccxt.AuthenticationError as error:
        names = " and ".join(settings.exchange.alpaca.key_names())
        why = f"Alpaca refused the keys ({names}): {error}"
        return Look(None, [], Verdict("UNUSABLE", why, EX_UNAVAILABLE))
    except ccxt.BaseError as error:
        why = f"Alpaca did not answer ({type(error).__name__}: {error}): try again"
        return Look(None, [], Verdict("FAILED", why, EX_TEMPFAIL))
    findings = account_findings(account, settings, symbols)
    findings.append(await _feed(exchange, settings, symbols.stocks))
    return Look(account, findings)


_VERDICTS: dict[Level, tuple[str, str, int]] = {
    "ok": ("OK", "the daemon can trade this account as configured", EX_OK),
    "note": ("OK", "the daemon can trade this account as configured", EX_OK),
    "degraded": ("DEGRADED", "the daemon trades, but", EX_DEGRADED),
    "unusable": ("UNUSABLE", "the daemon would trade nothing here:", EX_UNAVAILABLE),
}


def verdict_of(result: Look) -> Verdict:
    if result.failure is not None:
        return result.failure
    level = worst(result.findings)
    status, summary, code = _VERDICTS[level]
    if level in {"degraded", "unusable"}:
        summary += " " + "; ".join(f.what for f in result.findings if f.level == level)
    return Verdict(status, summary, code)


def report(settings: Settings, result: Look) -> str:
    alpaca = settings.exchange.alpaca
    where = "paper" if alpaca.paper else "live"
    lines = [
        f"{_NAME}: the {where} account (exchange.alpaca.paper = {str(alpaca.paper).lower()}), "
        "read only: no order, no cancel",
    ]
    if result.account is not None:
        number = str(result.account.get("account_number") or "?")
        lines.append(f"account ...{number[-4:]}, currency {result.account.get('currency')}")
    lines += ["", *[f.line for f in result.findings], "", verdict_of(result).line]
    return "\n".join(lines) + "\n"


def run_venue_doctor(settings: Settings, secrets: Sequence[str] = ()) -> int:
    from trader.market.alpaca.feed import alpaca_exchange  # noqa: PLC0415 - the SDK

    # --venue alpaca: the daemon's settings as they would run on Alpaca.
    venue = settings.exchange.model_copy(update={"venue": "alpaca"})
    settings = settings.model_copy(update={"exchange": venue})
    try:
        exchange = alpaca_exchange(venue, venue_clock(venue))
    except ValueError as error:  # no keys
        sys.stderr.write(f"{_NAME}: {_masked(str(error), secrets)}\n")
        return EX_CONFIG

    async def asked() -> Look:
        try:
            return await look(exchange, settings)
        finally:
            await exchange.close()

    result = asyncio.run(asked())
    sys.stdout.write(_masked(report(settings, result), secrets))
    return verdict_of(result).exit_code


def _masked(text: str, secrets: Sequence[str]) -> str:
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, _MASK)
    return text
