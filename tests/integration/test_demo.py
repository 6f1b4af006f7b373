"""`trader demo` (what `make demo` runs): the real daemon over the packaged excerpt, offline; what
it prints is what its ledger holds, and a run that could not trade says so and exits non-zero."""

from __future__ import annotations

import json
import re
import sqlite3
from decimal import Decimal

import pytest

from tests.integration.conftest import clean_env

pytestmark = pytest.mark.integration

TICKS = 96


def summary_lines(stdout: str) -> dict[str, str]:
    """The summary block, keyed by its first word (ticks, skipped, decisions, orders, ...)."""
    block = stdout.split("what happened", 1)[1].split("next:", 1)[0]
    return {
        line.split()[0]: line.split(None, 1)[1] for line in block.splitlines()[1:] if line.strip()
    }


def parsed_counts(text: str) -> dict[str, int]:
    """`12 (ok 10, degraded 2)` -> {"ok": 10, "degraded": 2}."""
    inside = text.split("(", 1)[1].rstrip(")")
    return {name: int(n) for name, n in (part.rsplit(" ", 1) for part in inside.split(", "))}


def number(text: str) -> Decimal:
    return Decimal(text.replace(",", ""))


def test_the_demo_runs_the_daemon_and_its_summary_is_the_ledgers(cli, tmp_path):
    folder = tmp_path / "demo"
    elsewhere = tmp_path / "not-the-demo.sqlite3"
    # The person's own settings must not reach the demo's daemon.
    env = clean_env(TRADER_LEDGER__PATH=str(elsewhere), TRADER_FORECAST__MODEL="toto")
    done = cli.run("demo", "--ticks", str(TICKS), "--dir", str(folder), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not elsewhere.exists()
    out = done.stdout
    assert "baseline forecaster" in out
    assert "done in" in out
    assert f"the daemon ran {TICKS} ticks and exited 0" in out
    assert re.search(r"metrics +http://127\.0\.0\.1:\d+/metrics", out)
    assert "make demo MODEL=toto" in out

    printed = summary_lines(out)
    with sqlite3.connect(folder / "ledger.sqlite3") as c:
        ticks = c.execute("SELECT count(*) FROM ticks").fetchone()[0]
        outcomes = dict(c.execute("SELECT outcome, count(*) FROM ticks GROUP BY outcome"))
        orders = dict(c.execute("SELECT status, count(*) FROM orders GROUP BY status"))
        fills = c.execute("SELECT fee FROM fills").fetchall()
        (starting,) = c.execute("SELECT starting_cash FROM account").fetchone()
        (last,) = c.execute("SELECT equity FROM equity ORDER BY at DESC LIMIT 1").fetchone()
    assert ticks == TICKS
    assert (
        printed["ticks"] == f"{TICKS} (" + ", ".join(f"{k} {v}" for k, v in outcomes.items()) + ")"
    )
    assert number(printed["orders"].split()[0]) == sum(orders.values()) > 0
    for status, count in orders.items():
        assert f"{status} {count}" in printed["orders"]
    fees = sum(Decimal(fee) for (fee,) in fills)
    assert printed["fills"] == f"{len(fills)} (fees {fees:,.2f} USDT)"
    start, end = re.findall(r"[\d,]+\.\d\d", printed["equity"])[:2]
    assert number(start) == Decimal(starting)
    assert number(end) == round(Decimal(last), 2)

    saved = json.loads((folder / "summary.json").read_text())
    assert saved["ticks"] == TICKS
    assert saved["fills"] == len(fills)
    assert saved["orders"] == orders
    # The daemon served /metrics, and the demo kept a scrape of it.
    assert "trader_ticks_total" in (folder / "metrics.txt").read_text()
    assert (folder / "trader.log").read_text().startswith("{")


def test_a_model_without_weights_is_said_and_exits_non_zero(cli, tmp_path):
    # An empty Hugging Face cache and no network: Toto cannot load.
    env = clean_env(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    done = cli.run("demo", "--model", "toto", "--ticks", "4", "--dir", str(tmp_path), env=env)
    assert done.returncode not in (0, None)
    assert f"the daemon exited {done.returncode}" in done.stdout
    assert "what happened" not in done.stdout
