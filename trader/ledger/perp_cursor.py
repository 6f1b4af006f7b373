"""What the ledger says about a perpetual's funding: the last position (the one held now, or
the last one closed), when it opened (from flat, or by a reversal) and closed, its fills, the
last funding time booked for the symbol, and the funding the position held now paid since it
opened.

The live perp tape asks the venue for the funding times after `FundingCursor.after` and pays
each on `held_at` its time (a refresh that failed at one tick leaves that tick's funding time
unbooked, and the next good refresh finds it here, whatever the last tick was, even if the
position was closed since); the perp stage's isolated margin at a restart is the position's
margin less `paid_since_open` (Binance takes an isolated position's funding from its own
margin).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from trader.domain.money import ZERO, exact
from trader.ledger.codec import parse_time

Moves = tuple[tuple[datetime, Decimal], ...]  # fills: (time, signed amount)


@dataclass(frozen=True)
class LastPosition:
    """The last position of a symbol in the ledger: opened (from flat, or by a reversal, which
    closes the old position and opens a new one in one-way mode), closed (None: held now)."""

    opened_at: datetime
    closed_at: datetime | None
    moves: Moves  # its fills, the opening's own part first and the closing one last


@dataclass(frozen=True)
class FundingCursor:
    symbol: str
    held: Decimal  # the ledger's position now (signed)
    last: LastPosition | None  # None: never traded
    funded_through: datetime | None  # the last funding time booked for it (any source)
    paid_since_open: Decimal  # funding rows since the held position opened (0 when flat)

    @property
    def opened_at(self) -> datetime | None:
        """When the position held now opened (None: flat)."""
        return self.last.opened_at if self.last is not None and self.held != 0 else None

    def held_at(self, at: datetime) -> Decimal:
        """The last position's size at `at`: the ledger's now, less its fills since."""
        if self.last is None or at < self.last.opened_at:
            return ZERO
        with exact():
            return self.held - sum((m for when, m in self.last.moves if when > at), ZERO)

    def after(self, same_instant: timedelta) -> datetime | None:
        """Funding times after this one are still to judge for the last position: the later
        of the last one booked and its opening (a funding time within `same_instant` after
        the opening fill belongs to that tick, when the position was not held yet)."""
        if self.last is None:
            return None
        opened = self.last.opened_at + same_instant
        if self.funded_through is None:
            return opened
        return max(self.funded_through, opened)


def _signed(side: str, amount: str) -> Decimal:
    value = Decimal(amount)
    return value if side == "buy" else -value


def _last_position(fills: Sequence[tuple[str, str, str]]) -> tuple[Decimal, LastPosition | None]:
    """The net position of `fills` (side, amount, at; in booking order) and its last
    position."""
    held, last = ZERO, None
    moves: list[tuple[datetime, Decimal]] = []
    with exact():
        for side, amount, at in fills:
            before, signed, when = held, _signed(side, amount), parse_time(at)
            held = held + signed
            if before != 0 and (held == 0 or (before > 0) != (held > 0)):  # closed
                moves.append((when, -before))
                last = LastPosition(last.opened_at, when, tuple(moves)) if last else None
            if held != 0 and (before == 0 or (before > 0) != (held > 0)):  # opened
                moves = [(when, held)]
                last = LastPosition(when, None, tuple(moves))
            elif held != 0:
                moves.append((when, signed))
                last = LastPosition(last.opened_at, None, tuple(moves)) if last else None
    return held, last


def funding_cursors(c: sqlite3.Connection, symbols: Sequence[str]) -> dict[str, FundingCursor]:
    """Each symbol's `FundingCursor` from the fills and funding tables."""
    out: dict[str, FundingCursor] = {}
    for symbol in symbols:
        fills = c.execute(
            "SELECT side, amount, at FROM fills WHERE symbol = ? ORDER BY at, rowid", (symbol,)
        ).fetchall()
        held, last = _last_position(fills)
        rows = c.execute("SELECT at, paid FROM funding WHERE symbol = ?", (symbol,)).fetchall()
        times = [(parse_time(at), Decimal(paid)) for at, paid in rows]
        through = max((at for at, _ in times), default=None)
        opened = last.opened_at if last is not None and held != 0 else None
        with exact():
            paid = sum((p for at, p in times if opened is not None and at > opened), ZERO)
        out[symbol] = FundingCursor(symbol, held, last, through, paid)
    return out
