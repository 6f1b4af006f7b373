"""The crash-safe ledger: SQLite in WAL mode, on a thread of its own."""

from trader.ledger.bars import BarStore
from trader.ledger.database import Database

__all__ = ["BarStore", "Database"]
