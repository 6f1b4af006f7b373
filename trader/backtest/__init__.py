"""`trader backtest`: the engine over history, walk-forward, with cached batched forecasts,
honest statistics beside buy-and-hold, and a report people read."""
