"""`trader sandbox` refuses what it cannot serve, before it serves anything: with a usage
error (exit 2) and the reason on stderr."""

from __future__ import annotations

import pytest

from tests.recorded import SOLUSDT_1H
from trader.cli import main
from trader.exit_codes import EX_ARGUMENTS

DATA = ["--data", str(SOLUSDT_1H), "--symbol", "SOL/USD", "--port", "0"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--calendar", "SOL/USD=XNYS"],
            "--start, --hold, --calendar, --timeframe, --data-plan and --iex-sparsity are Alpaca's",
        ),
        (["--bar-seconds", "0.5"], "Binance's shortest bars are a second long"),
        (["--venue", "alpaca", "--timeframe", "1s"], "Alpaca has no 1s bars"),
        (["--venue", "alpaca", "--calendar", "AAPL/USD=XNYS"], "a symbol without data: AAPL/USD"),
        (["--venue", "alpaca", "--calendar", "SOL/USD=24/7"], "one exchange's sessions"),
        (["--venue", "alpaca", "--start", "2025-03-07T09:00"], "has no zone"),
    ],
)
def test_what_it_cannot_serve_is_a_usage_error_that_says_why(args, said, capsys):
    try:
        status = main(["sandbox", *DATA, *args])
    except SystemExit as stop:  # argparse refuses a value it cannot read
        status = stop.code
    assert status == EX_ARGUMENTS
    assert said in capsys.readouterr().err
