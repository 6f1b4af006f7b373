"""Pre-trade risk: every order passes these rules, and the trading state follows equity.

Rules, in order: halted; synthetic or stale quote; reducing-only; order notional; position per
symbol; total exposure; orders per minute; leverage (a perpetual's: `liquidation.py`); minimum
edge after fees and spread. Orders that shrink exposure skip the size, exposure, leverage and
edge rules (getting out must stay possible). A perpetual account's liquidation buffer rule
(`buffer_reductions`) runs every tick before the strategies' orders.

Equity drives the state, measured the same on every timeframe (`marks.DayMarks`): a loss
since the previous day's close past `max_daily_loss` means HALTED; a drawdown from the running
peak past `max_drawdown` means REDUCING. The daemon's stops wait for a person: resuming
re-bases both limits to the equity at that moment, recorded in the state's reason. A backtest
has no person, so `backtest.on_halt` (`HaltPolicy`) says what ends them: nothing (stop), or
the next day (resume_next_day, reduce_only), when the limits are measured from the new day's
reference equity.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Literal, Protocol
from zoneinfo import ZoneInfo

from trader.config.trading_settings import RiskSettings
from trader.domain import OrderType, Quote, QuoteSource, Side
from trader.domain.perp import PerpAccount
from trader.logging import get_logger
from trader.risk.liquidation import (
    LEVERAGE_RULE,
    BufferReduction,
    PerpExposure,
    buffer_reductions,
    leverage_refusal,
)
from trader.risk.marks import DayMarks
from trader.risk.state import TradingState, TradingStatus


class Proposed(Protocol):
    """What the rules read of an order: an `Order`, or the plan's intent before its order
    is made."""

    @property
    def side(self) -> Side: ...

    @property
    def type(self) -> OrderType: ...

    @property
    def amount(self) -> Decimal: ...


@dataclass(frozen=True)
class OrderCheck:
    """An order and what the risk engine needs to judge it."""

    order: Proposed
    price: Decimal  # where it should trade: its limit, or the touch for a market order
    quote: Quote
    position: Decimal  # signed amount held now
    mark: Decimal  # price the position is valued at
    others_exposure: Decimal  # gross exposure of every other symbol
    edge_bps: float | None  # the strategy's expected gross move, for orders that add exposure
    perp: PerpExposure | None = None  # a perpetual's account: the leverage check reads it
    # The liquidation buffer rule's order: when it only reduces, a halt lets it through (a
    # halt stops new risk; the venue's liquidation of a halted account would cost more).
    averts_liquidation: bool = False

    @property
    def reduces(self) -> bool:
        """Whether the order only shrinks the position (never flips it)."""
        opposite = (self.order.side is Side.SELL and self.position > 0) or (
            self.order.side is Side.BUY and self.position < 0
        )
        return opposite and self.order.amount <= abs(self.position)


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    rule: str  # a bounded label: "ok", "halted", "min_edge", ...
    reason: str


OK = Verdict(True, "ok", "accepted")
_MINUTE = timedelta(minutes=1)
DAILY_LOSS = "daily loss"
DRAWDOWN = "drawdown"
# wait: halted until a person resumes (the daemon). The others are backtest.on_halt's.
HaltPolicy = Literal["wait", "stop", "resume_next_day", "reduce_only"]


class RiskEngine:
    def __init__(
        self,
        settings: RiskSettings,
        *,
        maker_fee_bps: float,
        taker_fee_bps: float,
        max_quote_age: timedelta,
        status: TradingStatus,
        day: DayMarks | None = None,
        halt_policy: HaltPolicy = "wait",
        opening: Decimal | None = None,
    ) -> None:
        """`day`: the marks the ledger kept (None: no tick yet); `opening`: the equity before
        the first tick (the starting cash), the first day's reference and the first peak."""
        self.settings = settings
        self.halt_policy = halt_policy
        self.maker_fee_bps, self.taker_fee_bps = maker_fee_bps, taker_fee_bps
        self.max_quote_age = max_quote_age
        self.status = status
        self.day = day
        self.opening = opening
        self._zone = ZoneInfo(settings.day_zone)
        self._utc_days = settings.day_zone == "UTC" and settings.day_rolls_at == time(0)
        self._sent: deque[datetime] = deque()
        self.reductions: Counter[str] = Counter()  # the buffer rule's orders, by symbol
        self._log = get_logger("trader.risk")

    @property
    def state(self) -> TradingState:
        return self.status.state

    # --- orders -----------------------------------------------------------------------------

    def check(self, c: OrderCheck, at: datetime) -> Verdict:
        """The verdict; an accepted order counts as sent (the rate rule counts them)."""
        verdict = self.judge(c, at)
        if verdict.accepted:
            self.sent(at)
        return verdict

    def sent(self, at: datetime) -> None:
        """An order the checks accepted has been sent."""
        self._sent.append(at)

    def judge(self, c: OrderCheck, at: datetime) -> Verdict:
        """The first rule that refuses, in their order, else OK; nothing is recorded."""
        refusal = (
            self._halted(c, at) or self._quote(c, at) or self._reducing(c, at)
            or self._rate(c, at)
        )  # fmt: skip
        if refusal is None and not c.reduces:
            refusal = self._size(c, at) or self._leverage(c, at) or self._edge(c, at)
        return refusal or OK

    def _halted(self, c: OrderCheck, at: datetime) -> Verdict | None:
        if self.state is TradingState.HALTED and not (c.averts_liquidation and c.reduces):
            return Verdict(False, "halted", f"trading is halted: {self.status.reason}")
        return None

    def _quote(self, c: OrderCheck, at: datetime) -> Verdict | None:
        if c.quote.source is QuoteSource.SYNTHETIC:
            return Verdict(False, "synthetic_quote", "the quote is synthetic: no real price")
        age = c.quote.age(at)
        if age > self.max_quote_age:
            return Verdict(False, "stale_quote", f"the quote is {age} old")
        return None

    def _reducing(self, c: OrderCheck, at: datetime) -> Verdict | None:
        if self.state is TradingState.REDUCING and not c.reduces:
            return Verdict(False, "reducing", f"only reducing orders: {self.status.reason}")
        return None

    def _rate(self, c: OrderCheck, at: datetime) -> Verdict | None:
        while self._sent and at - self._sent[0] >= _MINUTE:
            self._sent.popleft()
        most = self.settings.max_orders_per_minute
        if len(self._sent) >= most:
            return Verdict(False, "order_rate", f"already {most} orders in the last minute")
        return None

    def _size(self, c: OrderCheck, at: datetime) -> Verdict | None:
        limits = self.settings
        notional = c.order.amount * c.price
        if notional > limits.max_order_notional:
            why = f"order {notional:.2f} > {limits.max_order_notional}"
            return Verdict(False, "order_notional", why)
        after = abs(c.position + c.order.side.sign * c.order.amount) * c.mark
        if after > limits.max_position_notional:
            why = f"position {after:.2f} > {limits.max_position_notional}"
            return Verdict(False, "position_limit", why)
        if after + c.others_exposure > limits.max_total_exposure:
            why = f"exposure {after + c.others_exposure:.2f} > {limits.max_total_exposure}"
            return Verdict(False, "exposure_limit", why)
        return None

    def _leverage(self, c: OrderCheck, at: datetime) -> Verdict | None:
        if c.perp is None:
            return None
        why = leverage_refusal(
            position=c.position, order=c.order.side.sign * c.order.amount, mark=c.mark,
            exposure=c.perp, max_leverage=Decimal(repr(self.settings.max_leverage)),
        )  # fmt: skip
        return None if why is None else Verdict(False, LEVERAGE_RULE, why)

    def buffer_reductions(
        self,
        account: PerpAccount,
        marks: Mapping[str, Decimal],
        steps: Mapping[str, Decimal],
        costs: Mapping[str, Decimal] | None = None,
    ) -> list[BufferReduction]:
        """The liquidation buffer rule's reduce-only orders for this tick (none with
        `risk.liquidation_buffer` 0), each said in the log and counted in `reductions`. The
        caller sends them before, and instead of, the symbols' strategy orders. `costs`: what a
        market order pays beside the taker fee, as a share of the notional (half the spread,
        slippage), by symbol: the buffer must hold after the fill."""
        buffer = Decimal(repr(self.settings.liquidation_buffer))
        fee = Decimal(repr(self.taker_fee_bps)) / 10_000
        paid = {s: fee + (costs or {}).get(s, Decimal(0)) for s in account.positions}
        wanted = buffer_reductions(account, marks, buffer=buffer, steps=steps, costs=paid)
        for reduction in wanted:
            self.reductions[reduction.symbol] += 1
            self._log.warning(
                "liquidation buffer", symbol=reduction.symbol, side=str(reduction.side),
                amount=str(reduction.amount), reason=reduction.reason,
            )  # fmt: skip
        return wanted

    def _edge(self, c: OrderCheck, at: datetime) -> Verdict | None:
        if c.edge_bps is None:
            return Verdict(False, "min_edge", "no expected edge was stated for this entry")
        if c.order.type is OrderType.LIMIT:
            costs = 2 * self.maker_fee_bps  # a resting order pays no spread
        else:
            spread = c.quote.spread_bps
            if spread is None:
                return Verdict(False, "min_edge", "spread unknown: the edge cannot be judged")
            costs = 2 * self.taker_fee_bps + spread
        net = c.edge_bps - costs
        if net < self.settings.min_edge_bps:
            why = f"edge {net:.1f} bps after fees and spread < {self.settings.min_edge_bps} bps"
            return Verdict(False, "min_edge", why)
        return None

    # --- state ------------------------------------------------------------------------------

    def day_of(self, at: datetime) -> date:
        """The risk day `at` falls in: its date in `risk.day_zone`, the day ending at
        `risk.day_rolls_at` there."""
        if self._utc_days and at.tzinfo is UTC:
            return at.date()  # the default, and every tick's time: no conversion
        local = at.astimezone(self._zone)
        rolls = self.settings.day_rolls_at
        passed = timedelta(hours=rolls.hour, minutes=rolls.minute, seconds=rolls.second)
        # A day that ends at 17:00 is labelled by the date it ends on, as FX's value days are.
        return (local + (timedelta(days=1) - passed if passed else timedelta(0))).date()

    def observe_equity(self, at: datetime, equity: Decimal) -> TradingStatus | None:
        """Follow equity; the new status when it changes, else None."""
        today = self.day_of(at)
        change = None
        if self.day is None:
            marks = DayMarks.opening(today, equity if self.opening is None else self.opening)
        else:
            marks = self.day.on(today)
            if marks.day != self.day.day and self._stop_ends_with_day():
                marks = marks.rebased(marks.start)
                # Measured from the day's reference now (the ledger's trading_state row keeps it).
                change = self._move(TradingState.ACTIVE, "a new trading day", at)
        self.day = marks = marks.seen(equity)
        if self.state is TradingState.HALTED:
            return change
        loss = marks.loss(equity)
        if loss > self.settings.max_daily_loss:
            what = f"{loss:.2%} > {self.settings.max_daily_loss:.2%}"
            return self._daily_loss(f"{what} since equity {marks.start:.2f}", at) or change
        drawdown = marks.limit_drawdown(equity)
        if drawdown > self.settings.max_drawdown and self.state is TradingState.ACTIVE:
            what = (
                f"{drawdown:.2%} from the peak {marks.peak:.2f} > {self.settings.max_drawdown:.2%}"
            )
            why = f"{DRAWDOWN} {what}: only reducing orders {self._until()}"
            return self._move(TradingState.REDUCING, why, at)
        return change

    def _until(self) -> str:
        """How long a stop of the limits lasts, under the halt policy."""
        if self.halt_policy == "wait":
            return "until a person resumes (the limits are then measured from that equity)"
        if self.halt_policy == "stop":
            return "for the rest of the run (on_halt)"
        return "until the next day (on_halt)"

    def _daily_loss(self, what: str, at: datetime) -> TradingStatus | None:
        if self.halt_policy == "reduce_only":
            if self.state is TradingState.REDUCING:
                return None
            reason = f"{DAILY_LOSS} {what}: only reducing orders {self._until()}"
            return self._move(TradingState.REDUCING, reason, at)
        reason = f"{DAILY_LOSS} {what}: halted {self._until()}"
        return self._move(TradingState.HALTED, reason, at)

    def _stop_ends_with_day(self) -> bool:
        """A stop of the loss or drawdown limit that ends with its day (backtest.on_halt =
        resume_next_day or reduce_only); any other stop waits for a person."""
        return (
            self.state is not TradingState.ACTIVE
            and self.halt_policy in ("resume_next_day", "reduce_only")
            and self.status.reason.startswith((DAILY_LOSS, DRAWDOWN))
        )

    def drawdown(self, equity: Decimal) -> float:
        """The drawdown from the account's all-time high (its opening equity included): what
        the ledger's `equity.drawdown` records and the backtest report's max drawdown reads."""
        return 0.0 if self.day is None else self.day.drawdown(equity)

    def limit_drawdown(self, equity: Decimal) -> float:
        """The drawdown `max_drawdown` limits: from the running peak, re-based when trading
        last resumed (the same as `drawdown` until then)."""
        return 0.0 if self.day is None else self.day.limit_drawdown(equity)

    def daily_loss(self, equity: Decimal, at: datetime | None = None) -> float:
        """The loss since the day's reference equity (the previous day's close), as a share
        of it (what `max_daily_loss` limits); 0 when up. `at`: a time between ticks, which
        may be in a day the marks have not seen yet."""
        if self.day is None:
            return 0.0
        marks = self.day if at is None else self.day.on(self.day_of(at))
        return marks.loss(equity)

    def halt(self, reason: str, at: datetime) -> TradingStatus | None:
        if self.state is TradingState.HALTED:
            return None
        return self._move(TradingState.HALTED, reason, at)

    def resume(self, reason: str, at: datetime) -> TradingStatus | None:
        """Back to ACTIVE. A person resuming accepts the losses so far: the day's loss and the
        drawdown limit are measured from the last equity seen from now on (the reason says
        from what), else the next tick would stop trading again at once."""
        if self.state is TradingState.ACTIVE:
            return None
        if self.day is not None:
            self.day = self.day.rebased(self.day.last)
            reason = f"{reason}; limits measured from equity {self.day.last:.2f}"
        return self._move(TradingState.ACTIVE, reason, at)

    def restore(self, halt: TradingStatus, status: TradingStatus) -> bool:
        """`status` in place of `halt`, if `halt` is still the status: the end of a halt that
        changed nothing of the account (a ledger that could not be written), back to the state
        it stopped, the limits measured as they were (no person accepted a loss)."""
        if self.status is not halt:
            return False
        self.status = status
        return True

    def _move(self, state: TradingState, reason: str, at: datetime) -> TradingStatus:
        self.status = self.status.to(state, reason, at)
        return self.status
