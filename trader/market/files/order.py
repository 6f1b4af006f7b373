"""A bar file's rows in time order with one row per time: newest-first files reversed, rows out
of place moved, repeated times dropped (counted, and refused with --strict)."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from trader.market.files.arrow_numpy import to_arrow, to_numpy
from trader.market.files.columns import PRICE_COLUMNS
from trader.market.files.options import ReplayDataError
from trader.market.files.report import Conflict, Row, when

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Order:
    positions: Ints | None  # the file's rows in time order; None: already in order
    reversed: bool
    moved: int


def order(ms: Ints, strict: bool, path: Path, file_rows: Ints | None = None) -> Order:
    """Time order, stable: a newest-first file is reversed; otherwise rows out of place are
    moved, counted as the fewest rows that had to move (n minus the longest ordered run).
    Only a file mostly newest-first is called reversed: a shuffled one, whose longest run
    backward happens to beat its longest run forward, is not. `file_rows`: each row's index
    in the file, when `ms` holds only some of its rows (one instrument's)."""
    if _ascending(ms):
        return Order(None, False, 0)
    everything = np.arange(len(ms), dtype=np.int64)
    if _ascending(ms[::-1]):
        return Order(everything[::-1], True, 0)
    forward, backward = _longest_ordered(ms.tolist()), _longest_ordered(ms[::-1].tolist())
    reverse = backward > forward
    mostly_newest_first = reverse and 2 * backward > len(ms)
    base = everything[::-1] if reverse else everything
    if strict:
        row = int(base[int(np.flatnonzero(np.diff(ms[base]) < 0)[0]) + 1])
        row = (row if file_rows is None else int(file_rows[row])) + 1
        raise ReplayDataError(
            f"{path}: rows are not in time order ({len(ms) - max(forward, backward)} rows out "
            f"of place, the first at data row {row}); sort the file, or leave out --strict to "
            "have it sorted"
        )
    positions = base[np.argsort(ms[base], kind="stable")]
    return Order(positions, mostly_newest_first, len(ms) - max(forward, backward))


def _ascending(ms: Ints) -> bool:
    return bool(np.all(ms[1:] >= ms[:-1]))


def _longest_ordered(times: list[int]) -> int:
    """Length of the longest non-decreasing subsequence (patience sorting, n log n)."""
    tails: list[int] = []
    for time in times:
        at = bisect.bisect_right(tails, time)
        if at == len(tails):
            tails.append(time)
        else:
            tails[at] = time
    return len(tails)


@dataclass(frozen=True)
class Duplicates:
    keep: npt.NDArray[np.bool_] | None  # None: no time repeats
    identical: int = 0
    conflicting: int = 0
    first_conflict: Conflict | None = None


def duplicates(
    ms: Ints, values: list[pa.Array], positions: Ints | None, strict: bool, path: Path
) -> Duplicates:
    """Of rows sharing a time, the first in time order is kept; a repeat with the same values
    is dropped and counted, one with other values is a conflict (refused if strict)."""
    at_file = np.arange(len(ms)) if positions is None else positions
    ordered = ms[at_file]
    repeat = np.concatenate(([False], ordered[1:] == ordered[:-1]))
    if not repeat.any():
        return Duplicates(None)
    kept_at = np.maximum.accumulate(np.where(repeat, 0, np.arange(len(ms))))
    columns = [to_numpy(pc.fill_null(v, math.nan), np.float64) for v in values]
    matrix = np.column_stack(columns)[at_file]
    kept = matrix[kept_at]
    same = ((matrix == kept) | (np.isnan(matrix) & np.isnan(kept))).all(axis=1)
    conflicts = np.flatnonzero(repeat & ~same)
    first = None
    if len(conflicts):
        at = int(conflicts[0])
        kept_row = _row(ms, values, int(at_file[kept_at[at]]))
        first = Conflict(int(ordered[at]), kept_row, _row(ms, values, int(at_file[at])))
        if strict:
            raise ReplayDataError(
                f"{path}: {len(conflicts)} rows repeat a time with different values (first at "
                f"{when(first.start_ms)}: {first.kept[1:]} and {first.dropped[1:]}); remove "
                "the wrong rows, or leave out --strict to keep the first of each"
            )
    identical = int((repeat & same).sum())
    return Duplicates(~repeat, identical, len(conflicts), first)


def _row(ms: Ints, values: list[pa.Array], at: int) -> Row:
    open_, high, low, close, volume, *quote = (v[at].as_py() for v in values)
    return (int(ms[at]), open_, high, low, close, volume, quote[0] if quote else None)


def rows(
    ms: Ints, values: list[pa.Array], positions: Ints | None, keep: npt.NDArray[np.bool_] | None
) -> list[Row]:
    """The rows at `positions` (all, in file order, if None) that `keep` keeps."""
    if keep is not None:
        positions = (np.arange(len(ms)) if positions is None else positions)[keep]
    if positions is not None:
        ms, taken = ms[positions], to_arrow(positions, pa.int64())
        values = [v.take(taken) for v in values]
    columns = [v.to_pylist() for v in values]
    if len(columns) == len(PRICE_COLUMNS):
        columns.append([None] * len(ms))
    return list(zip(ms.tolist(), *columns, strict=True))
