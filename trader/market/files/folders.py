"""--data DIR: a directory of bar files, one instrument each, read in name order; what is not
a bar file by its name (a README, a subdirectory, a hidden file) is left out and said."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trader.market.files.options import ReplayDataError

_BAR_FILE = re.compile(r"\.(csv|tsv|txt|parquet|pq)(\.(gz|bz2|zst|lz4))?$", re.IGNORECASE)


@dataclass(frozen=True)
class Listed:
    """A bar file to read, and what was left out of its directory (said once, with its first
    file)."""

    path: Path
    left_out: str | None = None


def bar_files(paths: Sequence[Path]) -> list[Listed]:
    """The files given, with each directory replaced by its bar files in name order."""
    listed: list[Listed] = []
    for path in paths:
        if not path.is_dir():
            listed.append(Listed(path))
            continue
        entries = sorted(path.iterdir())
        files = [e for e in entries if e.is_file() and _BAR_FILE.search(e.name)]
        files = [f for f in files if not f.name.startswith(".")]
        if not files:
            raise ReplayDataError(
                f"{path}: is a directory without CSV or Parquet files of bars (names ending "
                ".csv, .csv.gz, .parquet...)"
            )
        others = [e.name + ("/" if e.is_dir() else "") for e in entries if e not in files]
        note = f"left out of {path}: {', '.join(others)} (not CSV or Parquet)" if others else None
        listed += [Listed(f, note if i == 0 else None) for i, f in enumerate(files)]
    return listed
