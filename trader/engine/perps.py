"""The tick's perp stage (`market.kind = "perp"`), after the fills stage and before the orders:
the money a perpetual moves without an order of ours, booked at the tick it falls in.

1. Liquidation, as Binance USDⓈ-M does it: a position whose margin balance, at the most
   adverse mark price since the last tick (the mark candles' low for a long, high for a
   short; never the last price: a wick in the trades alone liquidates nothing), is at or below
   its maintenance margin (isolated: the position's own margin; cross: the cross wallet's
   against all cross positions) is closed, with every cross position for cross, by the model
   `trader.domain.perp.liquidation_fill` the futures emulator books too: at the mark that
   triggered it, or at the bankruptcy price where that mark gapped through it; the fee,
   `broker.liquidation_fee_bps` of the notional closed, only out of the margin left above zero
   (an isolated liquidation never touches the rest of the account). The symbol's open orders
   (cross: every symbol's) are cancelled first. Its own record goes to the ledger's
   `liquidations`; the fill is an ordinary fill of the order `liquidation` made, so the
   restart's derivation sees it. Prices are rounded to 1e-8 in the account's favour, the fee
   up to 1e-8 (then capped), as the paper broker rounds its fills.
2. Funding at each recorded funding time that fell due since the last tick: mark x the signed
   position held x rate, paid (positive) or received, taken from cash and booked as a
   `funding` row with the tick (Binance, "Introduction to Binance Futures Funding Rates";
   `trader.domain.perp.funding_payment`). Maker fills of the bar ending at the funding time
   came before it (the fills stage ran first); the orders stage's fills come after.
3. The marks: each perpetual is valued on its mark price where recorded (the last mark candle
   closed by the tick), for equity, unrealised P&L and sizing.

The funding and marks come from the tapes: a replay's or backtest's recorded files
(`market.replay_perp`), or on a live feed the venue, read at the start of the stage
(`market.live_perp_tape`, `RefreshedTapes`). A live broker's venue books its own funding and
liquidations (reconcile books them): the stage only values and marks for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Protocol, runtime_checkable

from structlog.typing import FilteringBoundLogger

from trader.broker.paper_perp import PaperPerps
from trader.broker.protocol import Broker
from trader.config.schema import Settings
from trader.domain import (
    Fill,
    Liquidity,
    Order,
    OrderStatus,
    OrderType,
    Portfolio,
    Side,
    from_epoch_ms,
)
from trader.domain.execution import Execution
from trader.domain.money import ZERO, exact
from trader.domain.order import client_order_id
from trader.domain.perp import (
    LeverageBrackets,
    MarginMode,
    PerpAccount,
    funding_payment,
    parse_margin_mode,
)
from trader.domain.perp.default_brackets import DEFAULT_BRACKETS_SOURCE, default_brackets
from trader.domain.perp.from_portfolio import perp_account, whole_leverage
from trader.domain.perp.liquidation_fill import Liquidated, liquidation_fills
from trader.domain.symbols import quote_currency
from trader.engine.account import Account
from trader.engine.report import TickReport
from trader.ledger import Database
from trader.ledger.funding import FundingRow, LiquidationRow
from trader.ledger.perp_cursor import funding_cursors
from trader.market.files.funding import FundingRate

STEP = Decimal("0.00000001")
BPS = Decimal(10_000)
LIQUIDATION = "liquidation"


class PerpTapeLike(Protocol):
    def funding_due(self, after: datetime | None, until: datetime) -> list[FundingRate]: ...

    def mark(self, at: datetime) -> Decimal | None: ...

    def funding_mark(self, rate: FundingRate) -> Decimal | None: ...

    def adverse_mark(
        self, after: datetime | None, until: datetime, long: bool
    ) -> Decimal | None: ...


@runtime_checkable
class RefreshedTapes(Protocol):
    """Tapes read from the venue before each perp stage (`market.live_perp_tape`)."""

    async def refresh(self, at: datetime, after: datetime | None, portfolio: Portfolio) -> None: ...

    def stale(self, at: datetime) -> Mapping[str, datetime | None]: ...


@dataclass(frozen=True)
class PerpTerms:
    """The account's terms: leverage set on every symbol, margin mode, brackets, the fee."""

    leverage: int
    margin_mode: MarginMode
    brackets: Mapping[str, LeverageBrackets]
    liquidation_fee_bps: Decimal


def liquidated(account: PerpAccount, symbol: str, marks: Mapping[str, Decimal]) -> bool:
    """Margin balance at or below maintenance margin (isolated: the position's; cross: all
    cross positions' against the cross wallet)."""
    position = account.positions[symbol]
    if position.isolated:
        margin = position.isolated_margin(marks[symbol])
        return margin <= account.maintenance_margin(symbol, marks)
    return account.cross_margin_balance(marks) <= account.cross_maintenance_margin(marks)


