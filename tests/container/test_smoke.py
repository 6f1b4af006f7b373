"""The image's smoke test: the daemon in a container started as compose.yaml starts it
(read-only root, no capabilities, no new privileges, init, tmpfs, its state on a named volume),
on the recording `trader demo` replays, offline, with the paper broker and the baseline model.
While it runs, the image's HEALTHCHECK says healthy and /metrics answers on a port published on
127.0.0.1; SIGTERM stops it with exit 0 within compose's stop grace period; the ledger it leaves
on the volume passes SQLite's integrity check and the kill tests' consistency checks.

The tests before `stopped` look at the running daemon, those after at what it left: pytest runs
them in the order of this file."""

from __future__ import annotations

import asyncio
import io
import json
import secrets
import sqlite3
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.container.as_compose import ComposeRun, compose_run
from tests.container.conftest import BuiltImage
from tests.container.engine import Engine
from tests.integration.daemon import daemon_env, scrape
from tests.integration.test_engine_crash import check_consistent

pytestmark = pytest.mark.integration

STATE = Path("/var/lib/trader")  # compose's trader-state volume
LEDGER = "trader.sqlite3"  # the image's TRADER_LEDGER__PATH, in STATE
# Two hourly bars a second: ~8 minutes of replay, still running while it is checked, yet
# trading from its first seconds.
SPEED = 7200
TICKS_BEFORE_STOP = 5
START_TIMEOUT_S = 120  # from `run` to the first fill: imports and start-up on a busy machine
# docker runs the image's HEALTHCHECK itself, first an interval (30 s) after the start.
HEALTH_TIMEOUT_S = 90
# What tests/integration/daemon.py's daemon_env sets for a paper run that trades, but for the
# ledger's path and the metrics port: those stay the image's and compose's own.
SETTINGS = {
    name: value
    for name, value in daemon_env(STATE).items()
    if name.startswith("TRADER_") and name not in {"TRADER_LEDGER__PATH", "TRADER_METRICS__PORT"}
}
RECORDING = (
    "from importlib import resources; print(resources.files('trader.demo') / 'SOLUSDT_1h.csv.gz')"
)


@dataclass(frozen=True)
class Running:
    engine: Engine
    name: str
    run: ComposeRun
    metrics_port: int


@dataclass(frozen=True)
class Stopped:
    exit_code: int
    seconds: float  # from `stop` to its return
    ok_ticks_seen: float  # ticks /metrics counted as ok just before the stop
    ledger: Path  # a copy of the ledger the volume holds
    log: str


def logs(engine: Engine, name: str) -> str:
    """The daemon's log (JSON lines on stderr)."""
    return engine.run(["logs", name], check=False).stderr


def inspect(engine: Engine, name: str, field: str) -> str:
    return engine.run(["inspect", f"--format={{{{{field}}}}}", name]).stdout.strip()


def ok_ticks(values: dict) -> float:
    return values.get(("trader_ticks_total", (("outcome", "ok"),)), 0.0)


def trading(port: int) -> bool:
    """TICKS_BEFORE_STOP ok ticks and a fill on /metrics (False until it answers)."""
    try:
        values = scrape(port)
    except (OSError, AssertionError):
        return False
    filled = sum(v for (name, _), v in values.items() if name == "trader_fills_total")
    return ok_ticks(values) >= TICKS_BEFORE_STOP and filled > 0


@pytest.fixture(scope="module")
def running(image: BuiltImage) -> Iterator[Running]:
    """The daemon in its container, once it has ticked and traded."""
    engine, name = image.engine, f"trader-smoke-{secrets.token_hex(4)}"
    run = compose_run(name, SETTINGS)
    recording = engine.run(["run", "--rm", image.tag, "python3", "-c", RECORDING]).stdout.strip()
    try:
        engine.run([
            "run", "--detach", f"--name={name}", *run.args, image.tag,
            "trader", "run", "--log-format", "json", "--replay", recording,
            "--symbol", "SOL/USDT", "--speed", str(SPEED),
        ])  # fmt: skip
        address = engine.run(["port", name, run.port]).stdout.split()[0]
        host, _, port = address.rpartition(":")
        assert host == "127.0.0.1", f"published on {address}, not on loopback only"
        deadline = time.monotonic() + START_TIMEOUT_S
        while not trading(int(port)):
            state = inspect(engine, name, ".State.Status")
            assert state == "running", f"the container is {state}: {logs(engine, name)[-3000:]}"
            assert time.monotonic() < deadline, f"no fill yet: {logs(engine, name)[-3000:]}"
            time.sleep(0.2)
        yield Running(engine, name, run, int(port))
    finally:
        engine.run(["rm", "--force", "--volumes", name], check=False)
        engine.run(["volume", "rm", "--force", *run.volumes], check=False)


