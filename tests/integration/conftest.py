"""Run the installed `trader` command as a user would, in a directory of the test's own."""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TRADER = shutil.which("trader", path=str(Path(sys.executable).parent)) or "trader"


def clean_env(**extra: str) -> dict[str, str]:
    """No TRADER_* or credentials from the developer's shell leak into a test."""
    keep = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "TMPDIR"}}
    return keep | extra


@dataclass
class Cli:
    cwd: Path
    started: list[subprocess.Popen[str]] = field(default_factory=list)

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [TRADER, *args],
            cwd=self.cwd,
            env=env if env is not None else clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def start(self, *args: str, env: dict[str, str] | None = None) -> Daemon:
        process = subprocess.Popen(
            [TRADER, *args],
            cwd=self.cwd,
            env=env if env is not None else clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.started.append(process)
        return Daemon(process)

    def stop_all(self) -> None:
        """Kill what a failed test left running: a daemon never stops by itself."""
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)


@dataclass
class Daemon:
    """A running `trader run` whose JSON log lines are collected as they arrive."""

    process: subprocess.Popen[str]
    lines: list[dict] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)

    def __post_init__(self) -> None:
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._queue.put(line)
        self._queue.put(None)

    # A ceiling, not a speed check: start-up on a CI machine building an image beside it.
    def wait_for(self, event: str, timeout: float = 90.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                raw = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if raw is None:
                break
            line = json.loads(raw)  # every line off a TTY is JSON
            self.lines.append(line)
            if line["event"] == event:
                return line
        raise AssertionError(f"no {event!r} log line; saw {[x['event'] for x in self.lines]}")

    def finish(self, timeout: float = 30.0) -> int:
        code = self.process.wait(timeout=timeout)
        while (raw := self._queue.get(timeout=timeout)) is not None:
            self.lines.append(json.loads(raw))
        return code


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    made = Cli(tmp_path)
    yield made
    made.stop_all()
