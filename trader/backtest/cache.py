"""Forecasts on disk, keyed by model, weights, parameters and the window's data.

One SQLite file (WAL) per cache folder. An entry's key is a digest of the model's description
(its name, class, every parameter it holds, a fingerprint of its loaded weights, the horizon,
quantile levels and batch size) and of the window it forecast. Forecasts are stored as the
ledger stores them: exact float64 arrays. Every batch is committed as it is done, so an
interrupted run keeps what it computed, and two runs may share a folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sqlite3
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trader.domain import Forecast, Timeframe
from trader.forecast.protocol import Forecaster
from trader.ledger.forecast_rows import forecast_row, read_forecast
from trader.private_files import open_private, owned_folder

FILE = "forecasts.sqlite3"
# Attributes that count what happened (recompiles), not how forecasts are made.
_COUNTERS = frozenset({"compile_stats"})
_SCHEMA = """
CREATE TABLE IF NOT EXISTS forecasts (
    key BLOB PRIMARY KEY,
    symbol TEXT NOT NULL, model TEXT NOT NULL, as_of TEXT NOT NULL, steps INTEGER NOT NULL,
    fields TEXT NOT NULL, levels TEXT NOT NULL, quantiles BLOB NOT NULL, mean BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS models (model_key BLOB PRIMARY KEY, description TEXT NOT NULL)
"""


def _simple(value: object) -> object | None:
    """A parameter as JSON, or None for what is not a parameter (a module, a callable)."""
    torch = sys.modules.get("torch")  # not loaded: no parameter can be one of its types
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, tuple | list) and all(
        isinstance(v, bool | int | float | str) for v in value
    ):
        return list(value)
    if torch is not None and isinstance(value, torch.device):
        return str(value.type)  # cuda:0 and cuda:1 compute the same
    if torch is not None and isinstance(value, torch.dtype):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _simple(v) for k, v in dataclasses.asdict(value).items()}
    return None


def weights_fingerprint(forecaster: object) -> str:
    """A digest of every tensor of the forecaster's torch modules (names, dtypes, shapes and
    bytes): the weights it actually loaded, wherever they came from. Empty for no modules."""
    torch = sys.modules.get("torch")
    if torch is None:
        return ""  # torch not loaded: the forecaster holds no module
    digest = hashlib.blake2b(digest_size=16)
    modules = sorted(
        (name, value)
        for name, value in vars(forecaster).items()
        if isinstance(value, torch.nn.Module)
    )
    for module_name, module in modules:
        for name, tensor in sorted(module.state_dict().items()):
            data = tensor.detach().to("cpu").contiguous()
            digest.update(f"{module_name}.{name}|{data.dtype}|{tuple(data.shape)}|".encode())
            digest.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest() if modules else ""


def describe_model(
    forecaster: Forecaster,
    *,
    horizon: int,
    quantiles: Sequence[float],
    context: int,
    batch: int,
) -> dict[str, Any]:
    """What a cached forecast depends on besides its window."""
    parameters = {
        name: simple
        for name, value in sorted(vars(forecaster).items())
        if not name.startswith("_")
        and name not in _COUNTERS
        and (simple := _simple(value)) is not None
    }
    return {
        "model": forecaster.name,
        "class": f"{type(forecaster).__module__}.{type(forecaster).__qualname__}",
        "parameters": parameters,
        "weights": weights_fingerprint(forecaster),
        "horizon": horizon,
        "quantiles": [float(q) for q in quantiles],
        "context": context,
        "batch": batch,
    }


def model_key(description: Mapping[str, Any]) -> bytes:
    text = json.dumps(description, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def entry_key(model: bytes, window: bytes) -> bytes:
    return hashlib.blake2b(model + window, digest_size=16).digest()


class ForecastCache:
    """Forecasts by entry key. Not thread-safe: one thread uses an instance at a time."""

    def __init__(self, folder: Path) -> None:
        # Another user's forecasts planted here would be backtested as the model's: the folder
        # is this user's alone and the file private (SQLite gives its -wal and -shm its mode).
        self.path = owned_folder(folder, "backtest.cache_dir") / FILE
        os.close(open_private(self.path))
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a lost entry is only recomputed
        self._db.execute("PRAGMA busy_timeout=30000")
        # A backtest reads tens of thousands of entries: up to 64 MB of pages kept in memory.
        self._db.execute("PRAGMA cache_size=-65536")
        self._db.executescript(_SCHEMA)

    def remember_model(self, key: bytes, description: Mapping[str, Any]) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO models VALUES (?, ?)",
            (key, json.dumps(description, sort_keys=True)),
        )

    def put(self, entries: Iterable[tuple[bytes, Forecast]]) -> None:
        rows = [(key, *forecast_row("", forecast)[1:]) for key, forecast in entries]
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(
                "INSERT OR REPLACE INTO forecasts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def rows(self, keys: Iterable[bytes]) -> dict[bytes, tuple[object, ...]]:
        """The stored rows of `keys` (those the cache holds), for `read_forecast`."""
        wanted = sorted(keys)  # in the table's order: each batch reads neighbouring pages
        found: dict[bytes, tuple[object, ...]] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            columns = "key, symbol, model, as_of, steps, fields, levels, quantiles, mean"
            query = f"SELECT {columns} FROM forecasts WHERE key IN ({marks})"  # noqa: S608 - placeholders only
            for key, *row in self._db.execute(query, chunk):
                found[key] = tuple(row)
        return found

    def get(self, key: bytes, timeframe: Timeframe) -> Forecast | None:
        row = self._db.execute(
            "SELECT symbol, model, as_of, steps, fields, levels, quantiles, mean "
            "FROM forecasts WHERE key = ?",
            (key,),
        ).fetchone()
        return read_forecast(row, timeframe) if row is not None else None

    def close(self) -> None:
        self._db.close()
