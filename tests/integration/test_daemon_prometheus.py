"""A real Prometheus scrapes the daemon (a replay of recorded bars) and its HTTP API answers
for every metric the daemon promises, with the labels it promises."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest
import torch

from tests.conftest import missing_binary
from tests.integration.daemon import (
    daemon_env,
    metrics_port,
    recording,
    running,
    stop,
    wait_until,
)
from tests.integration.loopback import free_port, http_get
from tests.unit.telemetry.test_metrics_events import REQUIRED

pytestmark = pytest.mark.integration

NON_EMPTY = {"trader_device_info": {"device", "precision", "reason", "torch"}}
HISTOGRAMS = {
    "trader_tick_duration_seconds",
    "trader_inference_latency_seconds",
    "trader_tick_lateness_seconds",
}


def start_prometheus(tmp: Path, target_port: int) -> tuple[subprocess.Popen[bytes], str]:
    if shutil.which("prometheus") is None:
        missing_binary("prometheus")
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: trader\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target_port}']\n"
    )
    port = free_port()
    log = (tmp / "prometheus.log").open("wb")
    process = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: http_get(f"{url}/-/ready")[0] == 200, "prometheus to be ready")
    return process, url


def query(url: str, expr: str) -> list[dict]:
    status, body = http_get(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    assert status == 200, body
    return json.loads(body)["data"]["result"]


def test_prometheus_scrapes_every_promised_metric_from_a_replay(cli, tmp_path):
    data = recording(tmp_path, 48 + 2000)
    daemon = cli.start("run", "--replay", str(data), "--speed", "36000", env=daemon_env(tmp_path))
    with running(daemon):
        port = metrics_port(daemon)
        prometheus, url = start_prometheus(tmp_path, port)
        try:
            assert wait_until(lambda: query(url, 'up{job="trader"} == 1'), "the target up")
            # A few ticks in, so the histograms and counters have moved.
            wait_until(lambda: query(url, "trader_fills_total > 0"), "fills in Prometheus")
            missing = []
            for name, promised in REQUIRED.items():
                # Prometheus keeps no empty label: a CPU has no compute capability, the
                # baseline no fallback. /metrics has them all (tests/unit/telemetry).
                labels = promised & NON_EMPTY.get(name, promised)
                expr = f"{name}_count" if name in HISTOGRAMS else name
                series = query(url, expr)
                present = {k for s in series for k in s["metric"]}
                if not series or not labels <= present:
                    missing.append((name, sorted(present)))
            assert not missing, missing
            assert query(url, 'trader_ticks_total{outcome="ok"} > 0')
            assert query(url, 'trader_trading_state{state="active"} == 1')
            assert query(url, 'trader_quote_source{symbol="SOL/USDT",source="modelled"} == 1')
            assert query(url, 'trader_build_info{broker_mode="paper"} == 1')
            assert query(url, 'trader_device_info{device="cpu"} == 1')
            # The baseline's daemon never loads torch (some two seconds of every start), and
            # still says which torch is installed, as torch itself says it.
            maps = Path(f"/proc/{daemon.process.pid}/maps").read_text()
            assert "libtorch" not in maps
            build = f'torch="{torch.__version__}", cuda="{torch.version.cuda or ""}"'
            assert query(url, f"trader_build_info{{{build}}} == 1")
            assert query(url, f'trader_device_info{{torch="{torch.__version__}"}} == 1')
            assert query(url, 'trader_inference_latency_seconds_count{model="baseline"} > 0')
            assert query(url, "trader_last_tick_timestamp_seconds > 1.5e9")  # recorded: 2020
            # Issue 41's signals: judged on the replay's own clock, in its own timeframe.
            assert query(url, "trader_timeframe_seconds == 3600")
            assert query(url, "trader_clock_speed == 36000")
            assert query(url, "trader_clock_timestamp_seconds > 1.5e9 < 1.7e9")  # 2020, not now
            assert query(url, "trader_next_tick_due_timestamp_seconds > 1.5e9")
            due = "trader_next_tick_due_timestamp_seconds - trader_clock_timestamp_seconds"
            assert query(url, f"{due} >= 0")  # the tick awaited, or the one running now
            assert query(url, 'trader_market_in_session{symbol="SOL/USDT"} == 1')  # 24/7
            assert query(url, "trader_replay_finished == 0")  # still running
            assert query(url, "trader_quote_max_age_seconds == 30")
            assert query(url, 'trader_exchange_info{venue="ccxt",exchange="binance"} == 1')
            assert query(url, 'trader_symbol_skips_in_a_row{symbol="SOL/USDT"} >= 0')
        finally:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        assert stop(daemon) == 0
