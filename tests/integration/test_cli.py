"""The `trader` command end to end: settings, secrets, errors and the daemon's lifecycle."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest
import torch

from tests.integration.conftest import TRADER, clean_env
from tests.recorded import SOLUSDT_1H, lines
from tests.unit.forecast.toto.builders import write_checkpoint
from trader.forecast.random_weights import write_random_toto2

pytestmark = pytest.mark.integration

SECRET = "sk-test-9f8e7d6c5b4a"
# The daemon without weights or network: the baseline model, an exchange address where nothing
# listens (it keeps running and says the exchange is unreachable), any free metrics port.
DAEMON = {
    "TRADER_FORECAST__MODEL": "baseline",
    "TRADER_METRICS__PORT": "0",
    "TRADER_EXCHANGE__API_BASE_URL": "http://127.0.0.1:9",
    "TRADER_EXCHANGE__RETRY_ATTEMPTS": "1",
}


def test_add_latest_0_shows_false_and_its_source_the_environment(cli):
    result = cli.run("config", "show", env=clean_env(ADD_LATEST="0"))
    assert result.returncode == 0, result.stderr
    [row] = [line for line in result.stdout.splitlines() if line.startswith("market.add_latest ")]
    assert row.split() == ["market.add_latest", "false", "environment", "(ADD_LATEST)"]
    shown = json.loads(cli.run("config", "show", "--json", env=clean_env(ADD_LATEST="0")).stdout)
    assert shown["settings"]["market.add_latest"] == {
        "value": False,
        "source": "environment (ADD_LATEST)",
    }


def test_a_secret_from_the_environment_or_secrets_directory_is_masked_everywhere(cli, tmp_path):
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "TRADER_MQTT__PASSWORD").write_text(SECRET + "-mqtt\n")
    env = clean_env(TRADER_EXCHANGE__API_KEY=SECRET, CREDENTIALS_DIRECTORY=str(credentials))
    shown = cli.run("config", "show", env=env)
    shown_json = cli.run("config", "show", "--json", env=env)
    checked = cli.run("config", "check", env=env)
    bad = cli.run("config", "check", env=env | {"TRADER_MQTT__PORT": SECRET})
    daemon = cli.start("run", "--log-level", "DEBUG", env=env | DAEMON)
    daemon.wait_for("ready")
    daemon.process.send_signal(signal.SIGTERM)
    assert daemon.finish() == 0
    settings = json.loads(shown_json.stdout)["settings"]
    assert settings["exchange.api_key"]["value"] == "**********"
    assert settings["mqtt.password"] == {
        "value": "**********",
        "source": f"secrets directory {credentials / 'TRADER_MQTT__PASSWORD'}",
    }
    assert bad.returncode == 78
    assert "mqtt.port" in bad.stderr
    daemon_output = json.dumps(daemon.lines)
    for output in (shown.stdout, shown.stderr, shown_json.stdout, checked.stdout, bad.stderr):
        assert SECRET not in output
    assert SECRET not in daemon_output


def test_a_misspelt_key_fails_config_check_naming_key_and_file(cli, tmp_path):
    config = tmp_path / "mine.toml"
    config.write_text('[market]\nsymbols = ["SOL/USDT"]\nadd_lates = false\n')
    result = cli.run("config", "check", str(config))
    assert result.returncode == 78
    assert f"{config}: unknown key 'market.add_lates'" in result.stderr
    assert "did you mean market.add_latest?" in result.stderr
    assert result.stdout == ""
    config.write_text('[market]\nsymbols = ["SOL/USDT"]\nadd_latest = false\n')
    result = cli.run("config", "check", str(config))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"ok: {config}")
    via_env = cli.run("config", "show", env=clean_env(TRADER_CONFIG=str(config)))
    assert f"file {config}" in via_env.stdout


def test_a_missing_config_file_is_an_error(cli):
    result = cli.run("run", "--config", "nope.toml")
    assert result.returncode == 78
    assert "config file nope.toml does not exist" in result.stderr


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_the_daemon_comes_up_and_stops_cleanly_on_a_signal(cli, stop):
    daemon = cli.start("run", env=clean_env(**DAEMON))
    started = daemon.wait_for("starting")
    assert started["broker_mode"] == "paper"
    assert started["quote_source"] == "real"
    daemon.wait_for("ready")
    # SIGHUP must not kill it (its default action would): it reloads the settings.
    daemon.process.send_signal(signal.SIGHUP)
    assert daemon.wait_for("settings reloaded")["applied"] == []
    daemon.process.send_signal(stop)
    assert daemon.finish() == 0
    [stopping] = [line for line in daemon.lines if line["event"] == "stopping"]
    assert stopping["signal"] == stop.name
    assert [line["event"] for line in daemon.lines][-2:] == ["ledger flushed", "stopped"]


def test_the_daemon_states_a_synthetic_quote_source_at_start(cli):
    daemon = cli.start("run", env=clean_env(ADD_LATEST="0", **DAEMON))
    assert daemon.wait_for("starting")["quote_source"] == "synthetic"
    daemon.process.send_signal(signal.SIGTERM)
    assert daemon.finish() == 0


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"TRADER_BROKER__MODE": "live"}, "needs broker.live_confirmation = true"),
        (
            {"TRADER_BROKER__MODE": "live", "TRADER_BROKER__LIVE_CONFIRMATION": "1"},
            "needs exchange.api_key and exchange.api_secret",
        ),
    ],
)
def test_live_mode_without_every_opt_in_refuses_to_start(cli, env, reason):
    result = cli.run("run", env=clean_env(**env))
    assert result.returncode == 78
    [line] = [json.loads(x) for x in result.stderr.splitlines()]
    assert line["event"] == "refusing to start"
    assert reason in line["reason"]


def test_on_a_terminal_the_daemon_logs_readable_colour(tmp_path):
    pid, fd = pty.fork()
    if pid == 0:  # child: stdout and stderr are the terminal
        os.chdir(tmp_path)
        os.execve(TRADER, [TRADER, "run"], clean_env(**DAEMON))
    output = b""
    deadline = time.monotonic() + 30
    while b"ready" not in output and time.monotonic() < deadline:
        if select.select([fd], [], [], 1)[0]:
            output += os.read(fd, 4096)
    os.kill(pid, signal.SIGINT)
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = output.decode()
    assert os.waitstatus_to_exitcode(status) == 0
    assert "\x1b[" in text
    assert "stopped" in text
    assert not text.lstrip().startswith("{")


def test_version_and_module_entry_point(cli):
    assert cli.run("--version").stdout.startswith("trader ")
    result = subprocess.run(
        [os.sys.executable, "-m", "trader", "config", "template"],
        cwd=cli.cwd, env=clean_env(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0
    assert "[market]" in result.stdout


@pytest.fixture(scope="module")
def toto_weights(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("toto"))


def test_forecast_prints_the_quantiles_of_the_last_window_and_its_timings(cli, toto_weights):
    args = ["forecast", "--model", "toto", "--weights", str(toto_weights)]
    args += ["--data", str(SOLUSDT_1H), "--context", "100", "--horizon", "10"]
    result = cli.run(*args, "--samples", "64", "--seed", "7", "--device", "cpu", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["model"], report["symbol"], report["timeframe"]) == ("toto", "SOL/USDT", "1h")
    # The forecast is as of the close of the last recorded (1h) bar.
    last = datetime.fromisoformat(lines(SOLUSDT_1H)[-1].split(",")[0]).replace(tzinfo=UTC)
    assert report["as_of"] == (last + timedelta(hours=1)).isoformat()
    assert (report["context_bars"], report["horizon"], report["samples"]) == (100, 10, 64)
    assert (report["device"], report["precision"], report["seed"]) == ("cpu", "float32", 7)
    assert report["load_seconds"] > 0
    assert report["forecast_seconds"] > 0
    close = report["fields"]["close"]
    assert {"0.1", "0.4", "0.5", "0.6", "0.9"} <= set(close["quantiles"])
    assert len(close["mean"]) == 10
    assert set(report["fields"]) == {"close", "high", "low"}
    again = cli.run(*args, "--samples", "64", "--seed", "7", "--device", "cpu", "--json")
    assert json.loads(again.stdout)["fields"] == report["fields"]
    text = cli.run(*args, "--samples", "16")
    assert text.returncode == 0, text.stderr
    assert "toto forecast for SOL/USDT 1h" in text.stdout
    assert "loaded in" in text.stdout
    assert "q0.9" in text.stdout


def test_forecast_without_weights_says_where_it_looked_and_how_to_get_them(cli, tmp_path):
    env = clean_env(HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    result = cli.run("forecast", "--model", "toto", "--data", str(SOLUSDT_1H), env=env)
    assert result.returncode == 69
    assert "no weights for Datadog/Toto-Open-Base-1.0" in result.stderr
    assert "huggingface-cli download" in result.stderr
    assert "Traceback" not in result.stderr


def test_forecast_refuses_cuda_on_a_machine_without_it_and_bad_data(cli, tmp_path):
    data = str(SOLUSDT_1H)
    if not torch.cuda.is_available():
        cuda = cli.run("forecast", "--model", "baseline", "--data", data, "--device", "cuda")
        assert cuda.returncode == 69
        # The reason (a CPU-only build, or no device) and the fix, never a CPU run.
        assert "forecast.device = cuda, but torch" in cuda.stderr
        assert "Fix: " in cuda.stderr
    (tmp_path / "ABCUSDT_1h.csv").write_text("timestamps,open,high,low,close,volume\n")
    empty = cli.run("forecast", "--model", "baseline", "--data", str(tmp_path / "ABCUSDT_1h.csv"))
    assert empty.returncode == 65
    assert "ABCUSDT_1h.csv" in empty.stderr


def test_forecast_with_toto2_on_random_weights_says_they_are_random(cli, tmp_path):
    weights = write_random_toto2(tmp_path / "toto2", "small").directory
    args = ["forecast", "--model", "toto2", "--weights", str(weights), "--data", str(SOLUSDT_1H)]
    result = cli.run(*args, "--context", "100", "--horizon", "24", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()[:2]
    assert first.startswith("warning: RANDOM weights in a small toto2 architecture")
    assert second.startswith("toto2 forecast for SOL/USDT 1h after")
    assert "100 bars of context, no samples" in second
    report = json.loads(cli.run(*args, "--context", "100", "--horizon", "24", "--json").stdout)
    assert report["random_weights"].startswith("RANDOM weights")
    close = report["fields"]["close"]
    assert len(close["mean"]) == 24
    assert (
        close["quantiles"]["0.1"][0] <= close["quantiles"]["0.5"][0] <= close["quantiles"]["0.9"][0]
    )
