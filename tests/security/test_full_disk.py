"""A full disk, or a disk that fails writes, stops trading at once and says so: the engine halts
with the reason (published to the hooks: metrics and MQTT), the ledger keeps nothing of the
tick, each failing tick is one error line (no traceback), and trading resumes by itself once a
write succeeds again. A replay or a backtest that meets it exits 74 with the reason first; after
freeing space, the resumed replay books what an uninterrupted one books.

The disks are real: a 600 KB tmpfs (the issue's case; we are root here and in CI), filled or
grown with `mount -o remount`, and RLIMIT_FSIZE in a child process (EFBIG: SQLite's "disk I/O
error"). Bars: tests/data's SOL/USDT 1h excerpt (tests/recorded.py)."""

from __future__ import annotations

import errno
import io
import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.conftest import missing_binary
from tests.integration.daemon import daemon_env
from tests.recorded import AAPL_1D, SOLUSDT_1H, excerpt
from trader.clock import SimulatedClock
from trader.config.daemon_settings import LogSettings
from trader.config.schema import Settings
from trader.exit_codes import EX_IOERR
from trader.forecast import BaselineForecaster
from trader.ledger import Database
from trader.ledger.write_failure import write_failure
from trader.logging import configure_logging
from trader.market.quotes import FixedSpread
from trader.market.replay import ReplayMarketData, read_recording
from trader.risk import TradingState
from trader.runner import build_engine, tick_times
from trader.telemetry.hooks import TelemetryHooks
from trader.telemetry.metrics import Metrics

TRADER = str(Path(sys.executable).parent / "trader")
TINY = "600k"  # the filesystem
BARS = 400  # SOL/USDT 1h bars replayed: 352 ticks after the 48-bar context


@contextmanager
def tiny_disk(path: Path, size: str = TINY) -> Iterator[Path]:
    """A tmpfs of `size` at `path`, unmounted at the end."""
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        missing_binary(f"a tmpfs mount (root): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def grow(path: Path, size: str = "64m") -> None:
    """Free space: the tmpfs at `path` made bigger, its files as they are."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)


def fill(folder: Path) -> Path:
    """Every free byte of `folder`'s filesystem taken by one file (ENOSPC proves it)."""
    filler = folder / "filler"
    with pytest.raises(OSError, match="No space left"):
        write_past_the_end(filler, None)
    return filler


def write_past_the_end(path: Path, size: int | None = 100_000) -> None:
    """`size` bytes into `path` (None: until the disk says no)."""
    with open(path, "wb") as handle:
        while True:
            handle.write(b"\0" * (size or 4096))
            handle.flush()
            if size is not None:
                return


def env(ledger: Path, **extra: str) -> dict[str, str]:
    """A quick paper replay (maxdiff trades, the baseline model) with its ledger at `ledger`."""
    return daemon_env(ledger.parent, TRADER_LEDGER__PATH=str(ledger), **extra)


def trader(*args: str, env: dict[str, str], cwd: Path, limit: int | None = None):  # type: ignore[no-untyped-def]
    def limited() -> None:  # the child's files stop growing at `limit` bytes: EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run(
        [TRADER, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180,
        check=False, preexec_fn=limited if limit is not None else None,
    )  # fmt: skip


def books(ledger: Path) -> dict[str, object]:
    """The ledger's money: cash and fees, positions, every fill, the last tick."""
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as c:
        return {
            "account": c.execute("SELECT cash, fees_paid FROM account").fetchall(),
            "positions": c.execute("SELECT * FROM positions ORDER BY symbol").fetchall(),
            "fills": c.execute("SELECT * FROM fills ORDER BY rowid").fetchall(),
            "last_tick": c.execute("SELECT max(at) FROM ticks").fetchone(),
        }


def booked_ticks(ledger: Path) -> int:
    with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True) as c:
        return int(c.execute("SELECT count(*) FROM ticks").fetchone()[0])


