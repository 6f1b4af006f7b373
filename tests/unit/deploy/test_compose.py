"""The compose stack and the image agree with each other and with the daemon's settings: the
GPU is reserved for the daemon, Prometheus scrapes the port it listens on, Grafana is wired to
Prometheus, every mounted file exists, ports stay on loopback, and every setting they pass is
one the daemon accepts. (The compose specification itself: tests/integration/test_deploy_tools.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.deploy_queries import DEPLOY, ROOT
from trader.config import load_settings

COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def mounts(service: str) -> dict[str, str]:
    return dict(volume.split(":")[:2] for volume in SERVICES[service].get("volumes", []))


def ignore_patterns(path: Path) -> list[str]:
    text = path.read_text()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def dockerfile_env() -> dict[str, str]:
    return dict(re.findall(r"\b(TRADER_\w+)=(\S+)", DOCKERFILE))


def test_the_stack_has_its_four_services():
    assert set(SERVICES) == {"trader", "mosquitto", "prometheus", "grafana"}


def test_only_the_daemon_reserves_the_gpu():
    [device] = SERVICES["trader"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia"
    assert "gpu" in device["capabilities"]
    assert device.get("count", 0) >= 1 or device.get("device_ids")
    for name in ("mosquitto", "prometheus", "grafana"):
        assert "deploy" not in SERVICES[name]


def test_published_ports_are_bound_to_loopback():
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)


def test_bind_mounted_files_exist():
    for name in SERVICES:
        for source in mounts(name):
            if source.startswith("."):
                assert (DEPLOY / source).exists(), (name, source)


def test_named_volumes_are_declared_and_cover_the_image_volumes():
    declared = set(COMPOSE["volumes"])
    for name in SERVICES:
        for source in mounts(name):
            if not source.startswith((".", "/")):
                assert source in declared, (name, source)
    [image_volumes] = re.findall(r"^VOLUME (\[.*\])$", DOCKERFILE, flags=re.MULTILINE)
    assert set(yaml.safe_load(image_volumes)) <= set(mounts("trader").values())


def test_settings_passed_to_the_daemon_are_valid():
    environment = dockerfile_env() | SERVICES["trader"]["environment"]
    loaded = load_settings(None, environ=environment, dotenv_file=None, secrets_dir=None)
    assert loaded.settings.metrics.host == "0.0.0.0"  # noqa: S104 - inside the container
    assert loaded.settings.mqtt.enabled
    assert loaded.settings.broker.mode == "paper"  # live trading is never the default
    assert loaded.settings.ledger.path.parent.as_posix() == "/var/lib/trader"


def test_the_secrets_folder_is_mounted_where_the_daemon_looks_and_git_ignores_it():
    assert mounts("trader")["./secrets"] == "/run/secrets"
    rules = ignore_patterns(DEPLOY / "secrets" / ".gitignore")
    assert rules[0] == "*"
    assert all(rule.startswith("!") for rule in rules[1:])


def test_prometheus_scrapes_the_daemon_where_it_listens():
    settings = load_settings(
        None,
        environ=dockerfile_env() | SERVICES["trader"]["environment"],
        dotenv_file=None,
        secrets_dir=None,
    ).settings
    assert mounts("prometheus")["./prometheus"] == "/etc/prometheus"
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "trader"]
    [targets] = [c["targets"] for c in job["static_configs"]]
    assert targets == [f"trader:{settings.metrics.port}"]
    assert (
        f"127.0.0.1:{settings.metrics.port}:{settings.metrics.port}" in SERVICES["trader"]["ports"]
    )
    assert any(rule.startswith("rules/") for rule in config["rule_files"])


def test_the_daemon_reaches_mosquitto_on_its_listener():
    environment = SERVICES["trader"]["environment"]
    assert environment["TRADER_MQTT__HOST"] in SERVICES
    conf = (DEPLOY / "mosquitto" / "mosquitto.conf").read_text()
    [port] = re.findall(r"^listener (\d+)$", conf, flags=re.MULTILINE)
    assert int(port) == int(environment.get("TRADER_MQTT__PORT", 1883))
    assert mounts("mosquitto")["./mosquitto/mosquitto.conf"] == "/mosquitto/config/mosquitto.conf"


@pytest.mark.parametrize("source", re.findall(r"^COPY (?!--from)(\S+) ", DOCKERFILE, re.M))
def test_what_the_dockerfile_copies_is_in_the_build_context(source):
    patterns = ignore_patterns(ROOT / ".dockerignore")
    assert patterns[0] == "*"  # an allow-list: nothing else is sent to the builder
    assert f"!{source.rstrip('/')}" in {p.rstrip("/") for p in patterns}


def test_the_image_runs_as_a_non_root_user_with_a_health_check():
    users = re.findall(r"^USER (\S+)$", DOCKERFILE, flags=re.MULTILINE)
    final_stage = DOCKERFILE.rsplit("\nFROM ", 1)[1]
    assert final_stage.startswith("app AS runtime")
    app_stage = DOCKERFILE.split(" AS app\n", 1)[1].split("\nFROM ", 1)[0]
    assert "USER 10001:10001" in app_stage
    assert users[-1] == "10001:10001"
    assert "HEALTHCHECK" in app_stage
    assert "/opt/trader/healthcheck.py" in app_stage
    [base] = re.findall(r"^ARG CUDA_IMAGE=nvidia/cuda:(\d+)\.(\d+)", DOCKERFILE, re.M)
    assert tuple(map(int, base)) >= (12, 8)  # CUDA 12.8: the first with Blackwell sm_120
