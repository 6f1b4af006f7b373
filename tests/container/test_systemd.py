"""deploy/systemd/trader.service under a real systemd: PID 1 of a container made from the
trader image (deploy/systemd/Containerfile), installed as deploy/README.md says (the unit, its
sysusers file, a credential in /etc/credstore/), with a drop-in that starts the daemon on the
recording `trader demo` replays (offline, paper broker, baseline model). `systemctl start`
returns once the daemon says READY=1, it pings the watchdog, the credential reaches its
settings, `systemd-analyze security` rates the running unit as designed, `systemctl stop` ends
it cleanly, and a daemon that stops pinging is killed by the watchdog.

The tests share one container and run in the order of this file."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.container.conftest import BuiltImage
from tests.container.engine import Engine
from tests.deploy_queries import DEPLOY
from tests.integration.daemon import daemon_env, wait_until
from tests.integration.test_deploy_tools import MAX_EXPOSURE

pytestmark = pytest.mark.integration

SYSTEMD = DEPLOY / "systemd"
TAG_PREFIX = "localhost/trader-systemd:"
UNIT = "trader.service"
TRADER = "/opt/trader/venv/bin/trader"  # the unit's own ExecStart, the image's virtualenv
# One hourly bar a second: the replay (1,000 bars) outlasts this module by far, so the daemon
# ends only when the test ends it.
SPEED = 3600
# The unit's 60 s, shortened so that pings and a missed one are seen within seconds; still
# far above the event loop's stalls on a busy machine (it pings at half of it).
WATCHDOG_S = 10
BOOT_S = 120  # for systemd in the container to finish booting
# A secret that paper trading needs none of, so the daemon starts the same with it; `trader
# config show` in ExecStartPre (the unit's own environment, credentials and sandbox) names
# where each setting came from.
CREDENTIAL = "TRADER_MQTT__PASSWORD"
CREDENTIALS_DIR = f"/run/credentials/{UNIT}"
# tests/integration/daemon.py's paper run that trades, but for the ledger's path and the
# metrics port: those stay the unit's and the default.
SETTINGS = {
    name: value
    for name, value in daemon_env(Path("/unused")).items()
    if name.startswith("TRADER_") and name not in {"TRADER_LEDGER__PATH", "TRADER_METRICS__PORT"}
}
RECORDING = (
    "from importlib import resources; print(resources.files('trader.demo') / 'SOLUSDT_1h.csv.gz')"
)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def cannot_boot(why: str) -> None:
    """This test needs a container whose PID 1 is systemd: skipped where the machine cannot
    give one, a failure in CI, which runs where the container tests are known to work."""
    if in_ci():
        pytest.fail(f"systemd does not boot in a container: {why}")
    pytest.skip(f"systemd does not boot in a container here: {why}")


@dataclass(frozen=True)
class Booted:
    engine: Engine
    name: str
    secret: str

    def sh(self, script: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A shell command as root in the container (as an operator on the host)."""
        return self.engine.run(
            ["exec", self.name, "sh", "-c", script], check=False, timeout=timeout
        )

    def ok(self, script: str, timeout: float = 60) -> str:
        result = self.sh(script, timeout)
        assert result.returncode == 0, (
            f"{script}: {result.returncode}\n{result.stdout}{result.stderr}"
        )
        return result.stdout

    def show(self, *properties: str) -> dict[str, str]:
        out = self.ok(f"systemctl show {UNIT} " + " ".join(f"-p {p}" for p in properties))
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal(self) -> str:
        return self.ok(f"journalctl -u {UNIT} --no-pager -o cat")


def boot_state(box: Booted) -> str:
    """`systemctl is-system-running --wait` once systemd answers (it cannot until PID 1 has
    made its socket, a moment after the container starts), or why it did not."""
    deadline = time.monotonic() + BOOT_S
    while True:
        try:
            answer = box.sh("systemctl is-system-running --wait", timeout=BOOT_S)
        except subprocess.TimeoutExpired:
            return f"no answer within {BOOT_S} s"
        if answer.stdout.strip():
            return answer.stdout.strip()
        if time.monotonic() > deadline:
            return answer.stderr.strip()
        time.sleep(0.5)


