"""Weights that say where they came from: a checkpoint `trader finetune` writes from a random
base records its base, data, steps, objective and verdict in the weights file itself, and
`trader forecast`, `trader backtest` and `trader run` (the real CLI, on that checkpoint) each say
its origin and warn in their first lines; the daemon exports it as `trader_model_info`."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from safetensors import safe_open

from tests.integration.conftest import TRADER, clean_env
from tests.integration.daemon import daemon_env, metrics_port, running, scrape, stop
from tests.recorded import SOLUSDT_1H, lines
from trader.forecast.provenance import KEY, read_provenance

pytestmark = pytest.mark.integration

STEPS = 12
CONFIG = """
[finetune]
context = 32
horizon = 4
batch_size = 4
warmup_steps = 0
log_interval = 4
validation_interval = 6
checkpoint_interval = 6
validation_windows = 8
evaluation_windows = 8
evaluation_samples = 8
"""
# Quick forecasts for the commands that load the weights: few samples, a short context.
LOADING = {
    "TRADER_FORECAST__MODEL": "toto",
    "TRADER_FORECAST__DEVICE": "cpu",
    "TRADER_FORECAST__TOTO__NUM_SAMPLES": "8",
    "TRADER_FORECAST__HORIZON": "4",
    "TRADER_MARKET__CONTEXT_BARS": "64",
    "TRADER_FORECAST__DOWNLOAD": "false",
    "OMP_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class Finetuned:
    data: Path
    weights: Path
    eval: dict
    stdout: str

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(**LOADING, TRADER_FORECAST__WEIGHTS_DIR=str(self.weights), **extra)

    def expected_warnings(self) -> list[str]:
        """From this run's own verdict: the random base always, a verdict that did not help."""
        warnings = ["WARNING: fine-tuned from a RANDOM base (random:small)"]
        if not self.eval["helped"]:
            warnings.append("WARNING: fine-tuning did NOT help")
        return warnings


