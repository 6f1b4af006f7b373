"""`trader backtest --costs-from FILE`: the costs a daemon's fills paid, measured and written as
`trader shortfall` writes them, become the next backtest's costs: its fills pay exactly the
measured slippage beyond the modelled quote, the measured spread and the measured fee rates, and
its report says which costs are measured (file, period, fills) and which are modelled. Bad files
are refused with the reason, before any work."""

from __future__ import annotations

import csv
import gzip
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from decimal import ROUND_DOWN, ROUND_UP, Decimal
from pathlib import Path

import pytest

from tests.integration.conftest import Cli, clean_env
from tests.recorded import SOLUSDT_1H
from tests.unit.domain.shortfall_cases import order, record
from trader.backtest.measured_costs import FORMAT, costs_document
from trader.domain import Liquidity, Side, decimal_from_float
from trader.domain.shortfall_costs import measure_costs
from trader.domain.shortfall_records import Run

pytestmark = pytest.mark.integration

D = Decimal
BPS = D(10_000)
# What the daemon paid (none of them the defaults: 2 bps slippage, 10 bps fees, 5 bps spread).
# Low fees and spread, so that the baseline's small forecast moves clear the risk engine's edge
# after costs (2 taker fees + the spread) and the simple strategy trades.
SLIP, TAKER, MAKER, SPREAD = D("3.5"), D("0.5"), D("0.25"), D(1)


def _daemon_run() -> Run:
    """Three fills on a 99.995 / 100.005 quote (1 bp): market orders 3.5 bps beyond the touch
    paying 0.5 bps, a resting limit paying 0.25 bps."""
    buy = D("100.005") * (1 + SLIP / BPS)
    sell = D("99.995") * (1 - SLIP / BPS)
    return Run(
        D(10_000),
        D(10_000),
        (
            record(order(0, Side.BUY, "1"), "99.995", "100.005",
                   [(str(buy), "1", str(buy * TAKER / BPS))]),
            record(order(1, Side.SELL, "2"), "99.995", "100.005",
                   [(str(sell), "2", str(2 * sell * TAKER / BPS))]),
            record(order(2, Side.BUY, "1", limit="99.9"), "99.995", "100.005",
                   [("99.9", "1", str(D("99.9") * MAKER / BPS))], liquidity=Liquidity.MAKER),
        ),
    )  # fmt: skip


def _costs_file(folder: Path) -> Path:
    ledger = folder / "daemon.sqlite3"
    ledger.write_bytes(b"the daemon's ledger")
    begin = datetime(2021, 1, 1, tzinfo=UTC)
    document = costs_document(
        measure_costs(_daemon_run()), venue="binance", mode="paper", currency="USDT",
        begin=begin, end=begin + timedelta(days=7), ledger=ledger,
    )  # fmt: skip
    path = folder / "costs.json"
    path.write_text(json.dumps(document))
    return path


def _closes() -> dict[str, Decimal]:
    """The file's closes by bar end (ISO, UTC): the replay quotes around them."""
    with gzip.open(SOLUSDT_1H, "rt", newline="") as f:
        rows = list(csv.DictReader(f))
    closes = {}
    for row in rows:
        start = datetime.fromisoformat(row["timestamps"]).astimezone(UTC)
        closes[(start + timedelta(hours=1)).isoformat()] = decimal_from_float(float(row["close"]))
    return closes


