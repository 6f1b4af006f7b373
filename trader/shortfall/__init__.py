"""`trader shortfall`: a daemon's ledger replayed through the backtest engine and compared."""
