"""The compose stack and the image agree with each other and with the daemon's settings: the
GPU is reserved for the daemon, Prometheus scrapes the port it listens on and sends its alerts
to the stack's Alertmanager, Grafana is wired to Prometheus, every mounted file exists, ports
stay on loopback, images are pinned, the live symbol locks are shared, the image runs the Python
and torch the tests run, and every setting they pass is one the daemon accepts. (The compose
specification itself and amtool: tests/integration/test_deploy_tools.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.deploy_queries import DEPLOY, ROOT
from trader.config import load_settings

COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
LOCKS = "/run/trader/locks"


def mounts(service: str) -> dict[str, str]:
    return dict(volume.split(":")[:2] for volume in SERVICES[service].get("volumes", []))


def ignore_patterns(path: Path) -> list[str]:
    text = path.read_text()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def dockerfile_env() -> dict[str, str]:
    return dict(re.findall(r"\b(TRADER_\w+)=(\S+)", DOCKERFILE))


def test_the_stack_has_its_five_services():
    assert set(SERVICES) == {"trader", "mosquitto", "prometheus", "alertmanager", "grafana"}


def test_every_image_is_pinned_to_a_version():
    for name, service in SERVICES.items():
        if "build" in service:
            continue  # built from this repository
        image, _, tag = service["image"].rpartition(":")
        assert image, (name, service["image"])
        assert re.fullmatch(r"v?\d+\.\d+\.\d+", tag), (name, service["image"])


def test_only_the_daemon_reserves_the_gpu():
    [device] = SERVICES["trader"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia"
    assert "gpu" in device["capabilities"]
    assert device.get("count", 0) >= 1 or device.get("device_ids")
    for name in ("mosquitto", "prometheus", "alertmanager", "grafana"):
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
    assert loaded.settings.broker.lock_dir.as_posix() == LOCKS


def test_live_symbol_locks_are_on_a_volume_every_trader_container_can_share():
    # Not the container's own /tmp: a second daemon in another container must see the locks.
    assert SERVICES["trader"]["environment"]["TRADER_BROKER__LOCK_DIR"] == LOCKS
    assert dockerfile_env()["TRADER_BROKER__LOCK_DIR"] == LOCKS
    [(volume, target)] = [(v, t) for v, t in mounts("trader").items() if LOCKS.startswith(t)]
    assert not volume.startswith((".", "/"))  # a named volume
    # A fixed name, not prefixed with the compose project's: other projects can mount it.
    assert COMPOSE["volumes"][volume]["name"] == volume
    # The image makes the mount point, so a new volume starts owned by the daemon's user.
    assert f"-o trader -g trader -m 0700 {target}" in DOCKERFILE


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


def test_prometheus_sends_its_alerts_to_the_stacks_alertmanager():
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    [alertmanagers] = config["alerting"]["alertmanagers"]
    [targets] = [c["targets"] for c in alertmanagers["static_configs"]]
    assert targets == ["alertmanager:9093"]
    alertmanager = SERVICES["alertmanager"]
    assert "127.0.0.1:9093:9093" in alertmanager["ports"]
    assert mounts("alertmanager")["./alertmanager"] == "/etc/alertmanager"
    assert "--config.file=/etc/alertmanager/alertmanager.yml" in alertmanager["command"]
    assert (DEPLOY / "alertmanager" / "alertmanager.yml").is_file()
    assert "alertmanager" in SERVICES["prometheus"]["depends_on"]


def test_alertmanager_routes_by_severity_and_repeats_critical_sooner():
    config = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text())
    route = config["route"]
    receivers = {receiver["name"] for receiver in config["receivers"]}
    assert route["receiver"] in receivers
    by_severity = {tuple(r["matchers"]): r for r in route["routes"]}
    critical = by_severity[('severity="critical"',)]
    warning = by_severity[('severity="warning"',)]
    assert {critical["receiver"], warning["receiver"]} <= receivers
    hours = {"h": 1.0, "m": 1 / 60}
    repeat = {
        name: float(r["repeat_interval"][:-1]) * hours[r["repeat_interval"][-1]]
        for name, r in (("critical", critical), ("warning", warning))
    }
    assert repeat["critical"] < repeat["warning"]
    # The severities the rules use are the ones routed.
    rules = yaml.safe_load((DEPLOY / "prometheus" / "rules" / "trader.rules.yml").read_text())
    severities = {r["labels"]["severity"] for g in rules["groups"] for r in g["rules"]}
    assert severities == {"critical", "warning"}


def test_the_daemon_reaches_mosquitto_on_its_listener():
    environment = SERVICES["trader"]["environment"]
    assert environment["TRADER_MQTT__HOST"] in SERVICES
    conf = (DEPLOY / "mosquitto" / "mosquitto.conf").read_text()
    [port] = re.findall(r"^listener (\d+)$", conf, flags=re.MULTILINE)
    assert int(port) == int(environment.get("TRADER_MQTT__PORT", 1883))
    assert mounts("mosquitto")["./mosquitto/mosquitto.conf"] == "/mosquitto/config/mosquitto.conf"


def copied_sources() -> list[str]:
    """Every source of every COPY from the build context (all but a COPY's last word)."""
    lines = re.findall(r"^COPY (?!--from)(.+)$", DOCKERFILE, re.M)
    return [source for line in lines for source in line.split()[:-1]]


@pytest.mark.parametrize("source", copied_sources())
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
    assert "NVIDIA_VISIBLE_DEVICES=all" in app_stage


def test_the_image_runs_the_python_and_torch_the_tests_run():
    # The tests run on the oldest Python the package supports and on the torch the Makefile
    # pins for machines without a GPU; the image must not drift to others.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [oldest] = re.findall(r">=(\d+\.\d+)", project["requires-python"])
    [python] = re.findall(r"^ARG PYTHON_IMAGE=python:(\d+\.\d+)-slim-(\w+)$", DOCKERFILE, re.M)
    assert python == (oldest, "bookworm")
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^TORCH_SPEC \?=.*\btorch==\$\(TORCH_VERSION\)\)$", makefile, re.M)
    [tested] = re.findall(r"^TORCH_VERSION := ([\d.]+)$", makefile, re.M)
    [built] = re.findall(r"^ARG TORCH_VERSION=(\S+)$", DOCKERFILE, re.M)
    assert built == tested
    # The GPU build must carry Blackwell kernels (the build checks), unless asked for none.
    assert re.search(r"^ARG TORCH_REQUIRE_ARCH=sm_120$", DOCKERFILE, re.M)
    # Every FROM is one of the stages or that Python image.
    for source in re.findall(r"^FROM (\S+)", DOCKERFILE, re.M):
        assert source in {"${PYTHON_IMAGE}", "app"}, source


