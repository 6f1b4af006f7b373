"""Cost of the domain's guarantees, measured side by side in one run. Prints JSON.

- bars: validated `Bar` objects from real 1h bars against plain tuples of the same floats.
- fills: exact `Portfolio.apply` (Decimal, FIFO lots, inexact-trapping context) against naive
  float bookkeeping of the same fills.
- settings: one full `load_settings` with defaults (start-up cost).

    .venv/bin/python bench/domain.py [--data CSV] [--quick]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from harness import SHARED_DATA, interpreter

from trader.config import load_settings
from trader.domain import Bar, Fill, Liquidity, Portfolio, Side, Timeframe

DEFAULT_DATA = SHARED_DATA / "SOLUSDT_1h.csv"


def best_of(repeats: int, work: Callable[[], object]) -> float:
    """Fastest of `repeats` runs, in seconds: the least disturbed by a noisy machine."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def read_rows(path: Path, limit: int) -> list[tuple[datetime, float, float, float, float, float]]:
    rows = []
    opener = gzip.open if path.suffix == ".gz" else open  # a .csv.gz excerpt, as tests pass
    with opener(path, "rt", newline="") as handle:
        for record in csv.DictReader(handle):
            start = datetime.fromisoformat(record["timestamps"]).replace(tzinfo=UTC)
            values = [float(record[k]) for k in ("open", "high", "low", "close", "volume")]
            rows.append((start, *values))
            if len(rows) == limit:
                break
    return rows  # type: ignore[return-value]


def bench_bars(rows: list, repeats: int) -> dict[str, float]:
    timeframe = Timeframe("1h")

    def validated() -> list[Bar]:
        return [Bar("SOL/USDT", timeframe, s, o, h, lo, c, v) for s, o, h, lo, c, v in rows]

    def plain() -> list[tuple]:
        return [("SOL/USDT", s, o, h, lo, c, v) for s, o, h, lo, c, v in rows]

    bars, tuples = best_of(repeats, validated), best_of(repeats, plain)
    return {
        "bars": len(rows),
        "validated_bars_per_s": round(len(rows) / bars),
        "plain_tuples_per_s": round(len(rows) / tuples),
        "validation_cost_ratio": round(bars / tuples, 2),
    }


def bench_fills(rows: list, repeats: int) -> dict[str, float]:
    fills = []
    for i, (start, _o, _h, _lo, close, _v) in enumerate(rows):
        side = Side.BUY if i % 3 != 2 else Side.SELL
        price = Decimal(repr(close))
        amount = Decimal("0.137")
        fee = (price * amount * Decimal("0.001")).quantize(Decimal("0.00000001"))
        fills.append(
            Fill(
                str(i),
                f"t{i}",
                "SOL/USDT",
                side,
                price,
                amount,
                fee,
                "USDT",
                Liquidity.TAKER,
                start,
            )
        )

    def exact() -> Portfolio:
        return Portfolio.from_fills("USDT", Decimal(1_000_000), fills)

    floats = [(f.side.sign, float(f.price), float(f.amount), float(f.fee)) for f in fills]

    def naive() -> float:
        cash, held = 1_000_000.0, 0.0
        for sign, price, amount, fee in floats:
            cash -= sign * price * amount + fee
            held += sign * amount
        return cash

    exact_s, naive_s = best_of(repeats, exact), best_of(repeats, naive)
    drift = float(exact().cash) - naive()
    return {
        "fills": len(fills),
        "exact_fills_per_s": round(len(fills) / exact_s),
        "float_fills_per_s": round(len(fills) / naive_s),
        "exactness_cost_ratio": round(exact_s / naive_s, 1),
        "exact_us_per_fill": round(exact_s / len(fills) * 1e6, 2),
        "float_cash_drift": drift,
    }


def bench_settings(repeats: int) -> dict[str, float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        load_settings(None, environ={}, dotenv_file=None, secrets_dir=None)
        times.append(time.perf_counter() - start)
    return {"settings_load_ms_median": round(statistics.median(times) * 1000, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = parser.parse_args()
    if not args.data.is_file():
        sys.stderr.write(f"no data at {args.data}: pass --data PATH to SOLUSDT_1h.csv\n")
        return 2
    limit, repeats = (500, 2) if args.quick else (50_000, 5)
    rows = read_rows(args.data, limit)
    report = {
        "data": args.data.name,
        **interpreter(),
        **bench_bars(rows, repeats),
        **bench_fills(rows, repeats),
        **bench_settings(repeats * 4),
    }
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
