"""compose.yaml's trader service as `run` arguments, so that the smoke test starts the image as
the stack would: the same settings, init, read-only root, tmpfs, capabilities, security options,
volume targets, published port address and stop grace period, read from the file itself.

Left out, for a machine without them: the GPU reservation, the MQTT broker (MQTT is switched
off), the secrets folder (paper trading reads none), `restart:` (a restarted daemon would hide
the exit code under test) and `logging:`. Named volumes get names of the test's own, the port an
ephemeral host port on the same address."""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from tests.deploy_queries import DEPLOY

SERVICE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["trader"]
NO_BROKER = {"TRADER_MQTT__ENABLED": "false"}


@dataclass(frozen=True)
class ComposeRun:
    args: list[str]  # the options of `run`, before the image
    volumes: list[str]  # the named volumes they mount (the caller removes them)
    port: str  # the container's port, as `port` takes it: "9108/tcp"
    stop_timeout_s: int  # stop_grace_period


def seconds(duration: str) -> int:
    """A compose duration of whole seconds or minutes ("60s", "2m")."""
    match = re.fullmatch(r"(\d+)([sm])", duration)
    assert match, f"stop_grace_period {duration!r}: only whole s or m are read here"
    return int(match[1]) * (60 if match[2] == "m" else 1)


def compose_run(prefix: str, settings: dict[str, str]) -> ComposeRun:
    """`settings`: TRADER_* variables added to (or replacing) compose's environment."""
    args: list[str] = []
    if SERVICE.get("init"):
        args.append("--init")
    if SERVICE.get("read_only"):
        args.append("--read-only")
    args += [f"--tmpfs={path}" for path in SERVICE.get("tmpfs", [])]
    args += [f"--security-opt={option}" for option in SERVICE.get("security_opt", [])]
    args += [f"--cap-drop={cap}" for cap in SERVICE.get("cap_drop", [])]
    args += [f"--cap-add={cap}" for cap in SERVICE.get("cap_add", [])]
    environment = {**SERVICE.get("environment", {}), **NO_BROKER, **settings}
    args += [f"--env={name}={value}" for name, value in environment.items()]
    volumes = []
    for mount in SERVICE.get("volumes", []):
        source, target, *_ = mount.split(":")
        if source.startswith("."):
            continue  # a host folder: the secrets
        volumes.append(f"{prefix}-{source}")
        args.append(f"--volume={volumes[-1]}:{target}")
    [published] = SERVICE["ports"]
    address, _, container_port = published.split(":")
    args.append(f"--publish={address}::{container_port}")
    stop_timeout_s = seconds(SERVICE["stop_grace_period"])
    args.append(f"--stop-timeout={stop_timeout_s}")
    return ComposeRun(args, volumes, f"{container_port}/tcp", stop_timeout_s)
