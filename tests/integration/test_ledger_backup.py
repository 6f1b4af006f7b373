"""`trader ledger backup` while a daemon trades: the backup is taken online (the daemon keeps
ticking), private, passes integrity_check, holds the cash and positions the ledger had at its
last tick, and a daemon started on it after README's restore resumes with them; and what it
refuses (a damaged ledger, a destination it cannot write).

The daemon replays the first 648 hours of SOL/USDT (tests/data/SOLUSDT_1h.csv.gz, Binance spot;
tests/data/README.md), trading with maxdiff (shorts allowed) on the baseline model."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from tests.integration.conftest import clean_env
from tests.integration.daemon import daemon_env, recording, running, stop, ticks, wait_until
from trader.exit_codes import EX_CANTCREAT, EX_DATAERR

pytestmark = pytest.mark.integration

CONTEXT = 48
TICKS = 600
SPEED = "36000"  # 0.1 s of wall time per hour of bars: a minute for the whole replay


@contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """`path` read without disturbing a process writing it."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        yield connection
    finally:
        connection.close()


def book(path: Path) -> dict:
    """The ledger's cash, positions, fills (in booking order) and last tick."""
    with read_only(path) as c:
        (cash,) = c.execute("SELECT cash FROM account").fetchone()
        positions = {s: Decimal(a) for s, a in c.execute("SELECT symbol, amount FROM positions")}
        fills = c.execute("SELECT rowid, fill_id, side, amount, symbol FROM fills ORDER BY rowid")
        (last,) = c.execute("SELECT max(at) FROM ticks").fetchone()
        return {
            "cash": Decimal(cash),
            "positions": {s: a for s, a in positions.items() if a},
            "fills": fills.fetchall(),
            "last": last,
        }


def holding(ledger: Path) -> bool:
    """Whether the ledger holds a position now (False until the daemon has made it)."""
    try:
        with read_only(ledger) as c:
            sql = "SELECT count(*) FROM positions WHERE CAST(amount AS REAL) != 0"
            return bool(c.execute(sql).fetchone()[0])
    except sqlite3.OperationalError:
        return False


