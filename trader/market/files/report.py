"""The report of how a bar file was read: what was found, repaired or guessed, as notes for
people and as log fields."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trader.domain import from_epoch_ms
from trader.market.files.adjustment import Adjustment
from trader.market.files.splits import SplitMove

# start ms, open, high, low, close, volume, quote volume (None when the file has none)
Row = tuple[int, float, float, float, float, float, float | None]

# How the times were placed in UTC (FileReport.zone); the quiet ones need no note.
AWARE = "times with offsets converted to UTC"
NAIVE_AS_UTC = "naive times read as UTC"
DATES_AS_UTC = "dates read as 00:00 UTC"
EPOCH_UTC = "epoch times are UTC"
_QUIET_ZONES = (AWARE, DATES_AS_UTC, EPOCH_UTC)


@dataclass(frozen=True)
class Conflict:
    """The first time written twice with different values: the row kept and a row dropped."""

    start_ms: int
    kept: Row
    dropped: Row


@dataclass(frozen=True)
class Picked:
    """The instrument whose rows were read: the file's column naming instruments, the value
    kept, and the rows of other instruments left out."""

    column: str
    value: str
    other_rows: int = 0
    other_values: int = 0


@dataclass(frozen=True)
class FileReport:
    """How a file was read. `time_column_found`: "named", "first column" (unnamed), "pandas
    index" (Parquet's __index_level_0__) or "given";
    `time_kind`: datetime, date, epoch_s/ms/us/ns or "text <strptime format>"; `date_order`:
    iso, month-first, day-first, format (given) or epoch."""

    path: Path
    rows_read: int
    time_column: str
    time_column_found: str
    time_kind: str
    zone: str
    date_order: str
    ignored_columns: tuple[str, ...] = ()
    reversed: bool = False
    moved_rows: int = 0
    identical_duplicates: int = 0
    conflicting_duplicates: int = 0
    first_conflict: Conflict | None = None
    adjustment: Adjustment | None = None  # what was done with an adjusted close, if any
    volume_known: bool = True  # False: no volume column (an index): volumes read as 0
    splits: tuple[SplitMove, ...] = ()  # one-bar moves like a split in the prices traded
    instrument: Picked | None = None  # rows_read counts its rows alone

    @property
    def rows_kept(self) -> int:
        return self.rows_read - self.identical_duplicates - self.conflicting_duplicates

    @property
    def naive_times(self) -> bool:
        """The times had no zone and none was given: they were read as UTC."""
        return self.zone == NAIVE_AS_UTC

    @property
    def repaired(self) -> bool:
        """Rows were moved or dropped (a reversed file alone is not a repair)."""
        return self.rows_kept != self.rows_read or self.moved_rows > 0

    def notes(self) -> list[str]:
        """What a reader of the data should know; nothing for a clean file with zoned times."""
        notes = [] if self.zone in _QUIET_ZONES else [self.zone]
        if (picked := self.instrument) is not None:
            others = picked.other_values
            left = f", {picked.other_rows} rows of {others} others left out" if others else ""
            notes.append(f"rows of {picked.value} (column {shown(picked.column)}){left}")
        if self.date_order in ("month-first", "day-first"):
            notes.append(f"dates read {self.date_order}, as the file's values show")
        if self.ignored_columns:
            notes.append(f"ignored columns: {', '.join(map(shown, self.ignored_columns))}")
        if self.adjustment is not None:
            notes.append(self.adjustment.note())
        if not self.volume_known:
            notes.append("no volume column: volume unknown (0 in the bars read)")
        notes += [f"{split.day}: {split.describe()}" for split in self.splits]
        if self.reversed:
            notes.append("newest-first rows reversed")
        if self.moved_rows:
            notes.append(f"{self.moved_rows} rows out of time order moved into place")
        if self.identical_duplicates:
            notes.append(
                f"{self.identical_duplicates} repeated rows (same time and values) dropped"
            )
        if self.first_conflict is not None:
            first = self.first_conflict
            notes.append(
                f"{self.conflicting_duplicates} rows repeat a time with other values: the first"
                f" row of each time kept, the others dropped (first at {when(first.start_ms)}:"
                f" kept {first.kept[1:]}, dropped {first.dropped[1:]})"
            )
        return notes

    def log_fields(self) -> dict[str, Any]:
        """The report as structured log fields."""
        return {
            "path": str(self.path),
            "rows_read": self.rows_read,
            "rows": self.rows_kept,
            "time_column": shown(self.time_column),
            "time_column_found": self.time_column_found,
            "time_kind": self.time_kind,
            "zone": self.zone,
            "date_order": self.date_order,
            "ignored_columns": list(self.ignored_columns),
            "instrument": self.instrument.value if self.instrument else None,
            "reversed": self.reversed,
            "moved_rows": self.moved_rows,
            "identical_duplicates": self.identical_duplicates,
            "conflicting_duplicates": self.conflicting_duplicates,
            "prices": self.adjustment.prices if self.adjustment else "as written",
            "volume_known": self.volume_known,
            "splits": [f"{split.day} {split.name}" for split in self.splits],
            "notes": self.notes(),
        }


def shown(name: str) -> str:
    """A column name as messages show it: pandas' unnamed index is "(unnamed)", and a name
    with line breaks or other unprintable characters is quoted so the refusal stays one line."""
    if not name.strip():
        return "(unnamed)"
    return name if name.isprintable() else repr(name)


def listed(names: Sequence[str]) -> str:
    return ", ".join(map(shown, names))


def when(ms: int) -> str:
    try:
        return from_epoch_ms(ms).strftime("%Y-%m-%d %H:%M:%S UTC")
    except OverflowError:  # a damaged time, beyond the years 1 to 9999: said as written
        return f"{ms} ms after 1970-01-01 UTC"
