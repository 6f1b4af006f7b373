"""The ledger under hostile and failing conditions: a ledger with corrupt interior pages is refused
at start-up (exit 65, its path, what is wrong, how to restore) before any row is read; a 0-byte
ledger is refused until the user asks for a new one (`trader ledger new`); a ledger path that
is a symbolic link or a hard link, a planted link at its side files, and a ledger folder of
another user's or one that others may write to are refused with the reason, nothing written
or chmodded through them.

The ledger the damage is done to is a real one: the daemon's replay of the first 200 hours of
SOL/USDT (tests/data/SOLUSDT_1h.csv.gz, Binance spot; tests/data/README.md), trading."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import TRADER
from tests.integration.daemon import daemon_env
from tests.recorded import excerpt
from trader.exit_codes import EX_DATAERR
from trader.ledger import Database
from trader.ledger.database import LedgerDamaged, LedgerError

BARS = 200
NOBODY = 65534


def trader(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`trader ARGS` as a user runs it, in `folder`, its ledger `folder/state/ledger.sqlite3`."""
    env = daemon_env(
        folder,
        TRADER_LEDGER__PATH=str(folder / "state" / "ledger.sqlite3"),
        TRADER_METRICS__ENABLED="false",
    )
    return subprocess.run(
        [TRADER, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip


def replay(folder: Path) -> subprocess.CompletedProcess[str]:
    data = folder / "SOLUSDT_1h.csv"
    if not data.exists():
        excerpt(data, BARS)
    return trader(folder, "run", "--replay", str(data), "--symbol", "SOL/USDT")


def events(result: subprocess.CompletedProcess[str]) -> list[dict]:
    return [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def traded(tmp_path_factory) -> Path:
    """A ledger the daemon wrote: every tick of the replay, with orders and fills."""
    folder = tmp_path_factory.mktemp("traded")
    result = replay(folder)
    assert result.returncode == 0, result.stderr[-3000:]
    ledger = folder / "state" / "ledger.sqlite3"
    with sqlite3.connect(ledger) as c:
        assert c.execute("SELECT count(*) FROM fills").fetchone()[0] > 0
    return ledger


@pytest.fixture
def home(tmp_path, traded) -> Path:
    """A folder of the test's own holding a copy of the traded ledger."""
    (tmp_path / "state").mkdir(mode=0o700)
    shutil.copyfile(traded, tmp_path / "state" / "ledger.sqlite3")
    return tmp_path


DAMAGED_TABLE = "forecasts"  # 200 ticks of forecasts span an interior root page and leaves
INTERIOR = {0x05, 0x02}  # b-tree page types: interior table (rowid), interior index (WITHOUT ROWID)


def damage(ledger: Path) -> int:
    """Overwrite the forecasts table's root page (4 KiB), an interior page of its b-tree, as a
    failing disk or a bad copy leaves it; returns the page's number, its root page in
    sqlite_master (SQLite file format, https://www.sqlite.org/fileformat2.html: page N starts
    at (N - 1) x page size; "B-tree Pages": the type byte at its offset 0). Damage at a guessed
    offset lands on whatever page is there: since migration 11 the middle of the file is a page
    whose damage stops the check itself with "database disk image is malformed", naming no
    page, as damage to the fills, orders or ticks tables' root pages does (SQLite 3.40, seen
    here); the forecasts table's is reported as that page ("Page N: btreeInitPage() ...")."""
    with sqlite3.connect(ledger) as c:
        (root,) = c.execute(
            "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?",
            (DAMAGED_TABLE,),
        ).fetchone()
        (page_size,) = c.execute("PRAGMA page_size").fetchone()
    c.close()  # the context manager commits; it does not close
    start = (root - 1) * page_size
    with ledger.open("r+b") as handle:
        handle.seek(start)
        assert handle.read(1)[0] in INTERIOR, f"{DAMAGED_TABLE} fits one page: trade longer"
        handle.seek(start)
        handle.write(b"\xde\xad\xbe\xef" * (page_size // 4))
    return int(root)


def test_a_ledger_with_corrupt_pages_is_refused_with_65_before_any_row_is_read(home):
    ledger = home / "state" / "ledger.sqlite3"
    root = damage(ledger)
    result = replay(home)
    lines = events(result)
    said = [x for x in lines if x["event"] == "cannot start"]
    assert result.returncode == EX_DATAERR, result.stderr[-3000:]
    assert said, result.stderr[-3000:]
    reason = said[0]["reason"]
    assert str(ledger) in reason
    assert "damaged" in reason
    assert f"page {root}:" in reason.lower()  # what SQLite's check found, in its words
    assert "trader ledger backup" in reason
    assert "-wal" in reason  # the write-ahead log is kept, never deleted
    assert said[0]["step"] == "ledger recovery"
    # Nothing was read from it: neither the account nor the last tick.
    read = {"ledger recovered", "replay: every tick is in the ledger already", "replay"}
    assert read.isdisjoint(x["event"] for x in lines)


def test_reconcile_refuses_a_damaged_ledger_with_65(home):
    ledger = home / "state" / "ledger.sqlite3"
    damage(ledger)
    result = trader(home, "reconcile", "--dry-run")
    assert result.returncode == EX_DATAERR, result.stderr[-3000:]
    assert f"ledger {ledger} is damaged" in result.stderr
    assert "Traceback" not in result.stderr


async def test_a_damaged_ledger_is_refused_when_opened_by_any_command(home):
    ledger = home / "state" / "ledger.sqlite3"
    damage(ledger)
    with pytest.raises(LedgerDamaged, match="damaged") as refused:
        await Database.open(ledger)
    assert str(ledger) in str(refused.value)
    with pytest.raises(LedgerDamaged):  # a backtest's reading of its ledger as well
        await Database.open(ledger, durable=False)


def test_a_zero_byte_ledger_is_refused_until_a_new_one_is_asked_for(tmp_path):
    ledger = tmp_path / "state" / "ledger.sqlite3"
    ledger.parent.mkdir(mode=0o700)
    ledger.touch(mode=0o600)
    refused = replay(tmp_path)
    assert refused.returncode == EX_DATAERR, refused.stderr[-3000:]
    [said] = [x for x in events(refused) if x["event"] == "cannot start"]
    assert str(ledger) in said["reason"]
    assert "empty" in said["reason"]
    assert f"trader ledger new {ledger}" in said["reason"]
    assert ledger.stat().st_size == 0  # untouched

    made = trader(tmp_path, "ledger", "new", str(ledger))
    assert made.returncode == 0, made.stderr
    assert str(ledger) in made.stdout
    result = replay(tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert any(x["event"] == "ledger recovered" for x in events(result))


def test_ledger_new_refuses_a_ledger_that_has_rows(home):
    ledger = home / "state" / "ledger.sqlite3"
    before = ledger.read_bytes()
    result = trader(home, "ledger", "new", str(ledger))
    assert result.returncode == EX_DATAERR
    assert "not empty" in result.stderr
    assert ledger.read_bytes() == before


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize("side", ["", "-wal", "-shm"])
async def test_a_planted_link_at_the_ledger_or_its_side_files_is_refused_not_followed(
    tmp_path, side
):
    victim = tmp_path / "precious.txt"
    victim.write_text("the victim's data\n")
    os.chmod(victim, 0o644)
    ledger = tmp_path / "state" / "ledger.sqlite3"
    ledger.parent.mkdir(mode=0o700)
    if side:
        await (await Database.open(ledger)).close()  # a ledger, left as a clean stop leaves it
    os.symlink(victim, f"{ledger}{side}")
    with pytest.raises(LedgerError, match="symbolic link") as refused:
        await Database.open(ledger)
    assert f"{ledger}{side}" in str(refused.value)
    assert victim.read_text() == "the victim's data\n"
    assert mode(victim) == 0o644  # not chmodded through the link


async def test_a_hard_linked_ledger_is_refused(tmp_path, traded):
    ledger = tmp_path / "state" / "ledger.sqlite3"
    ledger.parent.mkdir(mode=0o700)
    other = tmp_path / "other.sqlite3"
    shutil.copyfile(traded, other)
    os.link(other, ledger)
    with pytest.raises(LedgerError, match="hard links"):
        await Database.open(ledger)


@pytest.mark.parametrize("kind", ["writable by others", "symlink", "another user's"])
async def test_a_ledger_folder_others_can_write_a_linked_one_or_anothers_is_refused(tmp_path, kind):
    folder = tmp_path / "state"
    folder.mkdir(mode=0o700)
    if kind == "writable by others":
        os.chmod(folder, 0o777)  # noqa: S103 - the unsafe folder this test plants
        expected = "can be written by other users"
    elif kind == "symlink":
        real, folder = folder, tmp_path / "link"
        folder.symlink_to(real)
        expected = "symbolic link"
    else:
        if os.geteuid() != 0:
            pytest.skip("making a folder another user's needs root")
        os.chown(folder, NOBODY, NOBODY)
        expected = "belongs to another user"
    ledger = folder / "ledger.sqlite3"
    with pytest.raises(LedgerError, match=expected) as refused:
        await Database.open(ledger)
    assert str(folder) in str(refused.value)
    assert ledger.name not in os.listdir(folder)  # nothing made in it


def test_the_cli_says_why_a_linked_ledger_is_refused(tmp_path, traded):
    real = tmp_path / "elsewhere.sqlite3"
    shutil.copyfile(traded, real)
    os.chmod(real, 0o644)
    ledger = tmp_path / "state" / "ledger.sqlite3"
    ledger.parent.mkdir(mode=0o700)
    ledger.symlink_to(real)
    result = replay(tmp_path)
    assert result.returncode == EX_DATAERR, result.stderr[-3000:]
    [said] = [x for x in events(result) if x["event"] == "cannot start"]
    assert "symbolic link" in said["reason"]
    assert str(ledger) in said["reason"]
    assert mode(real) == 0o644