def _backtest(cli: Cli, *extra: str) -> tuple[int, str, str]:
    """simple trades market orders, maxdiff resting limits."""
    done = cli.run(
        "backtest", "--data", str(SOLUSDT_1H), "--model", "baseline", "--strategy", "simple",
        "maxdiff", "--from", "2020-12-01", "--to", "2020-12-10", *extra,
        env=clean_env(
            TRADER_BACKTEST__CACHE_DIR=str(cli.cwd / "cache"), TRADER_RISK__MIN_EDGE_BPS="0"
        ),
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_the_next_backtest_pays_exactly_the_measured_costs_and_says_they_are_measured(cli):
    costs = _costs_file(cli.cwd)
    out = cli.cwd / "report"
    code, stdout, stderr = _backtest(cli, "--costs-from", str(costs), "--out", str(out))
    assert code == 0, stderr
    first = stdout.splitlines()[0]
    assert first.startswith("costs measured by paper on binance, 2021-01-01 00:00 .. 2021-01-08")
    for said in ("3 fills", str(costs), "slippage_bps 3.50", "taker_fee_bps 0.50"):
        assert said in first

    closes = _closes()
    half = SPREAD / 2 / BPS
    with sqlite3.connect(out / "ledgers" / "ledger-simple.sqlite3") as c:
        fills = c.execute("SELECT side, price, amount, fee, liquidity, at FROM fills").fetchall()
    takers = [f for f in fills if f[4] == "taker"]
    assert takers, "the backtest made no market fill to check"
    for side, price, amount, fee, _, at in takers:
        close = closes[datetime.fromisoformat(at).astimezone(UTC).isoformat()]
        if side == "buy":
            expected = (close * (1 + half) * (1 + SLIP / BPS)).quantize(D("1e-8"), ROUND_UP)
        else:
            expected = (close * (1 - half) * (1 - SLIP / BPS)).quantize(D("1e-8"), ROUND_DOWN)
        assert D(price) == expected
        assert D(fee) == (D(price) * D(amount) * TAKER / BPS).quantize(D("1e-8"), ROUND_UP)
    with sqlite3.connect(out / "ledgers" / "ledger-maxdiff.sqlite3") as c:
        makers = c.execute("SELECT price, amount, fee FROM fills WHERE liquidity = 'maker'")
        makers = makers.fetchall()
    assert makers, "the backtest made no resting fill to check"
    for price, amount, fee in makers:
        assert D(fee) == (D(price) * D(amount) * MAKER / BPS).quantize(D("1e-8"), ROUND_UP)

    stats = json.loads((out / "stats.json").read_text())
    measured = stats["costs_from"]["measured"]
    assert {k: v["value"] for k, v in measured.items()} == {
        "market.replay_spread_bps": "1.00", "broker.slippage_bps": "3.50",
        "broker.taker_fee_bps": "0.50", "broker.maker_fee_bps": "0.25",
    }  # fmt: skip
    assert measured["broker.slippage_bps"]["fills"] == 2  # the market orders' fills
    assert measured["broker.slippage_bps"]["replaced"] == "2 (default)"
    assert "broker.max_volume_share" in stats["costs_from"]["modelled"]
    report = (out / "report.md").read_text()
    read_first = report.split("## Read this first", 1)[1].split("##", 1)[0]
    assert "costs measured by paper on binance" in read_first
    parameters = report.split("## Parameters", 1)[1]
    assert "measured: broker.slippage_bps = 3.50 (mean of 2 fills; replaces 2 (default))" in (
        parameters
    )
    assert "modelled: broker.max_volume_share = 0.1" in parameters


def test_without_the_file_the_same_backtest_pays_the_modelled_costs(cli):
    out = cli.cwd / "plain"
    code, stdout, stderr = _backtest(cli, "--out", str(out))
    assert code == 0, stderr
    assert not stdout.startswith("costs measured")
    with sqlite3.connect(out / "ledgers" / "ledger-maxdiff.sqlite3") as c:
        fees = c.execute("SELECT price, amount, fee FROM fills").fetchall()
    assert fees
    for price, amount, fee in fees:  # the default 10 bps
        assert D(fee) == (D(price) * D(amount) * 10 / BPS).quantize(D("1e-8"), ROUND_UP)
    assert json.loads((out / "stats.json").read_text())["costs_from"] is None


def _bad(folder: Path, name: str, change: object) -> Path:
    document = json.loads(_costs_file(folder).read_text())
    if callable(change):
        change(document)
    path = folder / name
    path.write_text(change if isinstance(change, str) else json.dumps(document))
    return path


@pytest.mark.parametrize(
    ("name", "change", "reason"),
    [
        ("missing.json", None, "no such file"),
        ("garbage.json", "{not json", "not JSON"),
        ("format.json", lambda d: d.update(format="trader.costs/0"), "format is 'trader.costs/0'"),
        ("empty.json", lambda d: d.update(fills=0, actual={**d["actual"], "groups": []}),
         "no fills: nothing was measured"),
        ("count.json", lambda d: d.update(fills=4), "fills is 4 but its groups hold 3"),
        ("fee.json", lambda d: d["actual"]["fee_bps"].update(taker="4"),
         "actual.fee_bps.taker is not a finite number"),
        ("zone.json", lambda d: d["period"].update(to="2021-01-08T00:00:00"), "no time zone"),
    ],
)  # fmt: skip
def test_a_bad_costs_file_is_refused_with_the_reason_before_any_work(cli, name, change, reason):
    path = cli.cwd / name if change is None else _bad(cli.cwd, name, change)
    code, stdout, stderr = _backtest(cli, "--costs-from", str(path))
    assert code == 65
    assert stdout == ""
    assert stderr.startswith(f"trader backtest: --costs-from {path}: ")
    assert reason in stderr
    if change is not None and name != "garbage.json":
        assert FORMAT in stderr  # says what the file should be


def test_a_grid_over_a_measured_cost_is_refused(cli):
    costs = _costs_file(cli.cwd)
    code, _, stderr = _backtest(
        cli, "--costs-from", str(costs), "--grid", "broker.slippage_bps=1,3"
    )
    assert code == 2
    assert "--grid broker.slippage_bps and --costs-from" in stderr
