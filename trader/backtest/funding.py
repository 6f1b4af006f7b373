"""A perpetual's backtest (`market.kind = "perp"`): the funding each strategy's positions paid
or received at every recorded funding time, booked as its own records (never folded into the
fees), and the positions marked on the recorded mark price.

The payment at a funding time is the mark price then x the signed position held then x the
rate, paid by the account when positive: with a positive rate longs pay and shorts receive
(Binance, USDⓈ-M "Introduction to Funding Rates": funding amount = position value x funding
rate, position value = mark price x size). The mark price is the exchange's own for that
charge where the funding record gives it (Binance's `markPrice`), else the close of the last
mark-price candle closed by then, else the last bar close (said in the report).

The position held at a funding time is what the fills before it left. A taker fill at a tick
is the engine's order after the bar closing at that tick was seen, so it comes after a funding
settled at that very time; a maker fill stamped at a tick filled during the bar ending then,
so before it. A funding time within `SAME_INSTANT_MS` of a tick is that tick's instant: recorded
funding times can sit a few milliseconds off the hour, and the order still followed the bar.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np

from trader.domain import Fill, Liquidity
from trader.domain.money import ZERO, decimal_from_float, exact
from trader.domain.perp import funding_payment
from trader.market.files.funding import (
    FundingRate,
    MarkPrices,
    PerpDataError,
    find_funding,
    find_marks,
    funding_path,
    read_funding,
    read_marks,
)
from trader.market.replay import Recording

FROM_RECORD, FROM_CANDLE, FROM_CLOSE = "funding record", "mark candle", "bar close"
SAME_INSTANT_MS = 60_000
ASSUME_ZERO_FLAG = "--assume-zero-funding"


@dataclass(frozen=True)
class FundingPayment:
    """One funding time's record for one symbol of one run."""

    symbol: str
    at_ms: int
    rate: Decimal
    mark: Decimal
    mark_from: str  # FROM_RECORD, FROM_CANDLE or FROM_CLOSE
    position: Decimal  # signed, held at the funding time
    paid: Decimal  # by the account; negative: received


@dataclass(frozen=True)
class PerpSymbol:
    """A perpetual's recordings beside its bars: funding times (none: assumed zero) and
    mark-price candles (None: none recorded)."""

    symbol: str
    rates: tuple[FundingRate, ...]
    marks: MarkPrices | None
    funding_file: Path | None
    mark_file: Path | None

    def mark_at(self, rate: FundingRate, closes: Closes) -> tuple[Decimal, str] | None:
        """The mark price a funding was paid on: the record's own, else the last mark-price
        candle's close by then, else the last bar close by then (None before any)."""
        if rate.mark is not None:
            return rate.mark, FROM_RECORD
        if self.marks is not None and (mark := self.marks.last_at(rate.at_ms)) is not None:
            return mark, FROM_CANDLE
        close = closes.last_at(rate.at_ms)
        return (close, FROM_CLOSE) if close is not None else None


@dataclass(frozen=True)
class Closes:
    """A symbol's bar closes by close time (epoch ms), in time order."""

    ends_ms: np.ndarray
    values: np.ndarray

    @classmethod
    def of(cls, closes: Mapping[int, float]) -> Closes:
        ends = sorted(closes)
        return cls(np.array(ends, dtype=np.int64), np.array([closes[t] for t in ends]))

    def last_at(self, at_ms: int) -> Decimal | None:
        index = int(np.searchsorted(self.ends_ms, at_ms, side="right")) - 1
        return decimal_from_float(float(self.values[index])) if index >= 0 else None


@dataclass(frozen=True)
class PerpData:
    symbols: Mapping[str, PerpSymbol]
    assumed_zero: tuple[str, ...] = ()  # symbols without funding data, run with the flag

    def warnings(self) -> list[str]:
        said = []
        if self.assumed_zero:
            said.append(
                f"funding assumed zero ({ASSUME_ZERO_FLAG}) for {', '.join(self.assumed_zero)}: "
                "no funding recording beside its bars, so no funding was paid or received; a "
                "perpetual pays it every funding interval, and these returns leave it out"
            )
        for perp in self.symbols.values():
            if perp.marks is None:
                said.append(
                    f"{perp.symbol}: no mark-price candles recorded: positions are marked on the "
                    "bar close, and funding on the funding records' markPrice where given, "
                    "else on the bar close"
                )
        return said

    def notes(self) -> list[str]:
        return [
            f"{p.symbol}: perpetual, {len(p.rates)} funding times from "
            f"{_shown(p.funding_file) if p.funding_file else 'nowhere'}"
            + (f", mark prices from {_shown(p.mark_file)}" if p.mark_file else "")
            for p in self.symbols.values()
        ]