class PerpBook:
    """The perp stage: see the module."""

    def __init__(
        self,
        tapes: Mapping[str, PerpTapeLike],
        terms: PerpTerms,
        broker: Broker,
        log: FilteringBoundLogger,
        paper: PaperPerps | None = None,
    ) -> None:
        self.tapes = tapes
        self.terms = terms
        self.broker = broker
        self.paper = paper
        self._log = log
        # Funding each isolated position paid since it opened (Binance takes it from the
        # position's own margin): by symbol, with the side it was paid on. A restart reads it
        # from the ledger (`restore`).
        self.isolated_paid: dict[str, tuple[int, Decimal]] = {}

    async def restore(self, database: Database) -> None:
        """The isolated positions' funding since they opened, from the ledger's funding rows
        after each position's opening fill (`ledger.perp_cursor`)."""
        if self.terms.margin_mode is not MarginMode.ISOLATED:
            return
        cursors = await database.run(lambda c: funding_cursors(c, list(self.terms.brackets)))
        self.isolated_paid = {
            s: (1 if c.held > 0 else -1, c.paid_since_open)
            for s, c in cursors.items()
            if c.held != 0 and c.paid_since_open != 0
        }

    def marks(self, at: datetime) -> dict[str, Decimal]:
        """Each perpetual's mark price known at `at`, where recorded."""
        found = {s: tape.mark(at) for s, tape in self.tapes.items()}
        return {s: mark for s, mark in found.items() if mark is not None}

    def isolated_funding(self) -> dict[str, Decimal]:
        """The funding each isolated position paid since it opened, by symbol."""
        return {s: amount for s, (_, amount) in self.isolated_paid.items()}

    def _account(self, portfolio: Portfolio) -> PerpAccount:
        terms = self.terms
        return perp_account(
            portfolio, terms.brackets, leverage=terms.leverage, margin_mode=terms.margin_mode,
            isolated_funding=self.isolated_funding(),
        )  # fmt: skip

    def _forget_closed(self, portfolio: Portfolio) -> None:
        """Positions closed or reversed since: their funding went with them."""
        for symbol, (side, _) in list(self.isolated_paid.items()):
            held = portfolio.amount(symbol)
            if held == 0 or (held > 0) != (side > 0):
                del self.isolated_paid[symbol]

    async def run(
        self, at: datetime, account: Account, report: TickReport, closes: Mapping[str, Decimal]
    ) -> None:
        """Liquidations, then funding, then the marks the rest of the tick values on."""
        after = account.last_tick
        if isinstance(self.tapes, RefreshedTapes):  # a live feed's: read from the venue now
            await self.tapes.refresh(at, after, account.portfolio)
            report.stale_marks = dict(self.tapes.stale(at))
        marks = {**closes, **self.marks(at)}
        self._forget_closed(account.portfolio)
        if not self.broker.external:  # a live venue liquidates itself: reconcile books it
            await self._liquidate(at, after, account, report, marks)
        if not self.broker.external:  # a live venue's funding rows come at reconcile
            self._fund(at, after, account, marks)
        account.perp_marks = self.marks(at)
        if self.paper is not None:
            self.paper.see(
                account.portfolio, {**marks, **account.perp_marks}, self.isolated_funding()
            )

    async def _liquidate(
        self,
        at: datetime,
        after: datetime | None,
        account: Account,
        report: TickReport,
        marks: dict[str, Decimal],
    ) -> None:
        for symbol in sorted(account.portfolio.positions):
            tape = self.tapes.get(symbol)
            position = account.portfolio.positions.get(symbol)
            if position is None or position.amount == 0:
                continue  # closed already, with its cross group
            if symbol not in marks or symbol not in self.terms.brackets:
                continue
            long = position.amount > 0
            recorded = tape.adverse_mark(after, at, long) if tape is not None else None
            worst = recorded or marks[symbol]
            trial = {**marks, symbol: worst}
            perp = self._account(account.portfolio)
            if not liquidated(perp, symbol, trial):
                continue
            await self._close(symbol, at, account, report, perp, trial)

    async def _close(
        self,
        symbol: str,
        at: datetime,
        account: Account,
        report: TickReport,
        perp: PerpAccount,
        marks: dict[str, Decimal],
    ) -> None:
        """Close `symbol`'s margin group (isolated: the position; cross: every cross position)
        by the one model `liquidation_fills`, as the futures emulator books it."""
        held = perp.positions[symbol]
        if held.isolated:
            group = [held]
            balance = held.isolated_margin(marks[symbol])
        else:
            group = [p for _, p in sorted(perp.positions.items()) if not p.isolated]
            balance = perp.cross_margin_balance(marks)
        rate = self.terms.liquidation_fee_bps / BPS
        closing = [Liquidated(p.symbol, p.size, marks[p.symbol]) for p in group]
        outcome = liquidation_fills(closing, balance, rate, step=STEP)
        cancels = [
            o
            for o in self.broker.open_orders()
            if o.symbol == symbol or self.terms.margin_mode is MarginMode.CROSS
        ]
        executions: list[Execution] = []
        for order in cancels:
            cancelled = await self.broker.cancel(order, at)
            if cancelled is not None:
                executions.append(Execution(cancelled.order, cancelled.fills, LIQUIDATION))
        rows = []
        for close in outcome.fills:
            side = Side.SELL if close.size > 0 else Side.BUY
            price = max(close.price, STEP)  # a short beyond saving: the least price there is
            amount = abs(close.size)
            cid = client_order_id(LIQUIDATION, close.symbol, at, "close")
            order = Order(cid, LIQUIDATION, close.symbol, side, OrderType.MARKET, amount, None, at)
            sent = order.transition(OrderStatus.SUBMITTED)
            fill = Fill(
                f"{cid}-1", cid, close.symbol, side, price, amount, close.fee,
                quote_currency(close.symbol), Liquidity.TAKER, at,
            )  # fmt: skip
            executions.append(Execution(sent.with_fill(fill), (fill,), LIQUIDATION))
            lp = perp.liquidation_price(close.symbol, marks)
            bankrupt = perp.bankruptcy_price(close.symbol, marks)
            row = LiquidationRow(
                fill.fill_id, close.symbol, at, close.size, marks[close.symbol],
                lp if lp is not None else price, price,
                close.fee, str(held.margin_mode),
            )  # fmt: skip
            rows.append(row)
            self._log.error(
                "liquidated", symbol=close.symbol, position=str(close.size),
                mark=str(marks[close.symbol]), liquidation_price=str(lp),
                bankruptcy_price=str(bankrupt), price=str(price), fee=str(close.fee),
                margin_mode=str(held.margin_mode),
            )  # fmt: skip
        account.book(executions, report)
        account.perp.liquidations.extend(rows)

    def _fund(
        self, at: datetime, after: datetime | None, account: Account, marks: Mapping[str, Decimal]
    ) -> None:
        for symbol, tape in sorted(self.tapes.items()):
            held_at = getattr(tape, "held_at", None)  # a live tape's late funding times
            for rate in tape.funding_due(after, at):
                held = account.portfolio.amount(symbol)
                held = held_at(rate, held) if held_at is not None else held
                if held == 0:
                    continue
                mark = tape.funding_mark(rate) or marks.get(symbol)
                if mark is None:
                    continue  # nothing to value it on: nothing was held before the first bar
                paid = funding_payment(mark, held, rate.rate)
                portfolio = account.portfolio
                with exact():
                    cash = portfolio.cash - paid
                account.portfolio = Portfolio(
                    portfolio.currency, cash, portfolio.positions, portfolio.realized_pnl,
                    portfolio.fees_paid,
                )  # fmt: skip
                row = FundingRow(
                    symbol, from_epoch_ms(rate.at_ms), rate.rate, mark, held, paid, "modelled"
                )
                account.perp.funding.append(row)
                if self.terms.margin_mode is MarginMode.ISOLATED:
                    _, before = self.isolated_paid.get(symbol, (1, ZERO))
                    with exact():
                        self.isolated_paid[symbol] = (1 if held > 0 else -1, before + paid)


