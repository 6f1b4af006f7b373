"""`trader shortfall LEDGER`: a paper daemon's period (`trader run --replay`, the real daemon
in a subprocess) replayed through the backtest's engine on the bars its ledger stored, with
the forecasts it made and the settings each start recorded, then compared: every decision and
every fill reproduced; a tampered forecast row named by its tick with exit 1; a restart with
other settings replayed with the settings in force at each tick. Real recorded bars
(tests/data: SOL/USDT 1h; AAPL daily on the New York exchange's sessions)."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Cli
from tests.integration.daemon import (
    AAPL_SESSIONS,
    daemon_env,
    paper_run,
    recording,
    ticks,
    wait_until,
)
from tests.recorded import AAPL_1D, excerpt
from trader.backtest.measured_costs import read_costs_file
from trader.exit_codes import EX_DATAERR, EX_FAILED, EX_OK

pytestmark = pytest.mark.integration

BARS = 300  # 48 to fill the first window, then 253 hourly ticks


def shortfall(cli: Cli, tmp: Path, ledger: Path, *args: str) -> tuple[int, list[str], Any]:
    """Exit status, the lines printed before the JSON, and the comparison's JSON."""
    done = cli.run("shortfall", str(ledger), "--json", *args, env=daemon_env(tmp / "elsewhere"))
    text = done.stdout
    start = text.find("\n{")
    lines = text[: start if start >= 0 else len(text)].splitlines()
    document = json.loads(text[start:]) if start >= 0 else None
    assert lines, done.stderr[-3000:]
    return done.returncode, lines, document


