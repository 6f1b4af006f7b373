"""Schema versions, applied forward in order; `PRAGMA user_version` records the last one."""

MIGRATIONS: tuple[str, ...] = (
    # 1: the rolling window of recent bars, so a restart need not refetch history.
    """
    CREATE TABLE bars (
        symbol TEXT NOT NULL,
        timeframe TEXT NOT NULL,
        start_ms INTEGER NOT NULL,
        open REAL NOT NULL,
        high REAL NOT NULL,
        low REAL NOT NULL,
        close REAL NOT NULL,
        volume REAL NOT NULL,
        quote_volume REAL,
        PRIMARY KEY (symbol, timeframe, start_ms)
    ) WITHOUT ROWID;
    """,
)
