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
    # 2: the trading record. Money is TEXT (exact decimals); times are ISO-8601 UTC text of one
    # fixed width, so they sort as they read. Positions and cash are kept with the fills that
    # made them, in the same transaction, and must always equal what the fills imply.
    """
    CREATE TABLE account (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        currency TEXT NOT NULL,
        starting_cash TEXT NOT NULL,
        cash TEXT NOT NULL,
        fees_paid TEXT NOT NULL
    );
    CREATE TABLE positions (
        symbol TEXT PRIMARY KEY,
        amount TEXT NOT NULL,
        lots TEXT NOT NULL,
        realized_pnl TEXT NOT NULL
    );
    CREATE TABLE orders (
        client_order_id TEXT PRIMARY KEY,
        strategy TEXT NOT NULL,
        symbol TEXT NOT NULL,
        side TEXT NOT NULL,
        type TEXT NOT NULL,
        amount TEXT NOT NULL,
        limit_price TEXT,
        created_at TEXT NOT NULL,
        expires_at TEXT,
        status TEXT NOT NULL,
        filled_amount TEXT NOT NULL,
        exchange_order_id TEXT,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX orders_open ON orders (status) WHERE status NOT IN
        ('filled', 'canceled', 'rejected', 'expired');
    CREATE TABLE order_events (
        id INTEGER PRIMARY KEY,
        client_order_id TEXT NOT NULL REFERENCES orders (client_order_id),
        at TEXT NOT NULL,
        status TEXT NOT NULL,
        detail TEXT NOT NULL
    );
    CREATE TABLE fills (
        fill_id TEXT PRIMARY KEY,
        client_order_id TEXT NOT NULL REFERENCES orders (client_order_id),
        symbol TEXT NOT NULL,
        side TEXT NOT NULL,
        price TEXT NOT NULL,
        amount TEXT NOT NULL,
        fee TEXT NOT NULL,
        fee_currency TEXT NOT NULL,
        liquidity TEXT NOT NULL,
        at TEXT NOT NULL
    );
    CREATE TABLE market_cursor (
        symbol TEXT PRIMARY KEY,
        last_bar_start TEXT NOT NULL
    );
    CREATE TABLE ticks (
        at TEXT PRIMARY KEY,
        finished_at TEXT NOT NULL,
        outcome TEXT NOT NULL,
        ready INTEGER NOT NULL,
        skipped TEXT NOT NULL,
        timings TEXT NOT NULL
    );
    CREATE TABLE forecasts (
        tick TEXT NOT NULL,
        symbol TEXT NOT NULL,
        model TEXT NOT NULL,
        as_of TEXT NOT NULL,
        steps INTEGER NOT NULL,
        fields TEXT NOT NULL,
        levels TEXT NOT NULL,
        quantiles BLOB NOT NULL,
        mean BLOB NOT NULL,
        PRIMARY KEY (tick, symbol, model)
    ) WITHOUT ROWID;
    CREATE TABLE decisions (
        tick TEXT NOT NULL,
        symbol TEXT NOT NULL,
        strategy TEXT NOT NULL,
        direction TEXT NOT NULL,
        reason TEXT NOT NULL,
        inputs TEXT NOT NULL,
        PRIMARY KEY (tick, symbol, strategy)
    ) WITHOUT ROWID;
    CREATE TABLE equity (
        at TEXT PRIMARY KEY,
        equity TEXT NOT NULL,
        cash TEXT NOT NULL,
        exposure TEXT NOT NULL,
        drawdown REAL NOT NULL
    );
    CREATE TABLE trading_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        state TEXT NOT NULL,
        reason TEXT NOT NULL,
        since TEXT NOT NULL,
        day TEXT,
        day_start_equity TEXT,
        day_peak_equity TEXT
    );
    CREATE TABLE trading_state_events (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        state TEXT NOT NULL,
        reason TEXT NOT NULL
    );
    """,
    # 3: reconciliation with the broker. Each run's verdict and full report; the venue's
    # balances when the ledger's account was opened (live), against which later balances are
    # compared (the daemon may trade with a part of the account only).
    """
    CREATE TABLE reconciliations (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        broker TEXT NOT NULL,
        ok INTEGER NOT NULL,
        summary TEXT NOT NULL,
        report TEXT NOT NULL
    );
    CREATE TABLE venue_baseline (
        asset TEXT PRIMARY KEY,
        amount TEXT NOT NULL,
        taken_at TEXT NOT NULL
    );
    """,
    # 4: the nonces of signed operator commands, kept while their command could still pass the
    # freshness check (`fresh_until`), so a command captured on the broker is refused as
    # replayed after a restart too.
    """
    CREATE TABLE command_nonces (
        nonce TEXT PRIMARY KEY,
        command TEXT NOT NULL,
        seen_at TEXT NOT NULL,
        fresh_until TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX command_nonces_fresh ON command_nonces (fresh_until);
    """,
    # 5: forecast skill. Each forecast scored once its horizon's
    # bars closed: the figures' sums over its steps (JSON), the no-change forecast's beside
    # them, or why it could not be scored. The key makes scoring a forecast twice impossible.
    """
    CREATE TABLE forecast_scores (
        symbol TEXT NOT NULL,
        model TEXT NOT NULL,
        as_of TEXT NOT NULL,
        scored_at TEXT NOT NULL,
        steps INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        sums TEXT NOT NULL,
        naive TEXT NOT NULL,
        PRIMARY KEY (symbol, model, as_of)
    ) WITHOUT ROWID;
    CREATE INDEX forecasts_as_of ON forecasts (as_of);
    """,
    # 6: no index of the open orders. Opening the ledger reads every order anyway (each one's
    # fills are checked), and the index cost each order row written a third of its time.
    """
    DROP INDEX orders_open;
    """,
    # 7: the risk limits measured the same on every timeframe: a day's loss from the last
    # equity before the day began (kept as `last_equity`), the drawdown from the account's
    # all-time high (`high_equity`; `day_peak_equity` is now the drawdown limit's running
    # peak, re-based when trading resumes). An older ledger takes its last booked equity, and
    # its highest booked equity or starting cash (the text of the highest, so it stays exact).
    """
    ALTER TABLE trading_state ADD COLUMN last_equity TEXT;
    ALTER TABLE trading_state ADD COLUMN high_equity TEXT;
    UPDATE trading_state SET
        last_equity = (SELECT equity FROM equity ORDER BY at DESC LIMIT 1),
        high_equity = (
            SELECT value FROM (
                SELECT equity AS value FROM equity UNION ALL SELECT starting_cash FROM account
            ) ORDER BY CAST(value AS REAL) DESC LIMIT 1
        )
    WHERE day IS NOT NULL;
    """,
    # 8: fees a venue posts after the fills (Alpaca, at the end of the day). A fill's fee may
    # be an estimate (`fee_estimated`); the posted fee is kept beside it as a correction, never
    # in place of it: the portfolio moved by the difference when the correction was booked,
    # after the fills booked before it (`after_fill`, a fills rowid: replayed in that order).
    # A posting corrects once: its venue id is a key.
    """
    ALTER TABLE fills ADD COLUMN fee_estimated INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE fee_corrections (
        id INTEGER PRIMARY KEY,
        after_fill INTEGER NOT NULL,
        symbol TEXT NOT NULL,
        currency TEXT NOT NULL,
        day TEXT NOT NULL,
        estimated TEXT NOT NULL,
        posted TEXT NOT NULL,
        price TEXT NOT NULL,
        fills TEXT NOT NULL,
        postings TEXT NOT NULL,
        booked_at TEXT NOT NULL
    );
    CREATE TABLE fee_postings (
        posting_id TEXT PRIMARY KEY,
        correction INTEGER NOT NULL REFERENCES fee_corrections (id)
    ) WITHOUT ROWID;
    """,
    # 9: the latest time a signed command was admitted at, on a clock that never goes back: the
    # nonces expire by it and commands older than it less the window are stale, so stepping
    # the wall clock back cannot reopen a captured command's window (`ledger/nonces.py`).
    """
    CREATE TABLE command_clock (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        latest TEXT NOT NULL
    );
    """,
    # 10: what `trader shortfall` needs to replay a daemon's period through the backtest.
    # `run_settings`: the effective settings each start ran with (JSON by setting key, secrets
    # left out), once per digest; `daemon_runs`: one row per start (`began_by` "start") or
    # settings reload ("reload": the strategy and risk sections changed while running), its
    # end (NULL: still running, or it was killed), the code version and the broker and venue
    # it traded on, so each stretch is replayed with the settings in force then and restarts
    # are seen.
    # `decision_quotes`: the bid/ask each decision was made on and its source (real,
    # modelled, synthetic), against which a fill's spread and slippage are measured.
    # `late_ticks`: the ticks the loop ran late or missed (later than the misfire grace),
    # with how late: the `ticks` table keeps only the ticks that ran, at their bar close.
    # `risk_refusals`: the orders the risk checks refused, by tick, symbol and rule.
    """
    CREATE TABLE run_settings (
        digest TEXT PRIMARY KEY,
        settings TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE daemon_runs (
        id INTEGER PRIMARY KEY,
        began_by TEXT NOT NULL,
        started_at TEXT NOT NULL,
        wall_started_at TEXT NOT NULL,
        stopped_at TEXT,
        settings_digest TEXT NOT NULL REFERENCES run_settings (digest),
        version TEXT NOT NULL,
        broker TEXT NOT NULL,
        venue TEXT NOT NULL
    );
    CREATE TABLE decision_quotes (
        tick TEXT NOT NULL,
        symbol TEXT NOT NULL,
        bid TEXT NOT NULL,
        ask TEXT NOT NULL,
        source TEXT NOT NULL,
        quoted_at TEXT NOT NULL,
        PRIMARY KEY (tick, symbol)
    ) WITHOUT ROWID;
    CREATE TABLE late_ticks (
        at TEXT PRIMARY KEY,
        lateness_s REAL NOT NULL,
        missed INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE risk_refusals (
        tick TEXT NOT NULL,
        symbol TEXT NOT NULL,
        rule TEXT NOT NULL,
        reason TEXT NOT NULL,
        PRIMARY KEY (tick, symbol, rule)
    ) WITHOUT ROWID;
    """,
    # 11: perpetuals. `funding`: a row per funding time a position paid (+) or received (-),
    # on the signed position then at the mark then; "modelled" by the paper broker and
    # backtests, "venue" as the exchange booked it (its id; its income rows may not say the
    # rate, mark or position: NULL), once per symbol, time and source.
    # The account's cash holds the sum, and a restart derives it from the fills and these rows.
    # `liquidations`: a position the mark took through its liquidation price, closed at the
    # bankruptcy price by the fill `fill_id` (its order `liquidation-...`), with the fee.
    """
    CREATE TABLE funding (
        symbol TEXT NOT NULL,
        at TEXT NOT NULL,
        rate TEXT,
        mark TEXT,
        position TEXT,
        paid TEXT NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('modelled', 'venue')),
        venue_id TEXT,
        PRIMARY KEY (symbol, at, source)
    ) WITHOUT ROWID;
    CREATE TABLE liquidations (
        fill_id TEXT PRIMARY KEY REFERENCES fills (fill_id),
        symbol TEXT NOT NULL,
        at TEXT NOT NULL,
        position TEXT NOT NULL,
        trigger_mark TEXT NOT NULL,
        liquidation_price TEXT NOT NULL,
        close_price TEXT NOT NULL,
        fee TEXT NOT NULL,
        margin_mode TEXT NOT NULL
    ) WITHOUT ROWID;
    """,
)
