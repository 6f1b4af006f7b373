"""The container engine the tests drive: docker where its daemon answers, else podman with
the runtime settings this host needs (deploy/docker/podman-conf.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = ROOT / "deploy" / "docker"


@dataclass(frozen=True)
class Engine:
    """`name` is "docker" or "podman"; `env` is the environment every call runs with
    (CONTAINERS_CONF for podman where the host needs it)."""

    name: str
    env: dict[str, str] = field(default_factory=dict, repr=False)

    def run(
        self,
        args: list[str],
        *,
        check: bool = True,
        timeout: float = 600,
        input: str | bytes | None = None,
        text: bool = True,
    ) -> subprocess.CompletedProcess:
        """`<engine> *args`, output captured (str, or bytes with text=False); with check, a
        non-zero exit raises AssertionError carrying the command and its output."""
        result = subprocess.run(
            [self.name, *args],
            env=self.env,
            input=input,
            capture_output=True,
            text=text,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{self.name} {' '.join(args)} exited {result.returncode}:\n"
                f"{result.stdout[-4000:]!s}{result.stderr[-4000:]!s}"
            )
        return result


def find_engine() -> Engine | None:
    """docker if its daemon answers, else podman if installed, else None."""
    env = dict(os.environ)
    docker = shutil.which("docker")
    if docker is not None:
        answered = subprocess.run(
            [docker, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        if answered.returncode == 0:
            return Engine("docker", env)
    if shutil.which("podman") is None:
        return None
    conf = subprocess.run(
        [str(DOCKER_DIR / "podman-conf.sh")], capture_output=True, text=True, check=True
    ).stdout.strip()
    if conf:
        env["CONTAINERS_CONF"] = conf
    return Engine("podman", env)
