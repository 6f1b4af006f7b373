"""What a neighbour on the same host could read or plant: the ledger and its side files, its lock
and the symbol locks are private under any umask; a lock path that is a symbolic link, a hard
link or a FIFO, a lock folder of another user's or one that others may write to, is refused
without a byte written through it; lock names say nothing about the API key."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from trader.broker.safety import StartRefused, account_name, lock_path, take_live_locks
from trader.config.schema import Settings
from trader.ledger import Database

NOW = datetime(2024, 3, 1, tzinfo=UTC)
KEY = "the-api-key-of-the-account"
SYMBOL = "SOL/USDT"
NOBODY = 65534


def live(tmp: Path, lock_dir: Path | None = None, key: str = KEY) -> Settings:
    return Settings(
        instance="one",
        exchange={"api_key": key, "api_secret": "s3cret"},
        broker={"mode": "live", "live_confirmation": True,
                "lock_dir": lock_dir or tmp / "state" / "locks"},
        ledger={"path": tmp / "state" / "ledger" / "trader.sqlite3"},
    )  # fmt: skip


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@contextmanager
def umask(value: int) -> Iterator[None]:
    previous = os.umask(value)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.parametrize("mask", [0o000, 0o022], ids=["umask 000", "umask 022"])
async def test_the_ledger_its_side_files_and_every_lock_are_private_under_any_umask(tmp_path, mask):
    settings = live(tmp_path)
    ledger = settings.ledger.path
    with umask(mask):
        database = await Database.open(ledger)
        try:
            await database.run(lambda c: c.execute("CREATE TABLE t (x)"))  # a write: -wal, -shm
            locks = take_live_locks(settings, [SYMBOL], NOW)
            files = [ledger, *(ledger.with_name(ledger.name + s) for s in ("-wal", "-shm"))]
            files += [ledger.with_name(ledger.name + ".lock"), lock_path(settings, SYMBOL)]
            assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
            assert mode(settings.broker.lock_dir / "account-salt") == 0o600
            folders = [ledger.parent, ledger.parent.parent, settings.broker.lock_dir]
            assert {str(f): mode(f) for f in folders} == {str(f): 0o700 for f in folders}
            locks.release()
        finally:
            await database.close()


async def test_a_ledger_left_readable_by_an_older_version_is_made_private(tmp_path):
    ledger = tmp_path / "trader.sqlite3"
    await (await Database.open(ledger)).close()  # a ledger (an empty file is refused)
    os.chmod(ledger, 0o644)
    await (await Database.open(ledger)).close()
    assert mode(ledger) == 0o600


def test_evidence_is_written_private(tmp_path):
    from trader.doctor.command import _write as write_evidence  # noqa: PLC0415 - torch

    with umask(0o000):
        folder = write_evidence(tmp_path / "evidence", {"summary.md": "hello"}, [])
    assert (mode(folder), mode(folder / "summary.md")) == (0o700, 0o600)


def planted(kind: str, path: Path, victim: Path) -> None:
    if kind == "symlink":
        path.symlink_to(victim)
    elif kind == "hard link":
        os.link(victim, path)
    else:
        os.mkfifo(path)


@pytest.mark.parametrize("kind", ["symlink", "hard link", "fifo"])
def test_a_planted_lock_is_refused_and_nothing_is_written_through_it(tmp_path, kind):
    settings = live(tmp_path)
    victim = tmp_path / "precious.txt"
    victim.write_text("the victim's data\n")
    path = lock_path(settings, SYMBOL)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # as a first daemon leaves it
    planted(kind, path, victim)
    with pytest.raises(StartRefused, match="refused") as refused:
        take_live_locks(settings, [SYMBOL], NOW)
    assert victim.read_text() == "the victim's data\n"
    assert str(path) in str(refused.value)
    assert KEY not in str(refused.value)


def test_a_planted_ledger_lock_is_refused(tmp_path):
    settings = live(tmp_path)
    victim = tmp_path / "precious.txt"
    victim.write_text("the victim's data\n")
    ledger_lock = settings.ledger.path.with_name(settings.ledger.path.name + ".lock")
    ledger_lock.parent.mkdir(parents=True)
    ledger_lock.symlink_to(victim)
    with pytest.raises(StartRefused, match="symbolic link"):
        take_live_locks(settings, [SYMBOL], NOW)
    assert victim.read_text() == "the victim's data\n"


def test_a_lock_folder_of_another_user_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(theirs, NOBODY, NOBODY)
    else:  # a folder of root's stands in for another user's
        theirs = Path("/")
    with pytest.raises(StartRefused, match="belongs to another user"):
        take_live_locks(live(tmp_path, lock_dir=theirs), [SYMBOL], NOW)


@pytest.mark.parametrize("kind", ["writable by others", "symlink"])
def test_a_lock_folder_others_can_write_or_a_linked_one_is_refused(tmp_path, kind):
    folder = tmp_path / "locks"
    folder.mkdir()
    if kind == "writable by others":
        os.chmod(folder, 0o777)  # noqa: S103 - the unsafe folder this test plants
        expected = "can be written by other users"
    else:
        real, folder = folder, tmp_path / "link"
        folder.symlink_to(real)
        expected = "symbolic link"
    with pytest.raises(StartRefused, match=expected):
        take_live_locks(live(tmp_path, lock_dir=folder), [SYMBOL], NOW)


def test_lock_names_reveal_nothing_about_the_key_even_after_a_wrong_key(tmp_path):
    wrong = live(tmp_path, key="a-wrong-key-tried-first")
    take_live_locks(wrong, [SYMBOL], NOW).release()  # a start that the venue then refuses
    take_live_locks(live(tmp_path), [SYMBOL], NOW).release()
    names = " ".join(p.name for p in (tmp_path / "state").rglob("*"))
    for key in (KEY, "a-wrong-key-tried-first"):
        digest = hashlib.sha256(key.encode()).hexdigest()
        assert digest[:8] not in names
        assert key not in names
    # Two daemons on one lock folder (so one salt) still name the same account alike.
    assert account_name(live(tmp_path)) == account_name(
        live(tmp_path / "elsewhere", lock_dir=tmp_path / "state" / "locks")
    )
    assert account_name(live(tmp_path)) != account_name(live(tmp_path, lock_dir=tmp_path / "other"))
