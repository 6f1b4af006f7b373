"""How long the CLI takes to start, beside the interpreter itself. Prints JSON.

Each command runs in a fresh process, alternating with `python -c pass`, so the two share the
machine's noise; the figures are medians, and the ratios are what to compare across machines.
`trader --help` builds every verb's parser; `trader config show` also reads the settings.

    .venv/bin/python bench/cli.py [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python_pass": ["-c", "pass"],
    "trader_help": ["-m", "trader", "--help"],
    "trader_config_show": ["-m", "trader", "config", "show"],
    "trader_backtest_help": ["-m", "trader", "backtest", "--help"],
}


def once(args: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, capture_output=True)
    return (time.perf_counter() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="3 runs each")
    options = parser.parse_args()
    runs = 3 if options.quick else options.runs
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for args in COMMANDS.values():  # warm the file cache and the bytecode once
        once(args)
    for _ in range(runs):
        for name, args in COMMANDS.items():
            samples[name].append(once(args))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = medians["python_pass"]
    report = {
        "runs": runs,
        "median_ms": {name: round(value, 1) for name, value in medians.items()},
        "over_python_pass": {
            name: round(value / base, 2) for name, value in medians.items() if name != "python_pass"
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
