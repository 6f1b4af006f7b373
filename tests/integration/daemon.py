"""What the daemon tests share: recorded bars cut to size, the settings of a quick paper run,
and reading /metrics and the ledger of a running daemon."""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import Cli, Daemon, clean_env
from tests.integration.loopback import http_get
from tests.recorded import excerpt


def recording(tmp: Path, bars: int, name: str = "SOLUSDT_1h.csv") -> Path:
    """The first `bars` hours of SOL/USDT, as a plain CSV file in `tmp`."""
    return excerpt(tmp / name, bars)


def daemon_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A paper run that trades (maxdiff, shorts allowed) with the baseline model, its ledger
    and metrics on the test's own path and a free port."""
    settings = {
        "TRADER_LEDGER__PATH": str(tmp / "ledger.sqlite3"),
        "TRADER_METRICS__PORT": "0",
        "TRADER_FORECAST__MODEL": "baseline",
        "TRADER_FORECAST__BASELINE_LOOKBACK": "48",
        "TRADER_MARKET__CONTEXT_BARS": "48",
        "TRADER_STRATEGY__NAME": "maxdiff",
        "TRADER_STRATEGY__ALLOW_SHORT": "true",
        "TRADER_MARKET__REPLAY_AMOUNT_STEP": "0.001",
        "TRADER_MARKET__REPLAY_PRICE_STEP": "0.0001",
    }
    return clean_env(**(settings | extra))


# AAPL's daily bars (tests/data) as the daemon trades a stock in New York's sessions.
AAPL_SESSIONS = {
    "TRADER_MARKET__CALENDAR": "XNYS", "TRADER_STRATEGY__NAME": "simple",
    "TRADER_MARKET__CONTEXT_BARS": "48", "TRADER_MARKET__REPLAY_PRICE_STEP": "0.01",
    "TRADER_MARKET__REPLAY_AMOUNT_STEP": "1", "TRADER_LEDGER__BAR_RETENTION_DAYS": "400",
}  # fmt: skip


def paper_run(cli: Cli, tmp: Path, data: Path, *args: str, **extra: str) -> Path:
    """`trader run --replay` of `data` into the test's ledger (exit 0 asserted); the ledger."""
    done = cli.run("run", "--replay", str(data), *args, env=daemon_env(tmp, **extra))
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp / "ledger.sqlite3"


def metrics_port(daemon: Daemon, timeout: float = 60.0) -> int:
    return int(daemon.wait_for("serving metrics", timeout)["port"])


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200, text
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def metric(port: int, name: str, **labels: str) -> float:
    """The one sample of `name` with (at least) these labels."""
    found = [
        v
        for (n, got), v in scrape(port).items()
        if n == name and all(dict(got).get(k) == x for k, x in labels.items())
    ]
    assert len(found) == 1, f"{name}{labels}: {found}"
    return found[0]


def ticks(ledger: Path) -> list[str]:
    """The tick times booked, read without disturbing the process writing the ledger."""
    if not ledger.exists():
        return []
    try:
        with sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=5) as c:
            return [row[0] for row in c.execute("SELECT at FROM ticks ORDER BY at")]
    except sqlite3.OperationalError:
        return []


def wait_until(condition, what: str, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = condition()
        except (OSError, AssertionError):
            result = None
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def running(daemon: Daemon) -> Iterator[Daemon]:
    """The daemon, killed at the end if the test did not stop it (a failure on the way)."""
    try:
        yield daemon
    finally:
        if daemon.process.poll() is None:
            daemon.process.kill()
            daemon.process.wait(timeout=30)


def stop(daemon: Daemon) -> int:
    """SIGTERM, as systemd stops it; the exit code once it has finished."""
    daemon.process.send_signal(signal.SIGTERM)
    return daemon.finish()
