"""A bar file's bytes as a pyarrow table: Parquet, or CSV (optionally compressed) with any of
the separators spreadsheets write; anything else refused, saying what the file is."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from trader.market.files.columns import PRICE_COLUMNS, QUOTE_VOLUME_COLUMNS, time_columns
from trader.market.files.options import ReadOptions, ReplayDataError

_PARQUET_SUFFIXES = (".parquet", ".pq")
_MAGIC = {
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF8": "a GIF image",
    b"%PDF": "a PDF document",
    b"PK\x03\x04": "a ZIP archive (an Excel workbook? export it as CSV)",
    b"\xd0\xcf\x11\xe0": "an old Office file (an Excel workbook? export it as CSV)",
}
_HEAD_BYTES = 64 * 1024
# Byte-order marks of the wide encodings, UTF-32 first (its little-endian mark starts with
# UTF-16's).
_WIDE_TEXT = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}
# pyarrow's missing-value spellings less its NaNs: a NaN in the file stays NaN in the row.
_MISSING = ("", "#N/A", "#N/A N/A", "#NA", "N/A", "NA", "NULL", "n/a", "null")
# Naive ISO times become timestamps as the CSV is parsed; times with offsets stay text, for
# their offsets to be seen (files/offsets.py: one column mixing them is refused).
_TIMESTAMP_PARSERS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")


def read_table(path: Path, options: ReadOptions) -> pa.Table:
    """The file as a table; ReplayDataError if it is missing, empty or not bars."""
    if not path.exists():
        raise ReplayDataError(f"{path}: no such file")
    if not path.is_file():
        raise ReplayDataError(f"{path}: is not a file; give a CSV or Parquet file of bars")
    if path.stat().st_size == 0:
        raise ReplayDataError(f"{path}: is empty (0 bytes); it needs a header row and bars")
    with path.open("rb") as handle:
        magic = handle.read(8)
    for prefix, what in _MAGIC.items():
        if magic.startswith(prefix):
            raise ReplayDataError(f"{path}: is {what}, not a CSV or Parquet file of bars")
    if magic.startswith(b"PAR1") or path.suffix.lower() in _PARQUET_SUFFIXES:
        with arrow_errors(path, "is not a readable Parquet file", "write or download it again"):
            return pq.read_table(path)
    # Compression is told by the name (.gz, .bz2, .zst) or, for gzip, by its first bytes.
    return _read_csv(path, "gzip" if magic.startswith(b"\x1f\x8b") else "detect", options)


def _read_csv(path: Path, compression: str, options: ReadOptions) -> pa.Table:
    header = _csv_header(path, compression)
    delimiter = _delimiter(header)
    names = next(csv.reader([header], delimiter=delimiter))
    # Values as float64 whatever the first block looks like: "100" in the first megabyte must
    # not make a column integer and "100.5" further down an error.
    numeric = PRICE_COLUMNS + QUOTE_VOLUME_COLUMNS
    types = {name: pa.float64() for name in names if name.strip().lower() in numeric}
    if options.date_format is not None:
        # Times in a stated format stay text as written, not as pyarrow would rewrite them.
        types |= {name: pa.string() for name in time_columns(names, options, path)[0]}
    remedy = "every row needs the header's columns, with numbers for prices and volumes"
    with arrow_errors(path, "is not a CSV file of bars", remedy):
        return pa_csv.read_csv(
            pa.input_stream(str(path), compression=compression),
            parse_options=pa_csv.ParseOptions(delimiter=delimiter),
            convert_options=pa_csv.ConvertOptions(
                column_types=types, null_values=_MISSING, timestamp_parsers=_TIMESTAMP_PARSERS
            ),
        )


def _csv_header(path: Path, compression: str) -> str:
    """The first line, once the file is known to be text."""
    with (
        arrow_errors(path, "cannot be decompressed", "write or download it again"),
        pa.input_stream(str(path), compression=compression) as stream,
    ):
        head: bytes = stream.read(_HEAD_BYTES)
    # Text in a wide Unicode encoding is full of NULs: named by its byte-order mark, not
    # called binary (spreadsheets save "Unicode text" as UTF-16).
    wide = next((name for mark, name in _WIDE_TEXT.items() if head.startswith(mark)), None)
    if wide is not None:
        raise ReplayDataError(f"{path}: is {wide} text; save it as UTF-8")
    codes = np.frombuffer(head, np.uint8)
    controls = int(np.count_nonzero((codes < 9) | ((codes > 13) & (codes < 32))))
    if b"\x00" in head or controls > len(head) // 10:
        raise ReplayDataError(
            f"{path}: is binary (or text in UTF-16 without its byte-order mark), not a CSV or "
            "Parquet file of bars"
        )
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if not text.strip():
        raise ReplayDataError(f"{path}: is empty (no header row); it needs a header row and bars")
    first: str = next(line for line in text.splitlines() if line.strip())
    return first


def _delimiter(header: str) -> str:
    """Commas, else the separator spreadsheets in some locales write."""
    if "," in header:
        return ","
    return next((d for d in (";", "\t", "|") if d in header), ",")


@contextmanager
def arrow_errors(path: Path, problem: str, remedy: str) -> Iterator[None]:
    """pyarrow's errors as ReplayDataError: the file, what is wrong (in pyarrow's words too)
    and what to do."""
    try:
        yield
    except ReplayDataError:
        raise
    except UnicodeDecodeError:
        raise ReplayDataError(f"{path}: is not UTF-8 text; save it as UTF-8") from None
    except (pa.ArrowException, OSError) as error:
        text = str(error).strip()
        detail = text.splitlines()[0] if text else type(error).__name__
        if "UTF8" in detail or "UTF-8" in detail:
            raise ReplayDataError(f"{path}: is not UTF-8 text; save it as UTF-8") from None
        raise ReplayDataError(f"{path}: {problem} ({detail}); {remedy}") from None
