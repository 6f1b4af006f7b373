"""`trader shortfall LEDGER --out DIR`'s report, from the real CLI on a paper daemon's ledger
(`trader run --replay` in a subprocess, real recorded SOL/USDT bars): the files are there, the
plots are PNGs, "Read this first" states the verdict the command printed, the attribution
table's amounts add up exactly to the difference the two ledgers' equities make, and the costs
the daemon paid (its paper broker's slippage and fee) are measured as what they were; and a
stock in its sessions (AAPL daily) replayed with its own costs reports a shortfall of zero."""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest

from tests.integration.conftest import Cli
from tests.integration.daemon import AAPL_SESSIONS, daemon_env, paper_run, recording
from tests.markdown import section, table
from tests.recorded import AAPL_1D, excerpt
from trader.backtest.measured_costs import SLIPPAGE, SPREAD, TAKER, read_costs_file
from trader.exit_codes import EX_OK

pytestmark = pytest.mark.integration

BARS = 300
PNG = b"\x89PNG\r\n\x1a\n"
# The daemon pays these; the replay is told to model none of them (`--set`).
SLIPPAGE_BPS, TAKER_BPS, SPREAD_BPS = "5", "20", "5"


def pnl(ledger: Path) -> Decimal:
    """The last equity the ledger booked less its starting cash."""
    with sqlite3.connect(ledger) as c:
        (start,) = c.execute("SELECT starting_cash FROM account").fetchone()
        (last,) = c.execute("SELECT equity FROM equity ORDER BY at DESC LIMIT 1").fetchone()
    return Decimal(last) - Decimal(start)


