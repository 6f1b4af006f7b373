"""Leverage bracket tables taken from outside sources, as /fapi/v1/leverageBracket shapes them.

BTCUSDT_NOW: Binance's BTCUSDT brackets as ccxt's `info` kept them in freqtrade's snapshot
`freqtrade/exchange/binance_leverage_tiers.json` (freqtrade/freqtrade, commit c9ae5e1e, 2024).
BTCUSDT_FAQ_ERA: the BTCUSDT table of Binance's liquidation-price FAQ era, as a third-party bot
copied it (Jay-Pak/BinanceBot, Code/temp.py, `maint_lookup_table`); its third bracket is the FAQ's
own example ("250,000 x (1% - 0.5%) + 50 = 1,300"; "264,000 USDT: 1%"). Only its first five
brackets, with the initial leverages of that era's table (not in the copy: the test never reads
them).
"""

from __future__ import annotations

BTCUSDT_NOW = [
    {
        "bracket": "1",
        "initialLeverage": "125",
        "notionalCap": "50000",
        "notionalFloor": "0",
        "maintMarginRatio": "0.004",
        "cum": "0.0",
    },
    {
        "bracket": "2",
        "initialLeverage": "100",
        "notionalCap": "600000",
        "notionalFloor": "50000",
        "maintMarginRatio": "0.005",
        "cum": "50.0",
    },
    {
        "bracket": "3",
        "initialLeverage": "75",
        "notionalCap": "3000000",
        "notionalFloor": "600000",
        "maintMarginRatio": "0.0065",
        "cum": "950.0",
    },
    {
        "bracket": "4",
        "initialLeverage": "50",
        "notionalCap": "12000000",
        "notionalFloor": "3000000",
        "maintMarginRatio": "0.01",
        "cum": "11450.0",
    },
    {
        "bracket": "5",
        "initialLeverage": "25",
        "notionalCap": "70000000",
        "notionalFloor": "12000000",
        "maintMarginRatio": "0.02",
        "cum": "131450.0",
    },
    {
        "bracket": "6",
        "initialLeverage": "20",
        "notionalCap": "100000000",
        "notionalFloor": "70000000",
        "maintMarginRatio": "0.025",
        "cum": "481450.0",
    },
    {
        "bracket": "7",
        "initialLeverage": "10",
        "notionalCap": "230000000",
        "notionalFloor": "100000000",
        "maintMarginRatio": "0.05",
        "cum": "2981450.0",
    },
    {
        "bracket": "8",
        "initialLeverage": "5",
        "notionalCap": "480000000",
        "notionalFloor": "230000000",
        "maintMarginRatio": "0.1",
        "cum": "14481450.0",
    },
    {
        "bracket": "9",
        "initialLeverage": "4",
        "notionalCap": "600000000",
        "notionalFloor": "480000000",
        "maintMarginRatio": "0.125",
        "cum": "26481450.0",
    },
    {
        "bracket": "10",
        "initialLeverage": "3",
        "notionalCap": "800000000",
        "notionalFloor": "600000000",
        "maintMarginRatio": "0.15",
        "cum": "41481450.0",
    },
    {
        "bracket": "11",
        "initialLeverage": "2",
        "notionalCap": "1200000000",
        "notionalFloor": "800000000",
        "maintMarginRatio": "0.25",
        "cum": "121481450.0",
    },
    {
        "bracket": "12",
        "initialLeverage": "1",
        "notionalCap": "1800000000",
        "notionalFloor": "1200000000",
        "maintMarginRatio": "0.5",
        "cum": "421481450.0",
    },
]

# JSON numbers, as Binance's own response carries them.
BTCUSDT_FAQ_ERA = [
    {
        "bracket": 1,
        "initialLeverage": 125,
        "notionalCap": 50000,
        "notionalFloor": 0,
        "maintMarginRatio": 0.004,
        "cum": 0.0,
    },
    {
        "bracket": 2,
        "initialLeverage": 100,
        "notionalCap": 250000,
        "notionalFloor": 50000,
        "maintMarginRatio": 0.005,
        "cum": 50.0,
    },
    {
        "bracket": 3,
        "initialLeverage": 50,
        "notionalCap": 1000000,
        "notionalFloor": 250000,
        "maintMarginRatio": 0.01,
        "cum": 1300.0,
    },
    {
        "bracket": 4,
        "initialLeverage": 20,
        "notionalCap": 10000000,
        "notionalFloor": 1000000,
        "maintMarginRatio": 0.025,
        "cum": 16300.0,
    },
    {
        "bracket": 5,
        "initialLeverage": 10,
        "notionalCap": 20000000,
        "notionalFloor": 10000000,
        "maintMarginRatio": 0.05,
        "cum": 266300.0,
    },
]

# ETHUSDT as it was in the FAQ's example: recalled, not read from a document in this session.
# Evidence it is right: with the cum rule it gives exactly the example's 10% / 135,365 for the
# example's ETH notional (2,000,000 x (10% - 5%) + 35,365 = 135,365), which the test checks.
ETHUSDT_FAQ_ERA = [
    {
        "bracket": 1,
        "initialLeverage": 75,
        "notionalCap": 10000,
        "notionalFloor": 0,
        "maintMarginRatio": 0.005,
        "cum": 0.0,
    },
    {
        "bracket": 2,
        "initialLeverage": 50,
        "notionalCap": 100000,
        "notionalFloor": 10000,
        "maintMarginRatio": 0.0065,
        "cum": 15.0,
    },
    {
        "bracket": 3,
        "initialLeverage": 25,
        "notionalCap": 500000,
        "notionalFloor": 100000,
        "maintMarginRatio": 0.01,
        "cum": 365.0,
    },
    {
        "bracket": 4,
        "initialLeverage": 10,
        "notionalCap": 1000000,
        "notionalFloor": 500000,
        "maintMarginRatio": 0.02,
        "cum": 5365.0,
    },
    {
        "bracket": 5,
        "initialLeverage": 5,
        "notionalCap": 2000000,
        "notionalFloor": 1000000,
        "maintMarginRatio": 0.05,
        "cum": 35365.0,
    },
    {
        "bracket": 6,
        "initialLeverage": 4,
        "notionalCap": 5000000,
        "notionalFloor": 2000000,
        "maintMarginRatio": 0.1,
        "cum": 135365.0,
    },
    {
        "bracket": 7,
        "initialLeverage": 3,
        "notionalCap": 10000000,
        "notionalFloor": 5000000,
        "maintMarginRatio": 0.125,
        "cum": 260365.0,
    },
    {
        "bracket": 8,
        "initialLeverage": 2,
        "notionalCap": 20000000,
        "notionalFloor": 10000000,
        "maintMarginRatio": 0.15,
        "cum": 510365.0,
    },
]