# --- healthy and closed ----------------------------------------------------------------------

# What each pinned image can run its healthcheck with: prom/* are busybox images and Grafana's
# is Alpine (busybox wget, no curl); the Mosquitto image ships its own clients.
HEALTH_URLS = {
    "prometheus": ("wget", "http://127.0.0.1:9090/-/healthy"),
    "alertmanager": ("wget", "http://127.0.0.1:9093/-/healthy"),
    "grafana": ("wget", "http://127.0.0.1:3000/api/health"),
}


def secret_paths(service: str) -> set[str]:
    """Where the compose secrets a service lists appear inside its container."""
    return {f"/run/secrets/{name}" for name in SERVICES[service].get("secrets", [])}


def acl_blocks() -> dict[str, list[tuple[str, str]]]:
    """The ACL file's (access, topic) lines by user."""
    blocks: dict[str, list[tuple[str, str]]] = {}
    user = None
    for line in (DEPLOY / "mosquitto" / "acl").read_text().splitlines():
        words = line.split()
        if words[:1] == ["user"]:
            user = words[1]
            blocks[user] = []
        elif words[:1] == ["topic"]:
            assert user is not None, line  # a line before any user would apply to anonymous
            blocks[user].append((words[1], words[2]))
    return blocks


def mosquitto_conf() -> dict[str, str]:
    lines = (DEPLOY / "mosquitto" / "mosquitto.conf").read_text().splitlines()
    return dict(line.split(" ", 1) for line in lines if line and not line.startswith("#"))