def test_a_backup_taken_while_the_daemon_trades_is_whole_and_a_daemon_resumes_on_it(cli, tmp_path):
    data = recording(tmp_path, CONTEXT + TICKS)
    env = daemon_env(tmp_path)
    ledger = tmp_path / "ledger.sqlite3"
    backup = tmp_path / "backups" / "ledger-backup.sqlite3"
    daemon = cli.start("run", "--replay", str(data), "--speed", SPEED, env=env)
    with running(daemon):
        wait_until(lambda: holding(ledger), "a position held", timeout=120)

        def backed_up_holding() -> bool:  # the position may close the very tick it is taken
            made = cli.run("ledger", "backup", str(ledger), str(backup), env=clean_env())
            if made.returncode != 0:
                pytest.fail(f"trader ledger backup exited {made.returncode}: {made.stderr}")
            return bool(book(backup)["positions"])

        wait_until(backed_up_holding, "a backup holding a position", timeout=60)
        taken = book(backup)
        # Online: the daemon was trading all along and goes on after it.
        assert daemon.process.poll() is None
        wait_until(lambda: len(ticks(ledger)) > len(ticks(backup)) + 10, "ticks after it")
        assert stop(daemon) == 0
    assert not [x for x in daemon.lines if x["level"] in {"error", "critical"}]

    # The backup: private, one self-contained file, and it passes integrity_check.
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert not Path(f"{backup}-wal").exists()
    with read_only(backup) as c:
        assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert [p.name for p in backup.parent.iterdir()] == [backup.name]  # no partial left

    # It is the ledger as it was at its last tick: the same fills, in order, as far as it goes,
    # the cash the ledger booked at that tick, the positions those fills add up to.
    later = book(ledger)
    assert taken["fills"]
    assert later["fills"][: len(taken["fills"])] == taken["fills"]
    with read_only(ledger) as c:
        (cash_then,) = c.execute(
            "SELECT cash FROM equity WHERE at = ?", (taken["last"],)
        ).fetchone()
    assert Decimal(cash_then) == taken["cash"]
    net: dict[str, Decimal] = {}
    for _, _, side, amount, symbol in taken["fills"]:
        net[symbol] = net.get(symbol, Decimal(0)) + (
            Decimal(amount) if side == "buy" else -Decimal(amount)
        )
    assert {s: a for s, a in net.items() if a} == taken["positions"]
    assert later["last"] > taken["last"]  # the ledger went on past the backup's moment

    # README's restore: the daemon stopped; the ledger and its side files moved aside; the
    # backup copied to the ledger's path; the daemon started.
    aside = tmp_path / "aside"
    aside.mkdir()
    for name in (ledger.name, f"{ledger.name}-wal", f"{ledger.name}-shm"):
        if (tmp_path / name).exists():
            (tmp_path / name).rename(aside / name)
    shutil.copyfile(backup, ledger)
    resumed = cli.run("run", "--replay", str(data), "--max-ticks", "3", env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    lines = [json.loads(x) for x in resumed.stderr.splitlines()]
    [recovered] = [x for x in lines if x["event"] == "ledger recovered"]
    assert Decimal(recovered["cash"]) == taken["cash"]
    assert {s: Decimal(a) for s, a in recovered["positions"].items() if Decimal(a)} == taken[
        "positions"
    ]
    assert datetime.fromisoformat(recovered["last_tick"]) == datetime.fromisoformat(taken["last"])
    booked = ticks(ledger)
    assert len(booked) == len(ticks(backup)) + 3  # it went on from the backup's last tick
    assert booked[-4] == taken["last"]


def test_a_backup_of_a_damaged_ledger_is_refused_and_nothing_is_written(cli, tmp_path):
    data = recording(tmp_path, CONTEXT + 100)
    env = daemon_env(tmp_path)
    made = cli.run("run", "--replay", str(data), env=env)
    assert made.returncode == 0, made.stderr[-3000:]
    ledger = tmp_path / "ledger.sqlite3"
    size = ledger.stat().st_size
    with ledger.open("r+b") as handle:  # interior pages overwritten, as a failing disk does
        handle.seek(size // 2)
        handle.write(b"\xde\xad\xbe\xef" * 1024)
    backup = tmp_path / "backups" / "ledger.sqlite3"
    result = cli.run("ledger", "backup", str(ledger), str(backup), env=clean_env())
    assert result.returncode == EX_DATAERR, result.stderr
    assert "integrity_check" in result.stderr
    assert "damaged" in result.stderr
    assert not backup.exists()
    assert list(backup.parent.iterdir()) == []  # no partial copy left behind


def test_a_backup_into_a_folder_is_dated_and_a_destination_it_cannot_use_is_73(cli, tmp_path):
    data = recording(tmp_path, CONTEXT + 20)
    made = cli.run("run", "--replay", str(data), env=daemon_env(tmp_path))
    assert made.returncode == 0, made.stderr[-3000:]
    ledger = tmp_path / "ledger.sqlite3"
    folder = tmp_path / "backups"  # not there yet: the trailing / says it is a folder
    dated = cli.run("ledger", "backup", str(ledger), f"{folder}/", env=clean_env())
    assert dated.returncode == 0, dated.stderr
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    [written] = list(folder.iterdir())
    assert written.name.startswith("ledger-")
    assert written.suffix == ".sqlite3"
    assert str(written) in dated.stdout

    open_folder = tmp_path / "open"
    open_folder.mkdir()
    os.chmod(open_folder, 0o777)  # noqa: S103 - the unsafe folder this test plants
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    for dest, said in [
        (open_folder / "b.sqlite3", "can be written by other users"),
        (not_a_folder / "b.sqlite3", "not a folder"),
        (ledger, "is the ledger itself"),
    ]:
        refused = cli.run("ledger", "backup", str(ledger), str(dest), env=clean_env())
        assert refused.returncode == EX_CANTCREAT, (dest, refused.stderr)
        assert said in refused.stderr
        assert "Traceback" not in refused.stderr
    missing = cli.run(
        "ledger", "backup", str(tmp_path / "none.sqlite3"), str(folder), env=clean_env()
    )
    assert missing.returncode == EX_DATAERR
    assert "no ledger at" in missing.stderr