def drop_in(recording: str) -> str:
    environment = "".join(f"Environment={name}={value}\n" for name, value in SETTINGS.items())
    return (
        "[Service]\n"
        f"ExecStartPre={TRADER} config show\n"
        "ExecStart=\n"
        f"ExecStart={TRADER} run --replay {recording} --symbol SOL/USDT --speed {SPEED}\n"
        f"WatchdogSec={WATCHDOG_S}s\n"
        # A start that hangs fails the test within minutes, not the unit's 20.
        "TimeoutStartSec=150s\n" + environment
    )


@pytest.fixture(scope="module")
def systemd_image(image: BuiltImage) -> str:
    """The trader image with systemd, built once per trader image (its id in the tag)."""
    engine = image.engine
    if engine.name != "podman":
        cannot_boot(f"this test boots systemd with podman's --systemd=always, not {engine.name}")
    image_id = engine.run(["image", "inspect", "--format", "{{.Id}}", image.tag]).stdout
    tag = f"{TAG_PREFIX}{image_id.strip().removeprefix('sha256:')[:12]}"
    if engine.run(["image", "exists", tag], check=False).returncode != 0:
        engine.run(
            ["build", "--format", "docker", "--build-arg", f"IMAGE={image.tag}", "-t", tag,
             "-f", str(SYSTEMD / "Containerfile"), str(SYSTEMD)],
            timeout=600,
        )  # fmt: skip
        # Those made on earlier trader images: their layers are the old image's.
        listed = engine.run(["images", "--format", "{{.Repository}}:{{.Tag}}"]).stdout.split()
        for old in {t for t in listed if t.startswith(TAG_PREFIX)} - {tag}:
            engine.run(["rmi", old], check=False)
    return tag


@pytest.fixture(scope="module")
def booted(
    image: BuiltImage, systemd_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Booted]:
    """systemd booted in a container, the unit installed as deploy/README.md says, not yet
    started."""
    engine = image.engine
    drop_ins = tmp_path_factory.mktemp("systemd") / f"{UNIT}.d"
    drop_ins.mkdir()
    name = f"trader-systemd-{secrets.token_hex(4)}"
    started = engine.run(
        ["run", "-d", "--name", name, "--systemd=always", "--no-healthcheck",
         "-v", f"{SYSTEMD / UNIT}:/etc/systemd/system/{UNIT}:ro",
         "-v", f"{SYSTEMD / 'trader.sysusers'}:/etc/sysusers.d/trader.conf:ro",
         "-v", f"{drop_ins}:/etc/systemd/system/{UNIT}.d:ro",
         systemd_image],
        check=False,
    )  # fmt: skip
    try:
        if started.returncode != 0:
            cannot_boot(
                f"`podman run --systemd=always` exited {started.returncode}: "
                f"{started.stderr.strip()[-1000:]}"
            )
        box = Booted(engine, name, f"test-{secrets.token_hex(8)}")
        state = boot_state(box)
        if state not in {"running", "degraded"}:
            cannot_boot(f"systemctl is-system-running: {state}")
        python = TRADER.removesuffix("trader") + "python"
        recording = box.ok(f'{python} -c "{RECORDING}"').strip()
        (drop_ins / "test.conf").write_text(drop_in(recording))
        # As deploy/README.md installs them: the user, the secret (root-only), the unit enabled
        # (which also keeps its last run's result once it stops: a disabled unit is unloaded).
        box.ok("systemd-sysusers && install -d -m 0700 /etc/credstore && "
               f"printf %s '{box.secret}' | install -m 0400 /dev/stdin /etc/credstore/{CREDENTIAL}"
               f" && systemctl daemon-reload && systemctl enable {UNIT}")  # fmt: skip
        yield box
    finally:
        engine.run(["rm", "-f", "-v", "-t", "5", name], check=False, timeout=120)


