"""One-bar moves that look like a stock split (or a reverse split) in the prices traded.

A split changes the price by a fixed ratio overnight (2:1 halves it) while a holder's wealth
is unchanged; raw prices book it as a real loss or gain. A move is named when both hold:

- close-to-close, it is within TOLERANCE of a split ratio. The close is the ratio times the
  day's own move, and a day's own move is a few percent: TOLERANCE (5%, in log terms) covers
  that, while staying under half the log distance between any two ratios listed (the nearest,
  7:1 and 8:1, are 13% apart), so a move is near one ratio at most;
- it is far outside the series' usual moves: at least UNUSUAL robust standard deviations
  (1.4826 x the median absolute deviation of log returns, which one split cannot inflate as
  it inflates a plain standard deviation). A 2:1 split is a 69% log move: 30 deviations of a
  stock moving 2% a day, 100 of a crypto pair moving 0.7% an hour.

Where the file has an adjusted close, it settles the question: on a split the adjustment
(adjusted close / close) changes by the inverse of the ratio while the adjusted close moves as
on any day (`confirmed` True); when the adjusted close made the same move, the move was real
and is not named (a crash, not a split).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

# (name, new price / old price): n:1 splits divide the price by n, 1:n reverse splits
# multiply it.
RATIOS: tuple[tuple[str, float], ...] = (
    ("3:2", 2 / 3), ("2:1", 1 / 2), ("5:2", 2 / 5), ("3:1", 1 / 3), ("4:1", 1 / 4),
    ("5:1", 1 / 5), ("7:1", 1 / 7), ("8:1", 1 / 8), ("10:1", 1 / 10), ("20:1", 1 / 20),
    ("2:3", 3 / 2), ("1:2", 2.0), ("1:3", 3.0), ("1:4", 4.0), ("1:5", 5.0), ("1:10", 10.0),
    ("1:20", 20.0),
)  # fmt: skip
TOLERANCE = 0.05
UNUSUAL = 10.0
_MAD_TO_SD = 1.4826  # the median absolute deviation of a normal sample, as its deviation
_FLOOR = 1e-3  # a flat series' deviation (its MAD is 0): 0.1%, so one jump still stands out
_LOG_RATIOS = np.log([r for _, r in RATIOS])

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SplitMove:
    """Bar `index` (of the rows read, in time order) closed at `after` where the bar before
    closed at `before`: the move `ratio` looks like the split `name`. `deviations`: how many
    robust standard deviations of the series' log returns the move is. `adjusted_move`: the
    adjusted close's move that bar (None without one); `confirmed`: the adjustment changed by
    the split's ratio (None without an adjusted close, False when it changed otherwise)."""

    index: int
    start_ms: int
    before: float
    after: float
    name: str
    deviations: float
    adjusted_move: float | None = None
    confirmed: bool | None = None

    @property
    def ratio(self) -> float:
        return self.after / self.before

    @property
    def day(self) -> str:
        return datetime.fromtimestamp(self.start_ms / 1000, UTC).strftime("%Y-%m-%d")

    def describe(self) -> str:
        """The move, what it looks like and how sure that is, in a few words."""
        move = (
            f"close {self.before:,.6g} -> {self.after:,.6g} ({self.ratio - 1:+.1%}) in one bar,"
            f" {self.deviations:,.0f} times the usual move"
        )
        if self.confirmed:
            assert self.adjusted_move is not None
            adjusted = f"{self.adjusted_move - 1:+.1%}"
            return f"{move}: a {self.name} split (the adjusted close moved {adjusted})"
        if self.confirmed is False:
            assert self.adjusted_move is not None
            return (
                f"{move}: like a {self.name} split, but the adjusted close moved "
                f"{self.adjusted_move - 1:+.1%} (not by the split's ratio: check the file)"
            )
        return f"{move}: like a {self.name} split (no adjusted close to confirm it)"


def split_moves(
    starts_ms: Sequence[int] | npt.NDArray[np.int64],
    closes: Floats,
    adjusted: Floats | None = None,
) -> list[SplitMove]:
    """The one-bar moves of `closes` (in time order) that look like a split; `adjusted`: the
    adjusted close of the same rows, when the file has one. Bars whose close is not a positive
    number are passed over (hygiene drops them): the move is taken between valid closes."""
    closes = np.asarray(closes, dtype=np.float64)
    valid = np.flatnonzero(np.isfinite(closes) & (closes > 0))
    if valid.size < 3:
        return []
    logs = np.diff(np.log(closes[valid]))
    deviation = _robust_deviation(logs)
    distance = np.abs(logs[:, None] - _LOG_RATIOS[None, :])
    nearest = np.argmin(distance, axis=1)
    near = distance[np.arange(len(logs)), nearest] <= TOLERANCE
    unusual = np.abs(logs) >= UNUSUAL * deviation
    found = []
    starts = np.asarray(starts_ms, dtype=np.int64)
    for k in np.flatnonzero(near & unusual).tolist():
        i, h = int(valid[k + 1]), int(valid[k])
        move = SplitMove(
            i, int(starts[i]), float(closes[h]), float(closes[i]), RATIOS[nearest[k]][0],
            float(abs(logs[k]) / deviation),
        )  # fmt: skip
        judged = move if adjusted is None else _judged(move, adjusted[h], adjusted[i], nearest[k])
        if judged is not None:  # None: the adjusted close made the move too, a real one
            found.append(judged)
    return found


def _robust_deviation(logs: Floats) -> float:
    median = float(np.median(logs))
    return max(_MAD_TO_SD * float(np.median(np.abs(logs - median))), _FLOOR)


def _judged(move: SplitMove, before: float, after: float, ratio: int) -> SplitMove | None:
    """`move` with what the adjusted close says; None when it made the same move (real)."""
    if not (before > 0 and after > 0):  # NaN too: nothing to judge by
        return move
    adjusted_move = float(after / before)
    factor_change = np.log(move.ratio / adjusted_move)  # log of the adjustment's change
    if abs(factor_change) <= TOLERANCE:
        return None
    confirmed = abs(factor_change - _LOG_RATIOS[ratio]) <= TOLERANCE
    return SplitMove(
        move.index, move.start_ms, move.before, move.after, move.name, move.deviations,
        adjusted_move, bool(confirmed),
    )  # fmt: skip


def restamped(moves: Sequence[SplitMove], starts_ms: Sequence[int]) -> tuple[SplitMove, ...]:
    """`moves` with the start of their bar in `starts_ms` (the rows' starts as a calendar read
    them later: a zone or bar ends; the rows stay in their order)."""
    return tuple(replace(m, start_ms=int(starts_ms[m.index])) for m in moves)
