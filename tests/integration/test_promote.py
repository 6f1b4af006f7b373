"""`trader promote --paper LEDGER`: a paper daemon's record (`trader run --replay`, the real
daemon in a subprocess) judged by the `[promote]` thresholds: refused with the reasons first
(too few days; a shortfall against the backtest it was validated on beyond its threshold),
written otherwise; then `trader run` with the live settings it wrote, in live mode against
the emulator (`trader sandbox`), sizes from the promoted fraction and does not warn, while a
live start without a promotion warns once, first. Real recorded bars (tests/data: SOL/USDT
1h; AAPL daily on the New York exchange's sessions)."""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from decimal import Decimal
from pathlib import Path

import pytest

from tests.integration.conftest import Cli
from tests.integration.daemon import AAPL_SESSIONS, daemon_env, paper_run, recording
from tests.integration.sandboxed import TRADING, start_sandbox
from tests.integration.sandboxed import daemon_env as live_env
from tests.recorded import AAPL_1D, excerpt
from trader.exit_codes import EX_FAILED, EX_OK

pytestmark = pytest.mark.integration

FEES = {"TRADER_BROKER__TAKER_FEE_BPS": "40", "TRADER_BROKER__MAKER_FEE_BPS": "40"}
# The baseline model is the naive forecast's own construction: it has no skill to show, so
# the tests that promote it lower that one threshold (a setting, as every threshold is).
NO_SKILL_NEEDED = {"TRADER_PROMOTE__MIN_SKILL": "-0.5"}


def promote(cli: Cli, tmp: Path, ledger: Path, *args: str, **env: str) -> tuple[int, list[str]]:
    done = cli.run(
        "promote", "--paper", str(ledger), "--out", str(tmp / "live" / "live.toml"), *args,
        env=daemon_env(tmp / "elsewhere", **env),
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines, done.stderr[-3000:]
    return done.returncode, lines


def test_too_few_days_are_refused_with_the_reason_first(cli: Cli, tmp_path: Path) -> None:
    ledger = paper_run(cli, tmp_path, recording(tmp_path, 300))  # 253 hourly ticks
    code, lines = promote(cli, tmp_path, ledger, **NO_SKILL_NEEDED)
    assert code == EX_FAILED, lines
    assert lines[0] == "refused: days traded: 11 (at least 14)"
    assert lines[1] == ""  # the reasons first, then the whole verdict
    assert "FAIL: days traded: 11 (at least 14)" in lines
    assert "pass: ticks skipped: 0 of 253 (0.00%; at most 5.00%)" in lines
    assert not (tmp_path / "live").exists()


def test_the_baseline_shows_no_skill_against_the_naive_and_is_refused(cli, tmp_path) -> None:
    ledger = paper_run(cli, tmp_path, recording(tmp_path, 450))
    code, lines = promote(cli, tmp_path, ledger)
    assert code == EX_FAILED, lines
    (reason,) = [line for line in lines if line.startswith("refused: ")]
    assert reason.startswith("refused: forecast skill against the naive (baseline): ")


def test_a_shortfall_beyond_its_threshold_is_refused_then_a_good_record_is_promoted(
    cli: Cli, tmp_path: Path
) -> None:
    ledger = paper_run(cli, tmp_path, recording(tmp_path, 450), **FEES)
    # Against the backtest it was validated on, at no fees, paper paid 40 bps a fill more.
    free = ("--set", "broker.taker_fee_bps=0", "--set", "broker.maker_fee_bps=0")
    code, lines = promote(cli, tmp_path, ledger, *free, **NO_SKILL_NEEDED)
    assert code == EX_FAILED, lines
    reason = lines[0]  # the first threshold failed; paper's drawdown is deeper too
    assert reason.startswith("refused: shortfall against the backtest: "), lines
    short = Decimal(reason.split(": ")[2].split(" ")[0])
    assert short > 100  # more than 1% of the 10,000 it started with
    assert not (tmp_path / "live").exists()

    # Against its own costs the replay makes exactly what paper made: promoted.
    code, lines = promote(cli, tmp_path, ledger, "--ramp", "0.1:7d,0.25:14d,1", **NO_SKILL_NEEDED)
    assert code == EX_OK, lines
    live = tmp_path / "live" / "live.toml"
    record = tmp_path / "live" / "live.promotion.json"
    assert lines[0].startswith(f"promoted: live settings written to {live}")
    assert "pass: days traded: 17 (at least 14)" in lines
    assert any(x.startswith("pass: shortfall against the backtest: 0.000000000000 USDT ")
               for x in lines), lines  # fmt: skip
    text = live.read_text()
    assert 'mode = "live"' in text
    assert "live_capital_fraction = 0.1" in text
    assert 'live_ramp = "0.1:7d,0.25:14d,1"' in text
    document = json.loads(record.read_text())
    assert document["passed"] is True
    assert document["thresholds"]["min_skill"] == -0.5
    assert len(document["paper_ledger_sha256"]) == 64


def test_a_stock_record_counts_trading_sessions(cli: Cli, tmp_path: Path) -> None:
    data = excerpt(tmp_path / "AAPL.csv", 70, source=AAPL_1D)
    ledger = paper_run(cli, tmp_path, data, "--symbol", "AAPL/USD", **AAPL_SESSIONS)
    with sqlite3.connect(ledger) as c:
        (ticks,) = c.execute("SELECT count(*) FROM ticks").fetchone()
    _, lines = promote(cli, tmp_path, ledger, **NO_SKILL_NEEDED)
    # One tick per session, weekends and holidays not expected: none skipped.
    assert f"pass: trading sessions traded: {ticks} (at least 10)" in lines, lines
    assert f"pass: ticks skipped: 0 of {ticks} (0.00%; at most 5.00%)" in lines, lines
    assert "calendar XNYS, counted in sessions" in lines[lines.index("") + 1], lines


def _live_run(cli: Cli, tmp: Path, ready: dict, *args: str) -> list[dict]:
    """`trader run` live against the sandbox until it has booked orders; its log lines."""
    env = live_env(tmp, ready)
    daemon = cli.start("run", *args, env=env)
    ledger = tmp / "ledger.sqlite3"
    try:
        daemon.wait_for("ready", 90)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if ledger.exists() and _orders(ledger):
                break
            time.sleep(0.2)
    finally:
        daemon.process.send_signal(signal.SIGTERM)
        daemon.finish(60)
    return daemon.lines


def _orders(ledger: Path) -> list[tuple[str, str, str, str]]:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=5) as c:
        return c.execute(
            "SELECT symbol, amount, limit_price, created_at FROM orders WHERE limit_price "
            "IS NOT NULL"
        ).fetchall()