def test_start_returns_once_the_daemon_is_ready(booted: Booted) -> None:
    booted.ok(f"systemctl start {UNIT}", timeout=200)
    # Right as `start` returns: the READY=1 datagram carried this status (startup.py's
    # `_ready`); before it, the status names a start-up step.
    state = booted.show("Type", "ActiveState", "SubState", "StatusText")
    assert (state["Type"], state["ActiveState"], state["SubState"]) == (
        "notify", "active", "running",
    ), state  # fmt: skip
    assert state["StatusText"].startswith("ready: 1 symbols 1h, baseline"), state
    assert "paper" in state["StatusText"], state


def last_ping(booted: Booted) -> int:
    return int(booted.show("WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"])


def test_the_daemon_pings_the_watchdog(booted: Booted) -> None:
    state = booted.show("WatchdogUSec", "WatchdogTimestampMonotonic")
    assert state["WatchdogUSec"] == f"{WATCHDOG_S}s", state
    # Set by each WATCHDOG=1 systemd receives from the daemon.
    first = int(state["WatchdogTimestampMonotonic"])
    wait_until(lambda: last_ping(booted) > first, "a watchdog ping", timeout=3 * WATCHDOG_S)


def test_the_credential_reaches_the_settings(booted: Booted) -> None:
    journal = booted.journal()
    origin = f"secrets directory {CREDENTIALS_DIR}/{CREDENTIAL}"
    [line] = [line for line in journal.splitlines() if line.startswith("mqtt.password ")]
    assert line.endswith(origin), line
    assert booted.secret not in journal


def test_security_exposure_of_the_running_unit(booted: Booted) -> None:
    out = booted.ok(f"systemd-analyze security --no-pager {UNIT}")
    [score] = re.findall(rf"Overall exposure level for {re.escape(UNIT)}: ([\d.]+)", out)
    print(f"systemd-analyze security {UNIT} (running): {score}")
    assert float(score) <= MAX_EXPOSURE, out


def test_stop_ends_it_with_exit_0(booted: Booted) -> None:
    assert booted.show("ActiveState")["ActiveState"] == "active"
    booted.ok(f"systemctl stop {UNIT}", timeout=120)
    state = booted.show("ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
    # ExecMainCode 1: CLD_EXITED, the daemon exited by itself rather than by a signal.
    assert state == {
        "ActiveState": "inactive", "Result": "success", "ExecMainCode": "1", "ExecMainStatus": "0",
    }, state  # fmt: skip


def test_a_daemon_that_stops_pinging_is_killed_by_the_watchdog(booted: Booted) -> None:
    booted.ok(f"systemctl start {UNIT}", timeout=200)
    booted.ok(f"kill -STOP $(systemctl show -p MainPID --value {UNIT})")
    # One snapshot: Restart=on-failure starts it again RestartSec= later.
    state = wait_until(
        lambda: watchdog_verdict(booted), "the watchdog's verdict", timeout=6 * WATCHDOG_S
    )
    # Killed with the unit's WatchdogSignal (SIGABRT, systemd's default): CLD_KILLED, signal 6.
    assert (state["ExecMainCode"], state["ExecMainStatus"]) == ("2", "6"), state
    assert f"Watchdog timeout (limit {WATCHDOG_S}s)" in booted.journal()


def watchdog_verdict(booted: Booted) -> dict[str, str] | None:
    """The unit's result and how its main process ended, once the watchdog fired and the
    process is gone (ExecMainCode 0 until then)."""
    state = booted.show("Result", "ExecMainCode", "ExecMainStatus")
    return state if state["Result"] == "watchdog" and state["ExecMainCode"] != "0" else None