def perp_book(
    settings: Settings,
    broker: Broker,
    tapes: Mapping[str, PerpTapeLike] | None,
    log: FilteringBoundLogger,
) -> PerpBook | None:
    """The perp stage for `market.kind = "perp"` (None for spot): the settings' leverage and
    margin mode; the brackets the live broker read from the venue at its preparation
    (`broker.live.perp_setup`), else the default brackets (`default_brackets`: a paper
    account); the funding and marks (`tapes`: a replay's recordings or a live feed's
    `LivePerpTapes`; none: no source at all, said)."""
    if settings.market.kind != "perp":
        return None
    symbols = list(settings.market.symbols)
    venue = getattr(getattr(broker, "terms", None), "brackets", None)
    from_venue = isinstance(venue, Mapping) and all(s in venue for s in symbols)
    brackets: Mapping[str, LeverageBrackets] = (
        {s: venue[s] for s in symbols} if from_venue and isinstance(venue, Mapping)
        else {s: default_brackets(s) for s in symbols}
    )  # fmt: skip
    terms = PerpTerms(
        whole_leverage(settings.risk.max_leverage),
        parse_margin_mode(settings.broker.margin_mode),
        brackets,
        settings.broker.liquidation_fee_bps,
    )
    log.info(
        "perp brackets", symbols=symbols,
        source="the venue's, read by the live broker at its preparation" if from_venue
        else f"default: {DEFAULT_BRACKETS_SOURCE} (a paper account: an altcoin's table at the "
        "venue may start higher, and liquidate earlier than this one)",
    )  # fmt: skip
    paper = getattr(broker, "perps", None)
    if tapes is None:
        log.warning(
            "perpetual without a funding or mark source",
            reason="the feed is neither a replay with recorded funding nor a ccxt exchange: "
            "no funding is booked, and positions are valued and liquidated on the quotes' "
            "mid at each tick, not on the mark",
        )
    return PerpBook(
        tapes or {}, terms, broker, log, paper if isinstance(paper, PaperPerps) else None
    )