def _equity(ledger: Path) -> Decimal:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=5) as c:
        (cash,) = c.execute("SELECT starting_cash FROM account").fetchone()
    return Decimal(cash)


LIVE_SYMBOLS = {"binance": ("SOL/USDT", "BTC/USDT"), "alpaca": ("SOL/USD", "BTC/USD")}


@pytest.mark.parametrize("venue", ["binance", "alpaca"])
def test_live_with_the_promoted_settings_sizes_from_the_fraction_and_without_warns(
    cli: Cli, tmp_path: Path, venue: str
) -> None:
    ledger = paper_run(cli, tmp_path, recording(tmp_path, 450))
    code, lines = promote(cli, tmp_path, ledger, "--fraction", "0.1", **NO_SKILL_NEEDED)
    assert code == EX_OK, lines
    settings = tmp_path / "live" / "live.toml"
    sandbox, ready = start_sandbox(tmp_path, venue, LIVE_SYMBOLS[venue])
    try:
        promoted = tmp_path / "promoted"
        promoted.mkdir()
        said = _live_run(cli, promoted, ready, "--config", str(settings))
        bare = tmp_path / "bare"
        bare.mkdir()
        warned = _live_run(cli, bare, ready)
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)
    events = [x["event"] for x in said]
    assert "live start without a promotion" not in events
    (share,) = [x for x in said if x["event"] == "live capital share"]
    assert share["share"] == "0.1"
    # A promoted start sizes from a tenth of its equity: every resting order's notional at most
    # 10% x position_fraction of it (and it did trade).
    fraction = Decimal(TRADING["TRADER_STRATEGY__POSITION_FRACTION"])
    for path, cap in ((promoted, Decimal("0.1")), (bare, Decimal(1))):
        placed = _orders(path / "ledger.sqlite3")
        assert placed, path
        equity = _equity(path / "ledger.sqlite3")
        largest = max(Decimal(amount) * Decimal(limit) for _, amount, limit, _ in placed)
        assert largest <= equity * fraction * cap * Decimal("1.01"), (path, largest, equity)
        if cap < 1:
            assert largest > equity * fraction * cap * Decimal("0.5")
        else:
            assert largest > equity * fraction * Decimal("0.1") * Decimal("1.5")
    # Without a promotion: allowed, warned once, in the first lines.
    warnings = [x for x in warned if x["event"] == "live start without a promotion"]
    assert len(warnings) == 1
    assert warned.index(warnings[0]) < 3, [x["event"] for x in warned[:5]]
    assert warnings[0]["reason"] == "no promotion record: promotion.at is not set"