def rows(ledger: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(ledger) as c:
        return c.execute(sql).fetchall()


def test_a_paper_run_is_reproduced_decision_by_decision_and_fill_by_fill(
    cli: Cli, tmp_path: Path
) -> None:
    ledger = paper_run(cli, tmp_path, recording(tmp_path, BARS))
    kept = tmp_path / "kept"
    code, lines, document = shortfall(cli, tmp_path, ledger, "--out", str(kept))
    assert code == EX_OK, lines
    decisions = rows(ledger, "SELECT count(*) FROM decisions")[0][0]
    ticks = rows(ledger, "SELECT count(*) FROM ticks")[0][0]
    assert lines[0] == (
        f"trader shortfall: the replay reproduced every decision ({decisions} compared over "
        f"{ticks} ticks)"
    )
    assert ticks == BARS - 48 + 1
    assert decisions == ticks
    # The daemon filled orders, and the replay filled every one of them alike: the same price,
    # amount, fee and time, nothing missed or extra, and the same equity at the end.
    outcomes = {o["outcome"] for o in document["orders"]}
    assert outcomes == {"same", "neither"}, outcomes
    filled = [o for o in document["orders"] if o["outcome"] == "same"]
    assert len(filled) == rows(ledger, "SELECT count(DISTINCT client_order_id) FROM fills")[0][0]
    assert len(filled) > 10
    replayed = kept / "replay.sqlite3"
    fills = "SELECT client_order_id, price, amount, fee, at FROM fills ORDER BY rowid"
    assert rows(replayed, fills) == rows(ledger, fills)
    equity = "SELECT at, equity FROM equity ORDER BY at"
    assert rows(replayed, equity) == rows(ledger, equity)
    (last,) = rows(ledger, "SELECT equity FROM equity ORDER BY at DESC LIMIT 1")
    assert any(line.endswith(f"daemon {last[0]}, replay {last[0]}") for line in lines)
    # With the paper broker's own cost model the shortfall is zero, every part of it.
    assert lines[1] == "paper made exactly what its backtest replay made"
    parts = document["attribution"]
    assert Decimal(parts["actual_pnl"]) == Decimal(last[0]) - Decimal(10000)
    assert Decimal(parts["difference"]) == 0
    assert {k: Decimal(v) for k, v in parts["parts"].items()} == dict.fromkeys(
        parts["parts"], Decimal(0)
    )
    assert len(parts["parts"]) >= 10  # every part shown, zeros too
    assert document["reproduced"] is True
    assert document["ticks_only_modelled"] == []
    # Each decision's quote was kept, and the paper daemon's is the replay's modelled one.
    quotes = "SELECT tick, symbol, bid, ask, source FROM decision_quotes ORDER BY tick"
    assert len(rows(ledger, quotes)) == decisions
    assert {r[4] for r in rows(ledger, quotes)} == {"modelled"}
    assert rows(replayed, quotes) == rows(ledger, quotes)
    # The costs the daemon paid, as the file `trader backtest --costs-from` reads.
    costs = read_costs_file(kept / "costs.json")
    assert costs.fills == rows(ledger, "SELECT count(*) FROM fills")[0][0]
    assert (costs.mode, costs.venue) == ("paper", "replay")


def test_a_tampered_forecast_row_is_named_by_its_tick(cli: Cli, tmp_path: Path) -> None:
    ledger = paper_run(cli, tmp_path, recording(tmp_path, BARS))
    tampered = tmp_path / "tampered.sqlite3"
    shutil.copy(ledger, tampered)
    ticks = [t for (t,) in rows(ledger, "SELECT tick FROM forecasts ORDER BY tick")]
    victim, donor = ticks[120], ticks[20]
    with sqlite3.connect(tampered) as c:
        # Another tick's forecast numbers under this tick's key: a valid forecast, not the
        # one the daemon decided on.
        c.execute(
            "UPDATE forecasts SET quantiles = (SELECT quantiles FROM forecasts WHERE tick = ?), "
            "mean = (SELECT mean FROM forecasts WHERE tick = ?) WHERE tick = ?",
            (donor, donor, victim),
        )
    code, lines, document = shortfall(cli, tmp_path, tampered)
    assert code == EX_FAILED, lines
    named = victim.replace(".000000Z", "+00:00")
    assert lines[0].startswith(
        "trader shortfall: the replay did not reproduce the daemon's decisions: first at "
        f"tick {named} SOL/USDT maxdiff"
    ), lines[0]
    assert document["reproduced"] is False
    # The untouched ledger still passes: the failure is the row, not the replay.
    assert shortfall(cli, tmp_path, ledger)[0] == EX_OK


def test_a_restart_with_other_settings_is_replayed_with_each_in_force(
    cli: Cli, tmp_path: Path
) -> None:
    data = recording(tmp_path, BARS)
    paper_run(cli, tmp_path, data, "--max-ticks", "120")
    # The second start trades on other fees: the replay must use them from its first tick on.
    ledger = paper_run(cli, tmp_path, data, TRADER_BROKER__TAKER_FEE_BPS="40",
                       TRADER_BROKER__MAKER_FEE_BPS="25")  # fmt: skip
    runs = rows(ledger, "SELECT started_at, stopped_at, settings_digest, broker, venue "
                        "FROM daemon_runs ORDER BY id")  # fmt: skip
    assert len(runs) == 2, runs
    assert runs[0][2] != runs[1][2], runs
    assert all(r[1] is not None and r[3:] == ("paper", "replay") for r in runs), runs
    settings = [json.loads(t) for (t,) in rows(ledger, "SELECT settings FROM run_settings")]
    assert sorted(s["broker.taker_fee_bps"] for s in settings) == ["10", "40"]
    assert all(not any("secret" in k or "api_key" in k for k in s) for s in settings)
    code, lines, document = shortfall(cli, tmp_path, ledger)
    assert code == EX_OK, lines
    assert "daemon starts: 2 (0 without a recorded stop), settings 2 distinct" in lines
    assert {o["outcome"] for o in document["orders"]} == {"same", "neither"}
    # Replayed with the first start's fees throughout, the second stretch's fills differ
    # (lower fees): a cost, not a fault, and said as an override.
    code, lines, document = shortfall(
        cli, tmp_path, ledger, "--set", "broker.taker_fee_bps=10", "--set",
        "broker.maker_fee_bps=10",
    )  # fmt: skip
    assert code == EX_OK, lines  # decisions made on other settings are no fault
    assert "overridden: broker.taker_fee_bps = '10' (the daemon ran with '40')" in lines
    assert "overridden: broker.taker_fee_bps = '10' (the daemon ran with '10')" not in lines
    assert any(line.startswith("decisions that differ where their inputs did: ") for line in lines)
    assert "different" in {o["outcome"] for o in document["orders"]}, lines
    # The daemon paid more fees than the replay: the attribution says so, to the last digit.
    parts = {k: Decimal(v) for k, v in document["attribution"]["parts"].items()}
    difference = Decimal(document["attribution"]["difference"])
    assert difference < 0
    assert sum(parts.values()) == difference
    assert parts["fees"] < 0
    assert parts["remainder"] == 0
    assert lines[1].startswith("paper made "), lines[1]
    assert "less than its backtest replay" in lines[1]


def test_settings_reloaded_while_running_are_replayed_from_the_next_tick(
    cli: Cli, tmp_path: Path
) -> None:
    """SIGHUP with another strategy in the config file: the daemon trades maxdiff, then
    simple; the ledger records the reload, and the replay switches at the same tick."""
    config = tmp_path / "trader.toml"
    config.write_text('[strategy]\nname = "maxdiff"\nallow_short = true\n')
    env = daemon_env(tmp_path) | {"TRADER_CONFIG": str(config)}
    del env["TRADER_STRATEGY__NAME"], env["TRADER_STRATEGY__ALLOW_SHORT"]
    ledger = tmp_path / "ledger.sqlite3"
    # 0.1 s of wall time per simulated hour: the signal lands mid-run.
    daemon = cli.start("run", "--replay", str(recording(tmp_path, BARS)), "--speed", "36000",
                       env=env)  # fmt: skip
    wait_until(lambda: len(ticks(ledger)) >= 80, "80 ticks", timeout=120)
    config.write_text('[strategy]\nname = "simple"\nallow_short = true\n')
    daemon.process.send_signal(signal.SIGHUP)
    assert daemon.finish(timeout=120) == 0
    strategies = [s for (s,) in rows(ledger, "SELECT strategy FROM decisions ORDER BY tick")]
    switched = strategies.index("simple")
    assert set(strategies[:switched]) == {"maxdiff"}
    assert set(strategies[switched:]) == {"simple"}
    began = rows(ledger, "SELECT began_by FROM daemon_runs ORDER BY id")
    assert began == [("start",), ("reload",)]
    code, lines, document = shortfall(cli, tmp_path, ledger)
    assert code == EX_OK, lines
    assert lines[0] == (
        f"trader shortfall: the replay reproduced every decision ({len(strategies)} compared "
        f"over {len(strategies)} ticks)"
    )
    said = "daemon starts: 1 (0 without a recorded stop), settings 2 distinct, reloads: 1"
    assert said in lines
    assert {o["outcome"] for o in document["orders"]} <= {"same", "neither"}


def test_a_ledger_that_cannot_be_replayed_is_refused_first(cli: Cli, tmp_path: Path) -> None:
    code, lines, _ = shortfall(cli, tmp_path, tmp_path / "absent.sqlite3")
    assert code == EX_DATAERR
    assert lines[0] == f"trader shortfall: no ledger at {tmp_path / 'absent.sqlite3'}"


def test_a_ledger_whose_bars_were_pruned_is_refused_with_the_setting(
    cli: Cli, tmp_path: Path
) -> None:
    """With no retention the ledger keeps only the windows' bars: the daemon's first ticks
    cannot be replayed, and a replay from later would start from another account."""
    ledger = paper_run(cli, tmp_path, recording(tmp_path, BARS),
                       TRADER_LEDGER__BAR_RETENTION_DAYS="0")  # fmt: skip
    assert rows(ledger, "SELECT count(*) FROM bars")[0][0] == 2 * 48  # the windows' keep
    code, lines, _ = shortfall(cli, tmp_path, ledger)
    assert code == EX_DATAERR, lines
    assert lines[0].startswith(
        "trader shortfall: cannot replay: the stored bars cannot replay the daemon's first tick"
    ), lines[0]
    assert "ledger.bar_retention_days" in lines[0]


def test_a_stock_in_its_sessions_is_reproduced(cli: Cli, tmp_path: Path) -> None:
    """AAPL daily on the New York exchange's calendar: the ticks follow its sessions (no
    weekends, no holidays), and the replay keeps to them as the daemon did."""
    data = excerpt(tmp_path / "AAPL.csv", 200, source=AAPL_1D)
    ledger = paper_run(cli, tmp_path, data, "--symbol", "AAPL/USD", **AAPL_SESSIONS)
    ticks = [t for (t,) in rows(ledger, "SELECT at FROM ticks ORDER BY at")]
    assert ticks
    assert len(ticks) < 200 - 48 + 5
    code, lines, document = shortfall(cli, tmp_path, ledger)
    assert code == EX_OK, lines
    assert document["ticks_both"] == len(ticks)
    assert document["ticks_only_modelled"] == []
    assert document["ticks_only_actual"] == []
    assert {o["outcome"] for o in document["orders"]} <= {"same", "neither"}
    assert any(o["outcome"] == "same" for o in document["orders"]), lines


def test_a_tick_the_daemon_did_not_run_is_counted_not_blamed(cli: Cli, tmp_path: Path) -> None:
    """A tick missing from the daemon's ledger (as after an outage), one where it placed no
    order: the replay forecasts it anew (the daemon stored nothing) and places no order there
    either; the tick is counted, its decision is not compared, and the shortfall stays zero."""
    ledger = paper_run(cli, tmp_path, recording(tmp_path, BARS), TRADER_STRATEGY__NAME="simple")
    quiet = [
        t for (t,) in rows(ledger, "SELECT at FROM ticks WHERE at NOT IN "
                                   "(SELECT created_at FROM orders) ORDER BY at")
    ]  # fmt: skip
    assert len(quiet) > 10
    gone = quiet[len(quiet) // 2]
    with sqlite3.connect(ledger) as c:
        for table, column in (("ticks", "at"), ("equity", "at"), ("forecasts", "tick"),
                              ("decisions", "tick"), ("decision_quotes", "tick")):  # fmt: skip
            c.execute(f"DELETE FROM {table} WHERE {column} = ?", (gone,))  # noqa: S608 - ours
    code, lines, document = shortfall(cli, tmp_path, ledger)
    assert code == EX_OK, lines
    named = gone.replace(".000000Z", "+00:00")
    assert f"ticks the daemon did not run: 1 (first {named})" in lines
    assert document["ticks_only_modelled"] == [named]
    assert document["decision_differences"] == []
    assert lines[1] == "paper made exactly what its backtest replay made"


def test_a_ledger_from_before_the_recording_is_replayed_with_the_settings_given(
    cli: Cli, tmp_path: Path
) -> None:
    """A ledger of schema 9 kept no settings and no decision quotes: the replay runs with the
    settings given here (said), and the daemon's orders are priced with the replay's quotes."""
    ledger = paper_run(cli, tmp_path, recording(tmp_path, BARS))
    with sqlite3.connect(ledger) as c:
        for table in ("run_settings", "daemon_runs", "decision_quotes", "late_ticks",
                      "risk_refusals"):  # fmt: skip
            c.execute(f"DROP TABLE {table}")
        c.execute("PRAGMA user_version = 9")
    code, lines, document = shortfall(cli, tmp_path, ledger)
    assert code == EX_OK, lines
    assert (
        "the ledger recorded no settings (older than schema 10): replayed with the settings "
        "given here" in lines
    )
    orders = rows(ledger, "SELECT count(*) FROM orders")[0][0]
    assert (
        f"orders priced with the replay's quote (the ledger kept none for their decision): "
        f"{orders}: their spread and quote show as slippage" in lines
    )
    assert {Decimal(v) for v in document["attribution"]["parts"].values()} == {Decimal(0)}
