"""`trader run` as a service: a simulated month on schedule with no overlapping ticks, systemd
notifications, SIGHUP reloading, a clean SIGTERM with the ledger flushed, the shutdown stance
on open orders, and the start-up failures an operator must be able to act on."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import signal
import socket
import threading
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.integration.conftest import clean_env
from tests.integration.daemon import (
    daemon_env,
    metric,
    metrics_port,
    recording,
    running,
    scrape,
    stop,
    ticks,
    wait_until,
)
from tests.integration.loopback import http_get
from trader.ledger import Database
from trader.ledger.trading import TradingLedger

pytestmark = pytest.mark.integration

MONTH = 30 * 24  # hourly ticks
CONTEXT = 48
# An address where nothing listens: the exchange is "unreachable" without any network.
NOWHERE = "http://127.0.0.1:9"


class NotifyListener:
    """The datagram socket systemd would listen on, read as messages come (the kernel queues
    only a few datagrams on a unix socket)."""

    def __init__(self) -> None:
        self.address = f"@trader-test-{uuid.uuid4().hex}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.address[1:])
        self.sock.settimeout(0.2)
        self.messages: list[str] = []
        self._open = True
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while self._open:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                continue

    def close(self) -> list[str]:
        self._open = False
        self._reader.join(timeout=5)
        self.sock.close()
        return self.messages


async def ledger_state(path: Path):  # type: ignore[no-untyped-def]
    database = await Database.open(path)
    try:
        return await TradingLedger(database).load()  # refuses an inconsistent ledger
    finally:
        await database.close()


def test_a_simulated_month_ticks_on_schedule_reloads_on_sighup_and_stops_cleanly(cli, tmp_path):
    data = recording(tmp_path, CONTEXT + MONTH + 3000)  # SIGTERM comes first
    config = tmp_path / "trader.toml"
    config.write_text('[strategy]\nname = "maxdiff"\nallow_short = true\n')
    env = daemon_env(tmp_path) | {"TRADER_CONFIG": str(config)}
    del env["TRADER_STRATEGY__NAME"], env["TRADER_STRATEGY__ALLOW_SHORT"]
    listener = NotifyListener()
    env |= {"NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "400000"}
    ledger = tmp_path / "ledger.sqlite3"
    # 0.01 s of wall time per simulated hour: the month takes seconds.
    daemon = cli.start("run", "--log-level", "DEBUG", "--replay", str(data), "--speed", "360000",
                       env=env)  # fmt: skip
    with running(daemon):
        port = metrics_port(daemon)
        wait_until(lambda: len(ticks(ledger)) >= MONTH // 2, "half a month of ticks")
        config.write_text(
            '[strategy]\nname = "simple"\nallow_short = true\n[market]\nmax_quote_age_s = 60.0\n'
        )
        daemon.process.send_signal(signal.SIGHUP)
        wait_until(lambda: len(ticks(ledger)) >= MONTH, "a month of ticks", timeout=120)
        assert metric(port, "trader_ticks_total", outcome="missed") == 0
        assert stop(daemon) == 0
    notes = listener.close()

    # On schedule: every recorded bar close after the first full window, once, in order, and
    # each tick started at its simulated time.
    booked = [datetime.fromisoformat(t) for t in ticks(ledger)]
    assert len(booked) >= MONTH
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(booked))
    lines = daemon.lines
    started = [x for x in lines if x["event"] in {"tick started", "tick done"}]
    # Never two at once: started, done, started, done, ... each pair for the same tick.
    assert [x["event"] for x in started[::2]] == ["tick started"] * len(started[::2])
    assert [x["event"] for x in started[1::2]] == ["tick done"] * len(started[1::2])
    assert all(a["at"] == b["at"] for a, b in zip(started[::2], started[1::2], strict=False))
    done = [x for x in started if x["event"] == "tick done"]
    assert {x["lateness_s"] for x in done} == {0.0}
    assert len(done) == len(booked)

    # SIGHUP: strategy applied from then on, the other change named as needing a restart.
    [reloaded] = [x for x in lines if x["event"] == "settings reloaded"]
    assert reloaded["applied"] == ["strategy.name"]
    [restart] = [x for x in lines if x["event"] == "settings changed that need a restart"]
    assert restart["keys"] == ["market.max_quote_age_s"]
    after = lines[lines.index(reloaded) :]
    assert {x["strategy"] for x in after if x["event"] == "decision"} == {"simple"}
    assert {x["strategy"] for x in lines[: lines.index(reloaded)] if x["event"] == "decision"} == {
        "maxdiff"
    }

    # Stopped cleanly: the running tick finished, the ledger was checkpointed and closed.
    events = [x["event"] for x in lines]
    assert events[-2:] == ["ledger flushed", "stopped"]
    stopping = [x for x in lines if x["event"] == "stopping"]
    assert stopping[0]["signal"] == "SIGTERM"
    wal = ledger.with_name(ledger.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    state = asyncio.run(ledger_state(ledger))
    assert state.last_tick == booked[-1]
    assert datetime.fromisoformat(done[-1]["at"]) == booked[-1]

    # systemd heard READY with a status, the watchdog every 0.2 s, and STOPPING.
    ready = [n for n in notes if n.startswith("READY=1")]
    assert len(ready) == 1
    assert "STATUS=ready: 1 symbols 1h" in ready[0]
    assert notes.count("WATCHDOG=1") >= 5
    assert any(n.startswith("STOPPING=1") for n in notes)
    assert notes.index(ready[0]) < next(i for i, n in enumerate(notes) if n.startswith("STOPPING"))


@pytest.mark.parametrize("stance", ["keep", "cancel"])
def test_open_orders_are_kept_or_cancelled_on_a_clean_stop(cli, tmp_path, stance):
    data = recording(tmp_path, CONTEXT + 60)
    env = daemon_env(tmp_path, TRADER_BROKER__ON_SHUTDOWN=stance)
    result = cli.run("run", "--replay", str(data), "--max-ticks", "30", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(x) for x in result.stderr.splitlines()]
    [serving] = [x for x in lines if x["event"] == "serving metrics"]
    assert serving["port"] > 0  # metrics.port = 0: any free port, stated in the log
    state = asyncio.run(ledger_state(tmp_path / "ledger.sqlite3"))
    if stance == "keep":
        assert state.open_orders  # maxdiff rests orders every tick
        assert any(x["event"] == "open orders kept" for x in lines)
    else:
        assert state.open_orders == []
        [cancelled] = [x for x in lines if x["event"] == "open orders cancelled"]
        assert cancelled["count"] > 0
    assert [x["event"] for x in lines][-1] == "stopped"


def test_offline_it_keeps_running_and_says_plainly_the_exchange_is_unreachable(cli, tmp_path):
    env = clean_env(
        TRADER_LEDGER__PATH=str(tmp_path / "ledger.sqlite3"),
        TRADER_METRICS__PORT="0",
        TRADER_FORECAST__MODEL="baseline",
        TRADER_EXCHANGE__API_BASE_URL=NOWHERE,
        TRADER_EXCHANGE__RETRY_ATTEMPTS="1",
        TRADER_SCHEDULE__QUOTE_POLL_INTERVAL_S="0.5",
    )
    with running(cli.start("run", env=env)) as daemon:
        port = metrics_port(daemon)
        unreachable = daemon.wait_for("exchange unreachable: trading waits for it; retrying")
        assert unreachable["exchange"] == "ccxt:binance"
        ready = daemon.wait_for("ready")
        assert ready["ready_to_trade"] is False
        assert any(r.startswith("exchange: ccxt:binance unreachable") for r in ready["not_ready"])
        status, body = http_get(f"http://127.0.0.1:{port}/readyz")
        assert status == 503
        checks = json.loads(body)["checks"]
        assert checks["exchange"]["ok"] is False
        assert "unreachable" in checks["exchange"]["detail"]
        assert checks["model"]["ok"] is True
        assert http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        assert metric(port, "trader_exchange_reachable") == 0
        assert metric(port, "trader_ready") == 0
        ages = [v for (n, _), v in scrape(port).items() if n == "trader_quote_age_seconds"]
        assert ages
        assert all(math.isnan(age) for age in ages)  # no quote yet: no age, not a fresh 0
        wait_until(
            lambda: (
                sum(v for (n, _), v in scrape(port).items() if n == "trader_exchange_errors_total")
                >= 2
            ),
            "the quote poll retrying",
        )
        assert daemon.process.poll() is None
        assert stop(daemon) == 0


def test_a_stop_while_the_exchange_is_away_is_clean(cli, tmp_path):
    env = clean_env(
        TRADER_LEDGER__PATH=str(tmp_path / "ledger.sqlite3"),
        TRADER_METRICS__PORT="0",
        TRADER_FORECAST__MODEL="baseline",
        TRADER_EXCHANGE__API_BASE_URL=NOWHERE,
        # The default retries, and a quote poll due every half second: exchange calls are
        # under way (the poll's, the market data's reconnection) when the stop comes.
        TRADER_SCHEDULE__QUOTE_POLL_INTERVAL_S="0.5",
    )
    with running(cli.start("run", env=env)) as daemon:
        daemon.wait_for("ready", timeout=60)
        daemon.wait_for("job skipped: its last run is still going", timeout=60)
        assert stop(daemon) == 0
    events = [x["event"] for x in daemon.lines]
    after = daemon.lines[events.index("stopping") + 1 :]
    loud = [x for x in after if x["level"] not in {"debug", "info", "warning"}]
    assert loud == []
    assert not [x for x in after if "exception" in x or "traceback" in x]
    assert [x["event"] for x in after][-1] == "stopped"


def test_without_the_models_weights_start_up_fails_saying_what_where_and_how(cli, tmp_path):
    env = clean_env(
        TRADER_LEDGER__PATH=str(tmp_path / "ledger.sqlite3"),
        TRADER_METRICS__PORT="0",
        TRADER_EXCHANGE__API_BASE_URL=NOWHERE,
        TRADER_EXCHANGE__RETRY_ATTEMPTS="1",
        HF_HUB_CACHE=str(tmp_path / "hub"),
        HF_HUB_OFFLINE="1",
    )
    result = cli.run("run", env=env)  # the defaults: Toto
    assert result.returncode == 69
    lines = [json.loads(x) for x in result.stderr.splitlines()]
    events = [x["event"] for x in lines]
    # The order: the exchange is tried (and said to be unreachable) before the model.
    assert events.index("exchange unreachable: trading waits for it; retrying") < events.index(
        "cannot start"
    )
    [failure] = [x for x in lines if x["event"] == "cannot start"]
    assert failure["step"] == "model load"
    reason = failure["reason"]
    assert "Datadog/Toto-Open-Base-1.0" in reason
    assert "the Hugging Face cache" in reason
    assert "huggingface-cli download" in reason
    assert "forecast.weights_dir" in reason
    assert "Traceback" not in result.stderr


def test_a_metrics_port_in_use_is_a_clear_error(cli, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data = recording(tmp_path, CONTEXT + 10)
        env = daemon_env(tmp_path, TRADER_METRICS__PORT=str(port))
        result = cli.run("run", "--replay", str(data), env=env)
    assert result.returncode == 69
    [line] = [json.loads(x) for x in result.stderr.splitlines() if "cannot start" in x]
    assert line["step"] == "metrics endpoint"
    assert f"127.0.0.1:{port}" in line["reason"]
    assert "metrics.port" in line["reason"]