def test_the_report_states_the_verdict_adds_up_exactly_and_measures_the_daemons_costs(
    cli: Cli, tmp_path: Path
) -> None:
    env = daemon_env(
        tmp_path, TRADER_STRATEGY__NAME="simple", TRADER_BROKER__SLIPPAGE_BPS=SLIPPAGE_BPS,
        TRADER_BROKER__TAKER_FEE_BPS=TAKER_BPS, TRADER_MARKET__REPLAY_SPREAD_BPS=SPREAD_BPS,
    )  # fmt: skip
    ran = cli.run("run", "--replay", str(recording(tmp_path, BARS)), env=env)
    assert ran.returncode == EX_OK, ran.stderr[-3000:]
    ledger, out = tmp_path / "ledger.sqlite3", tmp_path / "report"
    done = cli.run(
        "shortfall", str(ledger), "--out", str(out), "--set", "broker.slippage_bps=0",
        "--set", "broker.taker_fee_bps=0", env=daemon_env(tmp_path / "elsewhere"),
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert done.returncode == EX_OK, done.stdout + done.stderr[-3000:]
    assert lines[0].startswith("trader shortfall: the replay reproduced every decision")
    assert lines[-1].startswith(f"report: {out / 'report.html'} (")

    for name in ("report.md", "report.html", "shortfall.json", "costs.json", "replay.sqlite3"):
        assert (out / name).is_file(), name
    # Every connection closed as it should: no -wal or -shm left beside either ledger.
    files = [*out.iterdir(), *tmp_path.iterdir()]
    assert not [p.name for p in files if p.name.endswith(("-wal", "-shm"))]
    for name in ("equity.png", "attribution.png", "slippage.png"):
        assert (out / name).read_bytes()[:8] == PNG, name
    markdown = (out / "report.md").read_text()
    assert (out / "report.html").read_text().count("data:image/png;base64,") == 3

    # Read this first: the verdict the command printed as its second line, then the first.
    first = section(markdown, "Read this first").strip().splitlines()
    assert lines[1].startswith("paper made ")
    assert first[0] == f"- {lines[1]}"
    assert first[1] == "- " + lines[0].removeprefix("trader shortfall: ")

    # Every part, and amounts that add up exactly to the difference of the two ledgers' P&L.
    rows = table(section(markdown, "Attribution"))
    parts, total = rows[:-1], rows[-1]
    assert len(parts) == 15
    assert total[0] == "difference (paper less replay)"
    difference = pnl(ledger) - pnl(out / "replay.sqlite3")
    assert sum((Decimal(r[1]) for r in parts), Decimal(0)) == Decimal(total[1]) == difference
    assert difference != 0
    moved = {r[0] for r in parts if Decimal(r[1])}
    assert {"slippage", "fees"} <= moved
    attribution = json.loads((out / "shortfall.json").read_text())["comparison"]["attribution"]
    assert Decimal(attribution["difference"]) == difference

    # The costs the daemon paid are measured as its paper broker charged them (to the 0.01 bps
    # the settings take: prices are rounded to the replay's price step); the replay's are
    # what it was told to model.
    costs = read_costs_file(out / "costs.json")
    assert costs.figures[SLIPPAGE].bps == pytest.approx(float(SLIPPAGE_BPS), abs=0.005)
    assert costs.figures[TAKER].bps == pytest.approx(float(TAKER_BPS), abs=0.005)
    assert costs.figures[SPREAD].bps == pytest.approx(float(SPREAD_BPS), abs=0.005)
    costs_table = {r[0]: r for r in table(section(markdown, "Costs: measured and modelled"))}
    # Setting, replayed with, measured or modelled, the daemon's bps, fills, the replay's bps.
    for key, paid in ((SLIPPAGE, SLIPPAGE_BPS), (TAKER, TAKER_BPS)):
        assert Decimal(costs_table[f"`{key}`"][1]) == 0
        assert costs_table[f"`{key}`"][2:4] == ["measured", f"{float(paid):.2f}"]
    assert costs_table[f"`{SLIPPAGE}`"][5] == "0.00"  # the replay's own fills: no slippage
    assert costs_table["`broker.max_volume_share`"][2] == "modelled"
    replayed = section(markdown, "The settings replayed")
    said = [line for line in replayed.splitlines() if "`broker.slippage_bps`" in line]
    assert len(said) == 1
    assert said[0].endswith(f"(the daemon ran with '{SLIPPAGE_BPS}')")


def test_a_stock_in_its_sessions_against_its_own_costs_reports_a_shortfall_of_zero(
    cli: Cli, tmp_path: Path
) -> None:
    """AAPL daily on the New York exchange's sessions, replayed with the settings it ran:
    every part zero, the verdict says so, and the costs the daemon paid are its model's."""
    data = excerpt(tmp_path / "AAPL.csv", 200, source=AAPL_1D)
    paper_run(cli, tmp_path, data, "--symbol", "AAPL/USD", **AAPL_SESSIONS,
              TRADER_BROKER__SLIPPAGE_BPS=SLIPPAGE_BPS)  # fmt: skip
    out = tmp_path / "report"
    done = cli.run("shortfall", str(tmp_path / "ledger.sqlite3"), "--out", str(out),
                   env=daemon_env(tmp_path / "elsewhere"))  # fmt: skip
    assert done.returncode == EX_OK, done.stdout + done.stderr[-3000:]
    markdown = (out / "report.md").read_text()
    first = section(markdown, "Read this first").strip().splitlines()
    assert first[0] == "- paper made exactly what its backtest replay made"
    rows = table(section(markdown, "Attribution"))
    assert len(rows) == 16
    assert {Decimal(r[1]) for r in rows} == {Decimal(0)}
    assert (out / "attribution.png").read_bytes()[:8] == PNG
    costs = read_costs_file(out / "costs.json")
    assert costs.fills > 0
    assert costs.figures[SLIPPAGE].bps == pytest.approx(float(SLIPPAGE_BPS), abs=0.05)
    costs_table = {r[0]: r for r in table(section(markdown, "Costs: measured and modelled"))}
    slippage = costs_table[f"`{SLIPPAGE}`"]
    assert slippage[3] == slippage[5]  # the daemon's = the replay's