def _shown(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


class MissingFunding(PerpDataError):
    """A perpetual's backtest over bars without a funding recording beside them."""


def load_perp_data(
    recordings: Iterable[Recording], length_ms: int, assume_zero: bool = False
) -> PerpData:
    """The funding and mark-price recordings beside each recording's bars. MissingFunding
    for bars without funding (unless `assume_zero`); PerpDataError for a file that cannot be
    read."""
    symbols: dict[str, PerpSymbol] = {}
    missing: list[Recording] = []
    for recording in recordings:
        funding, marks = find_funding(recording.path), find_marks(recording.path)
        if funding is None:
            missing.append(recording)
        rates = tuple(read_funding(funding)) if funding is not None else ()
        read = read_marks(marks, length_ms) if marks is not None else None
        symbols[recording.symbol] = PerpSymbol(recording.symbol, rates, read, funding, marks)
    if missing and not assume_zero:
        where = "; ".join(f"{r.symbol}: no {funding_path(r.path)}" for r in missing)
        raise MissingFunding(
            f"market.kind = perp, but there is no funding recording beside the bars ({where}): "
            "a perpetual's returns without its funding are misstated. `trader download` with "
            f"market.kind = perp records it; or give {ASSUME_ZERO_FLAG} to run with none (the "
            "report says so first)"
        )
    return PerpData(symbols, tuple(r.symbol for r in missing))


def _ms(fill: Fill) -> int:
    return int(fill.at.timestamp() * 1000)


def _signed(fill: Fill) -> Decimal:
    return fill.side.sign * fill.amount


def book_funding(
    fills: Sequence[Fill],
    perp: PerpSymbol,
    closes: Closes,
    first_ms: int,
    last_ms: int,
) -> list[FundingPayment]:
    """The funding of one symbol's `fills` (in time order) at each funding time in
    (first_ms, last_ms]: the run's ticks; none where no position was held."""
    booked: list[FundingPayment] = []
    ordered = sorted(fills, key=_ms)
    before, done = ZERO, 0  # the fills stamped before the funding time's instant, summed
    for rate in perp.rates:
        start, end = rate.at_ms - SAME_INSTANT_MS, rate.at_ms + SAME_INSTANT_MS
        with exact():
            while done < len(ordered) and _ms(ordered[done]) < start:
                before += _signed(ordered[done])
                done += 1
            held, same = before, done
            while same < len(ordered) and _ms(ordered[same]) <= end:
                if ordered[same].liquidity is Liquidity.MAKER:  # stamped then, filled before
                    held += _signed(ordered[same])
                same += 1
        if held == 0 or not first_ms < rate.at_ms <= last_ms:
            continue
        found = perp.mark_at(rate, closes)
        if found is None:
            continue  # before the first bar: nothing was held
        mark, source = found
        paid = funding_payment(mark, held, rate.rate)
        booked.append(FundingPayment(perp.symbol, rate.at_ms, rate.rate, mark, source, held, paid))
    return booked


def paid_by_tick(payments: Sequence[FundingPayment], ticks_ms: np.ndarray) -> np.ndarray:
    """Funding paid in all by each point of an equity curve (E_0 .. E_N: point i > 0 is the
    tick i - 1): a payment counts from the first tick at or after its instant."""
    paid = np.zeros(len(ticks_ms) + 1)
    for payment in payments:
        tick = int(np.searchsorted(ticks_ms, payment.at_ms - SAME_INSTANT_MS, side="left"))
        if tick < len(ticks_ms):
            paid[tick + 1 :] += float(payment.paid)
    return paid


def hold_funding(
    positions: np.ndarray, ticks_ms: np.ndarray, perp: PerpSymbol, closes: Closes
) -> np.ndarray:
    """Buy-and-hold's funding, paid in all by each point of its curve: its position after
    each tick (`positions`) held at each funding time in the period."""
    booked = []
    for rate in perp.rates:
        instant = rate.at_ms - SAME_INSTANT_MS
        tick = int(np.searchsorted(ticks_ms, instant, side="left")) - 1  # the last before it
        if tick < 0 or rate.at_ms > ticks_ms[-1] or not positions[tick]:
            continue
        found = perp.mark_at(rate, closes)
        if found is not None:
            held = decimal_from_float(float(positions[tick]))
            paid = funding_payment(found[0], held, rate.rate)
            booked.append(FundingPayment(perp.symbol, rate.at_ms, rate.rate, *found, held, paid))
    return paid_by_tick(booked, ticks_ms)


def marked(perp: PerpSymbol, ticks_ms: np.ndarray, closes: np.ndarray) -> np.ndarray:
    """The prices positions are valued at by each tick: the last mark-price candle closed by
    then, where recorded, else the bar close (`closes`, at the same ticks)."""
    if perp.marks is None:
        return closes
    marks = [perp.marks.last_at(int(t)) for t in ticks_ms]
    return np.array(
        [float(m) if m is not None else c for m, c in zip(marks, closes, strict=True)],
        dtype=np.float64,
    )


@dataclass(frozen=True)
class FundingTotals:
    times: int
    paid: Decimal  # the payments the account made
    received: Decimal  # the payments it received, positive

    @property
    def net(self) -> Decimal:
        """Paid less received: positive, the account paid."""
        with exact():
            return self.paid - self.received


def totals(payments: Iterable[FundingPayment]) -> FundingTotals:
    listed = list(payments)
    with exact():
        paid = sum((p.paid for p in listed if p.paid > 0), ZERO)
        received = sum((-p.paid for p in listed if p.paid < 0), ZERO)
    return FundingTotals(len(listed), paid, received)