def test_help_and_config_check_exit_0(image: BuiltImage):
    engine = image.engine
    shown = engine.run(
        ["run", "--rm", "--read-only", "--cap-drop=ALL", image.tag, "trader", "--help"]
    )
    assert "run the daemon" in shown.stdout, shown.stdout
    run = compose_run(f"trader-smoke-{secrets.token_hex(4)}", SETTINGS)
    try:
        checked = engine.run(["run", "--rm", *run.args, image.tag, "trader", "config", "check"])
    finally:
        engine.run(["volume", "rm", "--force", *run.volumes], check=False)
    # The image's settings file, with compose's environment and the smoke test's settings.
    assert checked.stdout.startswith("ok: /etc/trader/trader.toml"), checked.stdout


def test_the_daemon_runs_unprivileged_on_a_read_only_root(running: Running):
    """The daemon's own process, as compose.yaml asks: uid 10001, no capability, no new
    privileges, and a root file system it cannot write to."""
    probe = (
        "import pathlib\n"
        "[proc] = [p.parent for p in pathlib.Path('/proc').glob('[0-9]*/cmdline')\n"
        "          if b'/bin/trader\\x00run\\x00' in p.read_bytes()]\n"
        "print((proc / 'status').read_text())\n"
        "try:\n    open('/etc/trader/written', 'w')\nexcept OSError as error:\n    print(error)\n"
    )
    out = running.engine.run(["exec", running.name, "python3", "-c", probe]).stdout
    status = {k: v.split() for k, _, v in (line.partition(":") for line in out.splitlines())}
    assert status["Uid"] == ["10001"] * 4, out
    assert status["CapEff"] == status["CapBnd"] == ["0" * 16], out
    assert status["NoNewPrivs"] == ["1"], out
    assert "Read-only file system" in out, out


def test_the_healthcheck_reports_healthy(running: Running):
    engine = running.engine
    if engine.name == "podman":
        # podman runs the image's HEALTHCHECK from systemd timers, and none where systemd is
        # not PID 1: run it now (it records its result as a scheduled run would).
        engine.run(["healthcheck", "run", running.name])
    deadline = time.monotonic() + HEALTH_TIMEOUT_S  # docker: its first run, an interval in
    while (health := json.loads(inspect(engine, running.name, "json .State.Health")))[
        "Status"
    ] == "starting" and time.monotonic() < deadline:
        time.sleep(1)
    assert health["Status"] == "healthy", health
    assert health["Log"][-1]["ExitCode"] == 0, health


def test_metrics_answer_on_the_published_loopback_port(running: Running):
    values = scrape(running.metrics_port)
    assert ok_ticks(values) >= TICKS_BEFORE_STOP
    assert {"trader_fills_total", "trader_equity", "trader_position"} <= {n for n, _ in values}
    assert values[("trader_trading_state", (("state", "active"),))] == 1


@pytest.fixture(scope="module")
def stopped(running: Running, tmp_path_factory: pytest.TempPathFactory) -> Stopped:
    """SIGTERM (the image's STOPSIGNAL) with compose's grace period, then the ledger copied
    off the volume."""
    engine, name = running.engine, running.name
    seen = ok_ticks(scrape(running.metrics_port))
    began = time.monotonic()
    engine.run(["stop", f"--time={running.run.stop_timeout_s}", name])
    seconds = time.monotonic() - began
    code = int(inspect(engine, name, ".State.ExitCode"))
    folder = tmp_path_factory.mktemp("state")
    archive = engine.run(["cp", f"{name}:{STATE}/.", "-"], text=False).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            source = tar.extractfile(member) if member.name.startswith(LEDGER) else None
            if source is not None:  # the ledger and its side files, written as ours
                (folder / member.name).write_bytes(source.read())
                (folder / member.name).chmod(0o600)
    return Stopped(code, seconds, seen, folder / LEDGER, logs(engine, name))


def test_sigterm_stops_it_with_exit_0_within_the_stop_timeout(running: Running, stopped: Stopped):
    assert stopped.exit_code == 0, stopped.log[-3000:]
    # Still running at the timeout, it would have been killed (137): it stopped of itself.
    assert stopped.seconds < running.run.stop_timeout_s
    events = [json.loads(line) for line in stopped.log.splitlines() if line.startswith("{")]
    said = [(e["event"], e.get("signal"), e.get("exit_code")) for e in events]
    assert ("stopping", "SIGTERM", None) in said, said[-5:]  # the signal reached the daemon
    assert said[-1] == ("stopped", None, 0), said[-5:]


def test_the_ledger_left_on_the_volume_is_consistent(stopped: Stopped):
    with sqlite3.connect(stopped.ledger) as c:
        assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        fills = c.execute("SELECT count(*) FROM fills").fetchone()[0]
    assert fills > 0  # it traded: there is something to get wrong
    # The kill tests' checks: cash and positions agree with the fills, no orphan or twice-booked
    # fill or order, no order filled beyond its amount.
    ticks = asyncio.run(check_consistent(stopped.ledger))
    assert ticks >= stopped.ok_ticks_seen  # every tick /metrics counted is in the ledger