def log_lines(stderr: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def test_a_replay_on_a_600k_disk_exits_74_reason_first_and_resumes_as_if_never_stopped(tmp_path):
    data = excerpt(tmp_path / "SOLUSDT_1h.csv", BARS, SOLUSDT_1H)
    reference = tmp_path / "reference" / "ledger.sqlite3"
    whole = trader("run", "--replay", str(data), env=env(reference), cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr[-2000:]
    with tiny_disk(tmp_path / "disk") as disk:
        ledger = disk / "ledger.sqlite3"
        full = trader("run", "--replay", str(data), env=env(ledger), cwd=tmp_path)
        assert full.returncode == EX_IOERR, full.stdout + full.stderr[-3000:]
        first = full.stdout.splitlines()[0]
        assert first.startswith("trader run --replay stopped: the ledger ")
        assert str(ledger) in first
        assert "database or disk is full" in first
        logged = log_lines(full.stderr)
        assert not any("exception" in line for line in logged)  # no traceback
        failures = [line for line in logged if line["event"] == "ledger write failed"]
        assert len(failures) == 1  # stopped at once: the first failing tick was the last
        assert "database or disk is full" in str(failures[0]["reason"])
        (halt,) = [line for line in logged if line["event"] == "trading state"]
        assert halt["state"] == "halted"
        assert "database or disk is full" in str(halt["reason"])
        stopped_at = booked_ticks(ledger)
        assert 0 < stopped_at < booked_ticks(reference)
        grow(disk)  # space freed: the same command again resumes from the ledger's last tick
        resumed = trader("run", "--replay", str(data), env=env(ledger), cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr[-3000:]
        assert books(ledger) == books(reference)
        assert books(reference)["fills"]  # the run traded: the figures compared are not empty
        assert booked_ticks(ledger) == booked_ticks(reference)


def test_a_replay_whose_new_ledger_has_no_room_exits_74_before_its_first_tick(tmp_path):
    # Daily AAPL (trading days only, a split): the ledger cannot even be made on 200 KB.
    reference = tmp_path / "reference" / "ledger.sqlite3"
    whole = trader("run", "--replay", str(AAPL_1D), env=env(reference), cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr[-2000:]
    with tiny_disk(tmp_path / "disk", "200k") as disk:
        ledger = disk / "ledger.sqlite3"
        full = trader("run", "--replay", str(AAPL_1D), env=env(ledger), cwd=tmp_path)
        assert full.returncode == EX_IOERR, full.stdout + full.stderr[-3000:]
        assert full.stdout.startswith(
            f"trader run --replay stopped: the ledger {ledger} cannot be written: database or "
            "disk is full."
        )
        assert not any("exception" in line for line in log_lines(full.stderr))
        grow(disk)
        resumed = trader("run", "--replay", str(AAPL_1D), env=env(ledger), cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr[-3000:]
        assert books(ledger) == books(reference)
        assert books(reference)["fills"]


def test_a_replay_whose_writes_fail_with_an_io_error_exits_74(tmp_path):
    # No tmpfs needed: the child may not grow a file past 256 KB (EFBIG, "disk I/O error").
    data = excerpt(tmp_path / "SOLUSDT_1h.csv", BARS, SOLUSDT_1H)
    ledger = tmp_path / "state" / "ledger.sqlite3"
    done = trader("run", "--replay", str(data), env=env(ledger), cwd=tmp_path, limit=256_000)
    assert done.returncode == EX_IOERR, done.stdout + done.stderr[-3000:]
    assert done.stdout.startswith("trader run --replay stopped: the ledger ")
    assert "disk I/O error" in done.stdout.splitlines()[0]
    assert not any("exception" in line for line in log_lines(done.stderr))


# 64 KB: no room for a new ledger; 400 KB: room for it, not for the run's 780 KB of rows.
@pytest.mark.parametrize("size", ["64k", "400k"], ids=["at open", "at the end"])
def test_a_backtest_whose_ledger_cannot_be_written_exits_74_with_the_reason(tmp_path, size):
    data = excerpt(tmp_path / "SOLUSDT_1h.csv", BARS, SOLUSDT_1H)
    with tiny_disk(tmp_path / "disk", size) as disk:  # the backtest's ledgers go to TMPDIR
        done = trader(
            "backtest", "--data", str(data), "--model", "baseline", "--strategy", "maxdiff",
            env=env(tmp_path / "unused.sqlite3", TMPDIR=str(disk)), cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == EX_IOERR, done.stdout + done.stderr[-3000:]
    refusal = [line for line in done.stderr.splitlines() if line.startswith("trader backtest:")]
    assert refusal, done.stderr[-3000:]
    assert "cannot be written" in refusal[0]
    assert "database or disk is full" in refusal[0]
    assert "Traceback" not in done.stderr


async def test_a_full_disk_halts_at_once_keeps_the_ledger_and_trading_resumes_once_it_writes(
    tmp_path,
):
    stream = io.StringIO()
    configure_logging(LogSettings(level="INFO", format="json"), stream=stream)
    with tiny_disk(tmp_path / "disk", "2m") as disk:
        ledger = disk / "ledger.sqlite3"
        settings = Settings(
            market={"symbols": ["SOL/USDT"], "context_bars": 32, "replay_amount_step": "0.001"},
            strategy={"name": "maxdiff", "allow_short": True},
            ledger={"path": ledger},
        )
        sol = read_recording(SOLUSDT_1H)
        recordings = {"SOL/USDT": sol}
        times = tick_times(recordings, 32)[:12]
        clock = SimulatedClock(times[0])
        feed = ReplayMarketData(recordings, clock, FixedSpread(5))
        database = await Database.open(ledger)
        registry, states = CollectorRegistry(), []  # type: ignore[var-annotated]
        hooks = TelemetryHooks(
            Metrics(registry, ["SOL/USDT"]), "test", None, on_state=states.append
        )
        engine = await build_engine(
            settings, feed, database, times[0], forecasters=[BaselineForecaster(32)], hooks=hooks
        )
        try:

            async def tick(n: int):  # type: ignore[no-untyped-def]
                await clock.sleep_until(times[n])
                return await engine.tick(times[n])

            for n in range(4):
                assert (await tick(n)).outcome == "ok"
            before = books(ledger)
            filler = fill(disk)
            stream.truncate(0)
            stream.seek(0)
            failed = [await tick(4), await tick(5)]
            after = books(ledger)
            halted = registry.get_sample_value("trader_trading_state", {"state": "halted"})
            failures = registry.get_sample_value("trader_ledger_write_failures_total")
            lines = [json.loads(line) for line in stream.getvalue().splitlines()]
            filler.unlink()  # space again: the next tick writes, and trading resumes
            back = await tick(6)
            traded = await tick(7)
            state_events = await database.run(
                lambda c: c.execute("SELECT state, reason FROM trading_state_events").fetchall()
            )
        finally:
            engine.close()
            await database.close()
    assert [r.outcome for r in failed] == ["failed", "failed"]
    assert after == before  # nothing of the failing ticks was booked
    (halt, resumed) = states
    assert halt.state is TradingState.HALTED
    assert halt.reason.startswith(f"the ledger {ledger} cannot be written: database or disk is")
    assert failed[0].status is not None
    assert failed[0].status.state is TradingState.HALTED
    assert halted == 1.0
    assert failures == sum(r.write_failures for r in failed) >= 2
    # One error line per failing tick, none with a traceback; the halt said once.
    errors = [line for line in lines if line["level"] == "error"]
    assert [e["event"] for e in errors] == ["ledger write failed"] * 2
    assert not any("exception" in line for line in lines)
    assert [line["state"] for line in lines if line["event"] == "trading state"] == ["halted"]
    # Resumed by itself, to the state before the outage, and the ledger has both changes.
    assert back.outcome == "ok"
    assert resumed.state is TradingState.ACTIVE
    assert "the ledger can be written again" in resumed.reason
    assert engine.risk.state is TradingState.ACTIVE
    assert traded.outcome == "ok"
    assert [s for s, _ in state_events][-2:] == ["halted", "active"]


def insert_until_it_fails(c: sqlite3.Connection) -> None:
    for _ in range(100):
        c.execute("INSERT INTO t VALUES (?)", (b"x" * 4000,))


def test_write_failures_are_told_apart_from_other_errors(tmp_path):
    """Real errors, each made by the call that fails: a full disk, a read-only file."""
    with tiny_disk(tmp_path / "disk", "64k") as disk:
        c = sqlite3.connect(disk / "x.sqlite3", isolation_level=None)
        c.execute("CREATE TABLE t (x)")
        with pytest.raises(sqlite3.OperationalError) as full:
            insert_until_it_fails(c)
        c.close()
        read_only = sqlite3.connect(f"file:{disk / 'x.sqlite3'}?mode=ro", uri=True)
        with pytest.raises(sqlite3.OperationalError) as refused:
            read_only.execute("INSERT INTO t VALUES (1)")
        read_only.close()
        with pytest.raises(OSError, match="No space left") as no_space:
            write_past_the_end(disk / "more")
    assert write_failure(full.value) == "database or disk is full"
    assert write_failure(refused.value) == "attempt to write a readonly database"
    assert write_failure(no_space.value) == os.strerror(errno.ENOSPC)
    with pytest.raises(sqlite3.OperationalError) as syntax:
        sqlite3.connect(":memory:").execute("SELEKT 1")
    assert write_failure(syntax.value) is None  # a bug is not a full disk
    assert write_failure(ValueError("no")) is None
    wrapped = RuntimeError("a caller's own error")
    wrapped.__cause__ = no_space.value
    assert write_failure(wrapped) == os.strerror(errno.ENOSPC)  # the cause is what counts