@pytest.fixture(scope="module")
def finetuned(tmp_path_factory) -> Finetuned:
    root = tmp_path_factory.mktemp("origin")
    data = root / "SOLUSDT_1h.csv"
    data.write_text("\n".join(lines(SOLUSDT_1H, 700)) + "\n")
    (root / "finetune.toml").write_text(CONFIG)
    out = root / "run"
    result = subprocess.run(
        [TRADER, "finetune", "--config", str(root / "finetune.toml"), "--model", "toto",
         "--data", str(data), "--base", "random:small", "--out", str(out), "--device", "cpu",
         "--max-steps", str(STEPS)],
        cwd=root, env=clean_env(OMP_NUM_THREADS="1"), capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    evaluation = json.loads((out / "eval.json").read_text())
    return Finetuned(data, out / "weights", evaluation, result.stdout)


def first_lines(text: str, expected: list[str]) -> None:
    """`text` opens with the origin line, then exactly the expected warnings."""
    head = text.splitlines()[: 1 + len(expected)]
    assert head[0].startswith("weights of toto: fine-tuned by trader "), text[:2000]
    assert " from random:small on SOLUSDT_1h.csv (" in head[0]
    assert f"{STEPS} steps" in head[0]
    assert [line[: len(w)] for line, w in zip(head[1:], expected, strict=True)] == expected


def test_the_weights_file_records_base_data_steps_objective_and_verdict(finetuned):
    record = read_provenance(finetuned.weights)
    assert record is not None
    assert record["kind"] == "finetuned"
    assert record["base"]["name"] == "random:small"
    assert record["base"]["random"] is True
    [seen] = record["data"]["files"]
    assert seen["sha256"] == hashlib.sha256(finetuned.data.read_bytes()).hexdigest()
    identity = json.loads((finetuned.weights.parent / "run.json").read_text())
    assert seen["rows"] == identity["data"][0]["bars"]
    assert seen["first"] < seen["last"]
    assert record["steps"]["done"] == STEPS
    assert record["objective"]["trained"] == "toto (every weight)"
    assert record["verdict"]["helped"] == finetuned.eval["helped"]
    assert record["verdict"]["beats_naive"] == finetuned.eval["beats_naive"]
    assert record["verdict"]["text"] in finetuned.stdout  # the verdict the run printed
    # safetensors itself reads the record from the header (the reference packages load the
    # same file: tests/integration/test_finetune.py).
    with safe_open(finetuned.weights / "model.safetensors", "pt") as handle:
        assert json.loads(handle.metadata()[KEY]) == record


def test_trader_forecast_says_the_origin_and_warns_in_its_first_lines(finetuned, tmp_path):
    result = subprocess.run(
        [TRADER, "forecast", "--model", "toto", "--data", str(finetuned.data), "--weights",
         str(finetuned.weights), "--device", "cpu", "--samples", "8", "--horizon", "4",
         "--context", "64", "--json"],
        cwd=tmp_path, env=clean_env(OMP_NUM_THREADS="1"), capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    first_lines(result.stderr, finetuned.expected_warnings())
    [origin] = json.loads(result.stdout)["weights_origin"]
    assert origin["origin"] == "finetuned"
    assert origin["warnings"][0].startswith("fine-tuned from a RANDOM base")


def test_trader_backtest_says_the_origin_and_warns_in_its_first_lines(finetuned, tmp_path):
    result = subprocess.run(
        [TRADER, "backtest", "--data", str(finetuned.data), "--strategy", "simple",
         "--from", "2020-09-07"],
        cwd=tmp_path, env=finetuned.env(), capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    first_lines(result.stderr, finetuned.expected_warnings())
    assert result.returncode == 0, result.stderr[-3000:]


def test_trader_run_says_the_origin_first_and_exports_trader_model_info(finetuned, cli, tmp_path):
    env = daemon_env(tmp_path) | finetuned.env()
    daemon = cli.start("run", "--replay", str(finetuned.data), "--speed", "36000", env=env)
    with running(daemon):
        port = metrics_port(daemon)
        daemon.wait_for("ready", 120)  # started up whole: a stop mid-start-up is another story
        info = [
            dict(labels)
            for (name, labels), value in scrape(port).items()
            if name == "trader_model_info" and value == 1
        ]
        stop(daemon)
    # The first lines: the replay's files read (and their calendars), then the origin and its
    # warnings, before the daemon starts.
    events = [line["event"] for line in daemon.lines]
    said = events.index("weights origin")
    assert set(events[:said]) <= {"recording read", "calendar"}, events[: said + 1]
    first, *warnings = daemon.lines[said : said + 1 + len(finetuned.expected_warnings())]
    assert first["origin"] == "finetuned"
    assert " from random:small on SOLUSDT_1h.csv (" in first["weights"]
    assert [w["event"] for w in warnings] == ["weights warning"] * len(warnings)
    assert [f"WARNING: {w['warning']}"[:40] for w in warnings] == [
        w[:40] for w in finetuned.expected_warnings()
    ]
    record = read_provenance(finetuned.weights)
    assert record is not None
    assert info == [{
        "model": "toto", "origin": "finetuned", "base": "random:small", "revision": "",
        "verdict": "helped" if finetuned.eval["helped"] else "did not help",
        "data": record["data"]["sha256"][:16], "steps": str(STEPS),
    }]  # fmt: skip


def test_trader_evaluate_says_the_origin_and_warns_in_its_first_lines(finetuned, tmp_path):
    result = subprocess.run(
        [TRADER, "evaluate", "--data", str(finetuned.data), "--model", "toto", "--weights",
         f"toto={finetuned.weights}", "--origins", "2", "--samples", "8", "--horizon", "4",
         "--context", "64"],
        cwd=tmp_path, env=clean_env(**LOADING), capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    first_lines(result.stderr, finetuned.expected_warnings())


def test_trader_doctor_labels_the_weights_it_checks_with_their_origin(finetuned, tmp_path):
    result = subprocess.run(
        [TRADER, "doctor", "--device", "cpu", "--model", "toto", "--weights",
         str(finetuned.weights), "--data", str(finetuned.data)],
        cwd=tmp_path, env=clean_env(**LOADING), capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    [line] = [line for line in result.stdout.splitlines() if "weights from " in line]
    assert "fine-tuned by trader " in line
    assert " from random:small on SOLUSDT_1h.csv (" in line
    for warning in finetuned.expected_warnings():
        assert warning in line, line
