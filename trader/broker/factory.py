"""The broker `broker.mode` asks for, and the cash the ledger's account starts with.

Paper: the paper broker, with `broker.starting_cash`. Live: the live broker on the market
data's ccxt client, once the instance locks are taken; when the ledger's account is opened,
the venue's balances become the baseline reconciliation compares against, and the account
starts with the capital cap's share of the venue's cash. A ledger belongs to one mode for
good: a paper ledger never turns live, nor a live one paper.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from trader.broker.ccxt_orders import balance_totals
from trader.broker.paper import PaperBroker
from trader.broker.paper_perp import paper_perps
from trader.broker.protocol import Broker
from trader.broker.safety import StartRefused, take_live_locks, trading_capital
from trader.config.schema import Settings
from trader.domain import Instrument
from trader.ledger.codec import optional_time
from trader.ledger.database import Database
from trader.ledger.reconciliation import ReconciliationLedger
from trader.logging import get_logger
from trader.market.feed import MarketData
from trader.market.replay import ReplayMarketData
from trader.market.retry import RetryPolicy


async def build_broker(
    settings: Settings,
    feed: MarketData,
    instruments: Mapping[str, Instrument],
    database: Database,
    now: datetime,
) -> tuple[Broker, Decimal]:
    """The broker, and the cash a new ledger account starts with."""
    ledger = ReconciliationLedger(database)
    baseline = await ledger.baseline()
    where = settings.ledger.path
    if settings.broker.mode == "paper":
        if baseline is not None:
            raise StartRefused(
                f"ledger {where} records a live account: paper trading needs a ledger of its "
                "own (set ledger.path)"
            )
        unknown = feed.volume_unknown if isinstance(feed, ReplayMarketData) else ()
        perps = paper_perps(
            settings.market.kind, list(settings.market.symbols), settings.broker.currency,
            settings.risk.max_leverage, settings.broker.margin_mode,
        )  # fmt: skip
        paper = PaperBroker(settings.broker, instruments, unknown, perps)
        return paper, settings.broker.starting_cash
    exchange = getattr(feed, "exchange", None)
    if exchange is None:
        raise StartRefused("live trading needs the exchange's market data (not a replay)")
    if baseline is None and await ledger.has_account():
        raise StartRefused(
            f"ledger {where} records a paper account: live trading needs a ledger of its own "
            "(set ledger.path)"
        )
    import ccxt.async_support as ccxt  # noqa: PLC0415 - ccxt loads only for live

    from trader.broker.live.broker import LiveBroker  # noqa: PLC0415
    from trader.broker.venue_errors import Meaning, classify, credentials_hint  # noqa: PLC0415

    locks = take_live_locks(settings, sorted(instruments), now)
    try:
        if baseline is None:
            try:
                balances = await exchange.fetch_balance()
            except ccxt.BaseError as error:
                found = classify(error)
                refused = found.meaning is Meaning.HALT  # keys refused: say what to check
                check = f": check {credentials_hint(exchange)}" if refused else ""
                raise StartRefused(
                    f"the venue's balances are needed once, when a live ledger is opened, and "
                    f"could not be read: {found.label}: {found.detail}{check}"
                ) from error
            baseline = balance_totals(balances)
            if settings.market.kind == "perp":
                baseline = perp_baseline(balances, settings.broker.currency)
            await ledger.set_baseline(baseline, now)
            get_logger("trader.broker").info(
                "venue baseline taken", **{k: str(v) for k, v in sorted(baseline.items())}
            )
        cash = baseline.get(settings.broker.currency, Decimal(0))
        parts: dict[str, Any] = {
            "retry": RetryPolicy(
                attempts=settings.exchange.retry_attempts,
                max_delay_s=settings.exchange.retry_max_delay_s,
            ),
            "locks": locks,
            # Its failed calls counted with the market data's (the same client's).
            "on_error": getattr(feed, "on_error", lambda kind: None),
        }
        if settings.market.kind == "perp":
            broker: Broker = await perp_broker(
                settings, exchange, instruments, await baseline_time(database) or now, parts
            )
        else:
            broker = LiveBroker(exchange, settings.broker, instruments, **parts)
    except BaseException:
        locks.release()
        raise
    return broker, trading_capital(settings, cash)


async def baseline_time(database: Database) -> datetime | None:
    """When the venue's baseline was taken: a perp's funding counts from then."""
    row = await database.run(
        lambda c: c.execute("SELECT min(taken_at) FROM venue_baseline").fetchone()
    )
    return optional_time(row[0]) if row else None


def perp_baseline(balances: Mapping[str, Any], currency: str) -> dict[str, Decimal]:
    """A perp account's baseline: its wallet (ccxt's `total` is the margin balance)."""
    from trader.broker.live.perp_setup import wallet_balance  # noqa: PLC0415 - ccxt

    wallet = wallet_balance(balances, currency)
    if wallet is None:
        raise StartRefused(f"the venue's balance names no {currency} wallet")
    return {currency: wallet}


async def perp_broker(
    settings: Settings,
    exchange: Any,
    instruments: Mapping[str, Instrument],
    since: datetime,
    parts: Mapping[str, Any],
) -> Any:
    """The perp live broker, its account prepared (one-way, margin mode, leverage)."""
    from trader.broker.live.perp import PerpLiveBroker  # noqa: PLC0415 - ccxt
    from trader.broker.live.perp_funding import MemoryFunding  # noqa: PLC0415

    broker = PerpLiveBroker(
        exchange, settings.broker, instruments, max_leverage=settings.risk.max_leverage,
        funding=MemoryFunding(since), **parts,
    )  # fmt: skip
    await broker.prepare()
    return broker
