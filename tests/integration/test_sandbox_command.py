"""The command `trader sandbox` prints to connect a daemon works as printed: run by a shell,
exactly as it stands on the sandbox's stdout, it starts a live daemon against the sandbox that
trades and stops cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.conftest import TRADER, Daemon, clean_env
from tests.recorded import SOLUSDT_1H

pytestmark = pytest.mark.integration


def printed_command(sandbox: subprocess.Popen[str]) -> str:
    """The line of the sandbox's instructions that runs the daemon."""
    assert sandbox.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = sandbox.stdout.readline()
        assert line, f"the sandbox stopped: {sandbox.stderr.read() if sandbox.stderr else ''}"
        if line.rstrip().endswith("trader run"):
            return line.strip()
    raise AssertionError("the sandbox printed no daemon command")


def test_the_daemon_command_the_sandbox_prints_works_as_printed(tmp_path):
    sandbox = subprocess.Popen(
        [TRADER, "sandbox", "--data", str(SOLUSDT_1H), "--symbol", "SOL/USDT", "--port", "0",
         "--warmup", "200", "--log-level", "ERROR"],
        cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        command = printed_command(sandbox)
        # The shell finds `trader` where the user installed it: this interpreter's folder.
        path = f"{Path(TRADER).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        process = subprocess.Popen(
            ["bash", "-c", command], cwd=tmp_path, env=clean_env(PATH=path),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        daemon = Daemon(process)
        try:
            started = daemon.wait_for("starting", timeout=120)
            daemon.wait_for("ready", timeout=120)
            daemon.wait_for("tick done", timeout=60)
            daemon.process.send_signal(signal.SIGTERM)
            assert daemon.finish(timeout=60) == 0
        finally:
            if daemon.process.poll() is None:
                daemon.process.kill()
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)
    assert started["broker_mode"] == "live"
    assert (tmp_path / "var" / "sandbox.sqlite3").exists()
