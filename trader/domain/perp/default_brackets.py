"""The leverage brackets a paper account or a backtest uses for a symbol the venue gave none for.

Binance USDⓈ-M BTCUSDT's table as ccxt's `info` kept it in freqtrade's snapshot
`freqtrade/exchange/binance_leverage_tiers.json` (freqtrade/freqtrade, commit c9ae5e1e), the
same rows as tests/unit/domain/perp/tables.py `BTCUSDT_NOW`. It is among the most lenient
tables on Binance (0.4% maintenance below 50,000 notional); altcoins' tables start higher, so
for them a paper liquidation on it comes later than the venue's would (optimistic). Give the
venue's own table where it matters (the live broker reads it from /fapi/v1/leverageBracket).
"""

from __future__ import annotations

from trader.domain.perp.brackets import LeverageBrackets

# (bracket, initialLeverage, notionalFloor, notionalCap, maintMarginRatio, cum)
_BTCUSDT = (
    (1, 125, "0", "50000", "0.004", "0"),
    (2, 100, "50000", "600000", "0.005", "50"),
    (3, 75, "600000", "3000000", "0.0065", "950"),
    (4, 50, "3000000", "12000000", "0.01", "11450"),
    (5, 25, "12000000", "70000000", "0.02", "131450"),
    (6, 20, "70000000", "100000000", "0.025", "481450"),
    (7, 10, "100000000", "230000000", "0.05", "2981450"),
    (8, 5, "230000000", "480000000", "0.1", "14481450"),
    (9, 4, "480000000", "600000000", "0.125", "26481450"),
    (10, 3, "600000000", "800000000", "0.15", "41481450"),
    (11, 2, "800000000", "1200000000", "0.25", "121481450"),
    (12, 1, "1200000000", "1800000000", "0.5", "421481450"),
)

DEFAULT_BRACKETS_SOURCE = "Binance BTCUSDT's brackets (freqtrade's snapshot, c9ae5e1e)"


def default_brackets(symbol: str) -> LeverageBrackets:
    """`symbol`'s brackets when the venue gave none: Binance BTCUSDT's table (see the module)."""
    rows = [
        {
            "bracket": number,
            "initialLeverage": leverage,
            "notionalFloor": floor,
            "notionalCap": cap,
            "maintMarginRatio": rate,
            "cum": cum,
        }
        for number, leverage, floor, cap, rate, cum in _BTCUSDT
    ]
    return LeverageBrackets.from_binance(symbol, rows)
