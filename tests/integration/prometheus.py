"""A real Prometheus on a loopback port of the test's own, with the stack's configuration and
alert rules pointed at the daemons under test, scraping and evaluating every second. Rules may
be loaded with their `for:` durations shortened, so a test sees an alert go pending and firing in
seconds rather than minutes."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import missing_binary
from tests.deploy_queries import DEPLOY, RULE_FILES
from tests.integration.loopback import free_port, http_get


@dataclass
class RunningPrometheus:
    url: str
    log: Path

    def query(self, expr: str, at: float | None = None) -> dict[str, Any]:
        """The expression now, or as it was at `at` (epoch s)."""
        when = {} if at is None else {"time": f"{at:.3f}"}
        params = urllib.parse.urlencode({"query": expr} | when)
        status, body = http_get(f"{self.url}/api/v1/query?{params}")
        answer = json.loads(body)
        assert status == 200, (expr, answer)
        assert answer["status"] == "success", (expr, answer)
        return answer["data"]

    def value(self, expr: str) -> float | None:
        """The expression's single value now, None when it has no series."""
        result = self.query(expr)["result"]
        return float(result[0]["value"][1]) if result else None

    def value_at(self, expr: str, at: float) -> float | None:
        """The expression's single value as it was at `at` (epoch s), None with no series."""
        result = self.query(expr, at)["result"]
        return float(result[0]["value"][1]) if result else None

    def first_sample(self, selector: str, start: float, end: float) -> float | None:
        """When (epoch s) a series of `selector` (such as `ALERTS{alertname="X"}`) was first
        recorded in [start, end]: its raw samples, so to the evaluation, not to a step."""
        window = f"{max(1, math.ceil(end - start))}s"
        result = self.query(f"{selector}[{window}]", end)["result"]
        times = [float(t) for series in result for t, _ in series["values"] if float(t) >= start]
        return min(times) if times else None

    def rules(self) -> list[dict[str, Any]]:
        status, body = http_get(f"{self.url}/api/v1/rules")
        assert status == 200, body
        return [rule for group in json.loads(body)["data"]["groups"] for rule in group["rules"]]

    def alert_states(self) -> dict[str, str]:
        """Each alert with an active instance: "pending" or "firing" (the worst of its own)."""
        states: dict[str, str] = {}
        for rule in self.rules():
            for alert in rule.get("alerts", []):
                if states.get(rule["name"]) != "firing":
                    states[rule["name"]] = alert["state"]
        return states


def wait_for(condition: Callable[[], Any], what: str, timeout: float) -> Any:
    """The condition's first truthy result; AssertionError with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = condition()
        except (OSError, ValueError, KeyError):  # not up yet
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.25)


def shortened_rules(directory: Path, durations: dict[str, str]) -> list[Path]:
    """The project's rule files with each named alert's `for:` replaced (the rest as written)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for path in RULE_FILES:
        document = yaml.safe_load(path.read_text())
        for group in document["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") in durations:
                    rule["for"] = durations[rule["alert"]]
        target = directory / path.name
        target.write_text(yaml.safe_dump(document, sort_keys=False))
        written.append(target)
    return written


def seconds(duration: str) -> float:
    """A Prometheus duration such as "2m", "90s" or "1h30m", in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    parts = re.findall(r"(\d+)(ms|s|m|h|d)", duration)
    assert "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * units[u] for n, u in parts)


def rule_for(name: str) -> str:
    """The `for:` duration the project's rules give an alert ("0s" when none)."""
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == name:
                    return str(rule.get("for", "0s"))
    raise AssertionError(f"no alert named {name} in {[p.name for p in RULE_FILES]}")


@contextmanager
def prometheus(
    targets: Sequence[str], workdir: Path, rule_files: Sequence[Path] = RULE_FILES
) -> Iterator[RunningPrometheus]:
    """Prometheus with the stack's prometheus.yml, its trader job scraping `targets`
    ("127.0.0.1:PORT") every second and evaluating `rule_files` every second."""
    binary = shutil.which("prometheus")
    if binary is None:
        missing_binary("prometheus")
    assert binary is not None
    workdir.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"] |= {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(path) for path in rule_files]
    config.pop("alerting", None)  # no Alertmanager here: the alerts' states are read directly
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "trader"]
    job["static_configs"] = [{"targets": list(targets)}]
    config["scrape_configs"] = [job]
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    running = RunningPrometheus(f"http://127.0.0.1:{port}", log)
    try:
        wait_for(lambda: http_get(f"{running.url}/-/ready")[0] == 200, "Prometheus", 60)
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
