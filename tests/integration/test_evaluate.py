"""`trader evaluate` as a user runs it: a stock on its trading sessions (the A-share excerpt,
lunch breaks and nights), the figures as JSON and a report folder, and bad input told plainly
with exit 2 or 65, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import TRADER, clean_env
from tests.recorded import XSHG_600977_5MIN
from trader.cli import main

pytestmark = pytest.mark.integration

HORIZON = 6
BASE = ["evaluate", "--data", str(XSHG_600977_5MIN), "--symbol", "600977/CNY",
        "--context", "64"]  # fmt: skip


def evaluate(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(
        TRADER_BACKTEST__CACHE_DIR=str(tmp / "cache"),
        TRADER_FORECAST__DOWNLOAD="false",
        HF_HUB_OFFLINE="1",
        HF_HOME=str(tmp / "hf"),
    )
    return subprocess.run(
        [TRADER, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    tmp = tmp_path_factory.mktemp("evaluate")
    out = tmp / "report"
    done = evaluate(tmp, *BASE, "--horizon", str(HORIZON), "--origins", "300", "--json",
                    "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out


def test_the_figures_have_the_naive_and_baseline_rows(report):
    data, _ = report
    rows = {row["model"]: row for row in data["rows"]}
    assert set(rows) == {"naive", "baseline"}
    naive = rows["naive"]["figures"]
    assert naive["skill"] == 0.0  # against itself
    # The naive reference is the baseline's construction (the window of 64 bars is shorter
    # than either lookback: both use all of it): the baseline scores 0 by construction.
    baseline = rows["baseline"]
    assert baseline["figures"]["skill"] == 0.0
    assert baseline["figures"]["crps"] == naive["crps"]
    assert all(step["figures"]["skill"] == 0.0 for step in baseline["by_step"])
    # The no-change point comparison stays, labelled: any spread beats it.
    assert baseline["figures"]["skill_no_change"] > 0.1
    interval = baseline["intervals"]["crps"]
    assert interval["low"] <= baseline["figures"]["crps"] <= interval["high"]
    assert len(baseline["by_step"]) == HORIZON
    assert set(baseline["figures"]["coverage"]) == {"50", "80", "90"}
    (test,) = data["tests"]
    assert (test["model"], test["against"]) == ("baseline", "naive")
    assert test["p_value"] is None  # the same losses: nothing to test
    assert data["naive"]["window"] == 256


def test_origins_follow_the_session_calendar(report):
    data, _ = report
    origins = data["origins"]["600977/CNY"]
    # Lunch breaks and nights are no gap: only the origins whose horizon runs past the end of
    # the file are left out.
    assert origins["incomplete"] == HORIZON
    assert origins["scored"] == 300
    assert "XSHG" in " ".join(data["notes"])


def test_the_report_folder_is_self_contained(report):
    _, out = report
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3
    assert "Diebold-Mariano" in (out / "report.md").read_text()
    for plot in ("skill", "calibration", "crps_time"):
        png = out / f"{plot}_600977CNY.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "evaluation.json").read_text())["horizon"] == HORIZON


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--from", "2024-07-10", "--to", "2024-07-01"], 2, "--from"),
        (["--from", "2030-01-01"], 65, "the period holds no origin"),
        (["--horizon", "1000", "--context", "1000"], 65, "the horizon is longer than the data"),
        (["--model", "toto"], 2, "--weights toto=DIR"),
        (["--weights", "toto=/nowhere", "--model", "toto"], 2, "no such directory"),
    ],
    ids=["from-after-to", "empty-period", "horizon-past-data", "no-weights", "bad-weights"],
)
def test_bad_input_is_told_plainly(tmp_path, monkeypatch, capsys, args, code, says):
    # In this process (the CLI's own entry point): an exception would fail the test here, as a
    # traceback would show at the terminal.
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith(("TRADER_", "HF_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TRADER_BACKTEST__CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRADER_FORECAST__DOWNLOAD", "false")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert main([*BASE, *args]) == code
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("model", ["toto2", "kronos"])
def test_a_model_is_scored_beside_the_references(tmp_path, monkeypatch, capsys, model):
    # Random small weights as `trader finetune` lays them out (Kronos: predictor/, tokenizer/).
    from trader.forecast.random_weights import write_random  # noqa: PLC0415

    weights = tmp_path / model
    write_random(model, weights, "small")
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith(("TRADER_", "HF_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TRADER_BACKTEST__CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args = ["--model", model, "--weights", f"{model}={weights}", "--horizon", "4",
            "--origins", "12", "--samples", "4", "--json"]  # fmt: skip
    assert main([*BASE, *args]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["model"]: row for row in data["rows"]}
    assert set(rows) == {"naive", "baseline", model}
    assert rows[model]["figures"]["crps"] > 0
    assert data["origins"]["600977/CNY"]["scored"] == 12