def test_every_service_has_a_healthcheck_its_image_can_run():
    for name, service in SERVICES.items():
        check = service.get("healthcheck", {})
        assert not check.get("disable"), name
        if "build" in service:
            # The image's own HEALTHCHECK (test_the_image_runs_as_a_non_root_user_...).
            assert "test" not in check, name
            continue
        assert check["test"][0] in {"CMD", "CMD-SHELL"}, name
        assert {"interval", "timeout", "retries", "start_period"} <= set(check), name
        if name in HEALTH_URLS:
            tool, url = HEALTH_URLS[name]
            assert check["test"][:2] == ["CMD", tool], name
            assert url in check["test"], name
            port = url.split(":")[2].split("/")[0]
            assert f"127.0.0.1:{port}:{port}" in service["ports"], name
    command = SERVICES["mosquitto"]["healthcheck"]["test"][1]
    assert command.startswith("mosquitto_sub ")
    assert "-u healthcheck" in command
    assert "$$SYS/" in command  # a literal $ for the shell, not a compose variable


def test_every_dependency_waits_for_a_healthy_service():
    for name, service in SERVICES.items():
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), (name, depends)  # the short list form has no condition
        for needed, how in depends.items():
            assert how["condition"] == "service_healthy", (name, needed)
            assert "healthcheck" in SERVICES[needed] or "build" in SERVICES[needed], needed
    assert set(SERVICES["trader"]["depends_on"]) == {"mosquitto"}
    # Prometheus comes up without the daemon: it is what pages when the daemon does not.
    assert set(SERVICES["prometheus"]["depends_on"]) == {"alertmanager"}
    assert set(SERVICES["grafana"]["depends_on"]) == {"prometheus"}


def test_secrets_are_files_in_the_git_ignored_secrets_folder():
    for name, secret in COMPOSE["secrets"].items():
        assert Path(secret["file"]).parent == Path("./secrets"), name
    for service in SERVICES.values():
        assert set(service.get("secrets", [])) <= set(COMPOSE["secrets"])


def test_grafana_takes_its_admin_password_from_a_secret_and_admin_admin_is_gone():
    environment = SERVICES["grafana"]["environment"]
    assert environment["GF_SECURITY_ADMIN_PASSWORD__FILE"] in secret_paths("grafana")
    assert "GF_SECURITY_ADMIN_PASSWORD" not in environment
    assert environment["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    for path in [ROOT / "README.md", *DEPLOY.rglob("*")]:
        if path.is_file() and path.suffix in {".md", ".yaml", ".yml", ".conf", ".ini", ""}:
            assert "admin/admin" not in path.read_text(errors="replace"), path


def test_mosquitto_refuses_anonymous_clients_and_reads_its_users_and_acl():
    conf = mosquitto_conf()
    assert conf["allow_anonymous"] == "false"
    assert conf["password_file"] in secret_paths("mosquitto")
    assert mounts("mosquitto")["./mosquitto/acl"] == conf["acl_file"]
    command = SERVICES["mosquitto"]["healthcheck"]["test"][1]
    [password_file] = re.findall(r"\$\$\(cat (\S+)\)", command)
    assert password_file in secret_paths("mosquitto")
    assert set(acl_blocks()) == {"trader", "operator", "healthcheck"}


def event_topics() -> set[str]:
    """The topics the daemon publishes (relative to <prefix>/<instance>/), from the events it
    builds; a symbol level is the single-level wildcard."""
    source = (ROOT / "trader" / "telemetry" / "events.py").read_text()
    topics = re.findall(r'\bEvent\(\s*f?"([^"]+)"', source)
    return {re.sub(r"\{[^}]*\}", "+", topic) for topic in topics}


def test_the_daemons_acl_is_its_events_out_and_its_command_topic_in():
    environment = SERVICES["trader"]["environment"]
    settings = load_settings(
        None, environ=dockerfile_env() | environment, dotenv_file=None, secrets_dir=None
    ).settings
    base = f"{settings.mqtt.topic_prefix}/{settings.instance}"
    assert event_topics() >= {"status", "fill", "cmd/result", "forecast/+"}  # the regex works
    lines = acl_blocks()[settings.mqtt.username or ""]
    writes = {topic for access, topic in lines if access == "write"}
    assert writes == {f"{base}/{topic}" for topic in event_topics()}
    assert {(access, topic) for access, topic in lines if access != "write"} == {
        ("read", f"{base}/cmd")
    }
    operator = set(acl_blocks()["operator"])
    assert operator == {("read", f"{settings.mqtt.topic_prefix}/#"),
                        ("write", f"{settings.mqtt.topic_prefix}/+/cmd")}  # fmt: skip
