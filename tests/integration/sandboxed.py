"""`trader sandbox` as the tests run it: started as a process on any free port, its ready file
read, the daemon's environment for it, and its control endpoints."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from tests.integration.conftest import TRADER, clean_env
from tests.recorded import SOLUSDT_1H

T = TypeVar("T")
KEY, SECRET = "kill-run-key", "kill-run-secret-0123456789abcdef"
# The daemon's trading, the same on every venue: a small window, the baseline model, maxdiff
# (limit orders that rest and fill later) on the first pair and simple (market orders) on
# the second, and limits wide enough that they never halt it.
TRADING = {
    "TRADER_MARKET__CONTEXT_BARS": "32",
    "TRADER_FORECAST__MODEL": "baseline",
    "TRADER_FORECAST__BASELINE_LOOKBACK": "32",
    "TRADER_FORECAST__HORIZON": "4",
    "TRADER_STRATEGY__NAME": "maxdiff",
    "TRADER_STRATEGY__POSITION_FRACTION": "0.05",
    "TRADER_RISK__MAX_ORDERS_PER_MINUTE": "10000",
    "TRADER_RISK__MIN_EDGE_BPS": "0",
    "TRADER_RISK__MAX_DAILY_LOSS": "0.9",
    "TRADER_RISK__MAX_DRAWDOWN": "0.9",
    "TRADER_METRICS__PORT": "0",
    "TRADER_SCHEDULE__RECONCILE_INTERVAL_S": "3",
}


def start_sandbox(
    tmp: Path, venue: str = "binance", symbols: tuple[str, str] = ("SOL/USDT", "BTC/USDT"),
    data: tuple[Path, Path] = (SOLUSDT_1H, SOLUSDT_1H), *extra: str,
) -> tuple[subprocess.Popen[bytes], dict]:  # fmt: skip
    """The sandbox serving `data` as `symbols`, and its ready file (address, keys, and for
    Alpaca the daemon's settings)."""
    ready = tmp / "sandbox.json"
    process = subprocess.Popen(
        [TRADER, "sandbox", "--venue", venue, "--data", *map(str, data), "--symbol", symbols[0],
         "--symbol", symbols[1], "--port", "0", "--warmup", "200", "--api-key", KEY,
         "--api-secret", SECRET, "--ready-file", str(ready), "--log-level", "ERROR", *extra],
        cwd=tmp, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "the sandbox did not start"
        time.sleep(0.05)
    return process, json.loads(ready.read_text())


def daemon_env(tmp: Path, sandbox: dict) -> dict[str, str]:
    """The daemon in live mode against the sandbox, its ledger and locks in `tmp`: Binance's
    keys from the secrets directory; Alpaca's settings as the sandbox printed them."""
    common = TRADING | {
        "TRADER_STRATEGY__PER_SYMBOL": json.dumps({sandbox["symbols"][1]: "simple"}),
        "TRADER_BROKER__LOCK_DIR": str(tmp / "locks"),
        "TRADER_LEDGER__PATH": str(tmp / "ledger.sqlite3"),
        "TRADER_EXCHANGE__TIMEOUT_S": "2",
    }
    if sandbox["venue"] == "alpaca":
        return clean_env(**(sandbox["env"] | common))
    secrets = tmp / "secrets"
    secrets.mkdir(exist_ok=True)
    (secrets / "TRADER_EXCHANGE__API_KEY").write_text(KEY)
    (secrets / "TRADER_EXCHANGE__API_SECRET").write_text(SECRET)
    return clean_env(
        TRADER_SECRETS_DIR=str(secrets),
        TRADER_EXCHANGE__API_BASE_URL=sandbox["base_url"],
        TRADER_MARKET__SYMBOLS=",".join(sandbox["symbols"]),
        TRADER_MARKET__TIMEFRAME="1s",
        TRADER_BROKER__MODE="live",
        TRADER_BROKER__LIVE_CONFIRMATION="true",
        TRADER_BROKER__RECV_WINDOW_MS="1000",
        TRADER_SCHEDULE__SETTLE_DELAY_S="0.3",
        **common,
    )


def emulator(sandbox: dict, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(  # noqa: S310 - loopback, the test's own sandbox
        sandbox["base_url"] + path, data=data, method="POST" if data else "GET"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback, the test's own sandbox
        return json.loads(answer.read())


def wall_instant(ready: dict, at: datetime) -> float:
    """When the wall clock reaches the instant the sandbox's clock shows `at` (epoch s)."""
    env = ready["env"]
    origin = datetime.fromisoformat(env["TRADER_EXCHANGE__CLOCK__ORIGIN"])
    wall = datetime.fromisoformat(env["TRADER_EXCHANGE__CLOCK__WALL_ORIGIN"])
    speed = float(env["TRADER_EXCHANGE__CLOCK__SPEED"])
    return (wall + (at - origin) / speed).timestamp()


def stop_at(
    daemon: Any, ready: dict, until: datetime, tmp: Path, before_stop: Callable[[], T] | None = None
) -> tuple[int, T | None]:
    """Lets `daemon` run until the sandbox's clock shows `until`, stops that clock and gives
    it a tick or two on the standing market to book the last fills (`before_stop` runs then),
    then stops it: its exit code, and what `before_stop` answered. Its log is kept in
    `tmp`/daemon.jsonl for a post-mortem."""
    time.sleep(max(0.0, wall_instant(ready, until) - time.time()))
    emulator(ready, "/__emulator__/clock", {"paused": True})
    time.sleep(2)
    seen = before_stop() if before_stop is not None else None
    daemon.process.send_signal(signal.SIGTERM)
    stopped = daemon.finish(timeout=60)
    with (tmp / "daemon.jsonl").open("w") as log:
        log.writelines(json.dumps(line) + "\n" for line in daemon.lines)
    return int(stopped), seen
