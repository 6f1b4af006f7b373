"""`trader finetune` as a user runs it, on recorded bars with a dropped candle and a NaN row,
from random small weights, with a configuration small enough for seconds of CPU:

- each model trains (Toto in full, Kronos's tokenizer and predictor with LoRA, merged): the
  validation loss falls, the fine-tuned model beats its start on the held-out tail, the
  evidence is complete and says device=cpu, `trader forecast --weights DIR/weights` loads it,
  and the reference packages load the weights and give our outputs;
- a run stopped by SIGTERM (exit 0), resumed, killed by SIGKILL after a checkpoint and resumed
  again ends with exactly the weights and scores of the uninterrupted run;
- two gloo processes under torchrun train with the same global batch to the same losses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests.integration.conftest import TRADER, clean_env
from tests.integration.kronos_reference import (
    Checkpoints,
    bars,
    read_bars,
    reference_predict,
    reference_predictor,
)
from tests.integration.toto_reference import load_reference
from tests.recorded import SOLUSDT_1H, XSHG_600977_5MIN, lines
from trader.config.forecast_settings import ForecastSettings
from trader.forecast.kronos.loading import load_model, load_tokenizer
from trader.forecast.kronos.predictor import KronosForecaster
from trader.forecast.kronos.sampling import Sampling
from trader.forecast.oneshot import OneShot, run_forecast_command
from trader.forecast.protocol import ForecastRequest
from trader.forecast.toto.loading import load_toto
from trader.forecast.toto.scaler import scale_context

pytestmark = pytest.mark.integration

CONFIG = """
[finetune]
context = 32
horizon = 4
batch_size = 8
learning_rate = 0.003
min_learning_rate = 0.0003
warmup_steps = 2
log_interval = 5
validation_interval = 10
checkpoint_interval = 10
validation_windows = 32
evaluation_windows = 24
evaluation_samples = 32
kronos_train = "both"
"""
STEPS = "30"
EVIDENCE = {
    "training_log.txt", "metrics.jsonl", "env_info.txt", "torch_cuda_check.txt",
    "config.json", "loss.png", "README.md",
}  # fmt: skip


@dataclass(frozen=True)
class Run:
    out: Path
    result: subprocess.CompletedProcess[str]

    def records(self, kind: str) -> list[dict]:
        text = (self.out / "evidence" / "metrics.jsonl").read_text()
        return [r for r in map(json.loads, text.splitlines()) if r["kind"] == kind]

    def eval(self) -> dict:
        return json.loads((self.out / "eval.json").read_text())


def env() -> dict[str, str]:
    return clean_env(OMP_NUM_THREADS="1")


def arguments(workspace: Path, model: str, out: Path, *extra: str) -> list[str]:
    return [
        "finetune", "--config", str(workspace / "finetune.toml"), "--model", model,
        "--data", str(workspace / "SOLUSDT_1h.csv"), "--base", "random:small",
        "--out", str(out), "--device", "cpu", "--max-steps", STEPS, *extra,
    ]  # fmt: skip


def finetune(workspace: Path, model: str, out: Path, *extra: str) -> Run:
    result = subprocess.run(
        [TRADER, *arguments(workspace, model, out, *extra)], cwd=workspace, env=env(),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return Run(out, result)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """1,200 hours of SOL/USDT with the candle of row 500 dropped and a NaN close in row 800."""
    root = tmp_path_factory.mktemp("finetune")
    header, *rows = lines(SOLUSDT_1H, 1200)
    fields = rows[799].split(",")
    fields[4] = "nan"
    rows[799] = ",".join(fields)
    del rows[499]
    (root / "SOLUSDT_1h.csv").write_text("\n".join([header, *rows]) + "\n")
    (root / "finetune.toml").write_text(CONFIG)
    return root


@pytest.fixture(scope="module")
def toto(workspace) -> Run:
    return finetune(workspace, "toto", workspace / "toto")


@pytest.fixture(scope="module")
def kronos(workspace) -> Run:
    return finetune(workspace, "kronos", workspace / "kronos", "--lora")


@pytest.mark.parametrize("name", ["toto", "kronos"])
def test_a_run_learns_beats_its_start_and_leaves_complete_evidence(
    request, workspace, name, capsys
):
    run: Run = request.getfixturevalue(name)
    validations = [r["loss"] for r in run.records("validation")]
    assert validations[0] == max(validations) > min(validations)  # the loss fell
    scores = run.eval()
    assert scores["finetuned"]["crps"] < scores["base"]["crps"]
    assert scores["helped"] is True
    assert {"base", "finetuned", "naive"} <= set(scores)
    assert "fine-tuning helped" in run.result.stdout
    evidence = run.out / "evidence"
    assert {p.name for p in evidence.iterdir()} == EVIDENCE
    log = (evidence / "training_log.txt").read_text()
    assert log.startswith("finetune on device=cpu")
    steps = [line for line in log.splitlines() if line.startswith("step ")]
    assert len(steps) == 6
    assert all("device=cpu" in line and "windows/s" in line and " lr " in line for line in steps)
    readme = (evidence / "README.md").read_text()
    assert "**fine-tuning helped" in readme
    assert "invalid rows skipped: 1 " in readme  # the NaN row
    assert "bars missing by the calendar: 2" in readme  # the dropped candle and the NaN row
    assert "skipped because a hole" in readme
    assert "RANDOM weights of a small" in readme
    config = json.loads((evidence / "config.json").read_text())
    assert config["device"]["device"] == "cpu"
    assert config["finetune"]["context"] == 32
    # `trader forecast --weights DIR/weights`, its logic in this process (no second start-up).
    report = run_forecast_command(
        ForecastSettings(device="cpu"),
        OneShot(
            model=name, data=workspace / "SOLUSDT_1h.csv", symbol=None, context=64, horizon=4,
            samples=8, seed=None, device=None, weights=run.out / "weights", tokenizer=None,
            download=False, as_json=True,
        ),
    )  # fmt: skip
    assert report == 0
    assert json.loads(capsys.readouterr().out)["model"] == name


def test_the_reference_toto_loads_the_fine_tuned_weights_and_agrees(toto):
    weights = toto.out / "weights"
    reference, ours = load_reference(weights), load_toto(weights)
    x = torch.randn(2, 3, 64, generator=torch.Generator().manual_seed(0)).cumsum(-1) + 100
    valid = torch.ones_like(x, dtype=torch.bool)
    with torch.no_grad():
        theirs = reference.model(
            inputs=x, input_padding_mask=valid, id_mask=torch.zeros_like(x), kv_cache=None,
            scaling_prefix_length=x.shape[-1],
        )  # fmt: skip
        scaled, _, _, _ = scale_context(x, valid, 16, stabilize=True, exponent=10.0)
        head, _, _ = ours.prefill(scaled, every_patch=True)
    components = theirs.distribution.component_distribution
    for mine, their in ((head.loc, components.loc), (head.scale, components.scale)):
        torch.testing.assert_close(mine, their, rtol=1e-4, atol=1e-4 * their.abs().mean().item())


def test_the_reference_kronos_loads_the_merged_lora_weights_and_agrees(kronos):
    weights = kronos.out / "weights"
    pair = Checkpoints(weights / "predictor", weights / "tokenizer")
    frame = read_bars(XSHG_600977_5MIN).iloc[:120]
    expected = reference_predict(reference_predictor(pair, 512), frame, 6)
    ours = KronosForecaster(
        load_model(pair.model), load_tokenizer(pair.tokenizer), max_context=512,
        sample_count=1, sampling=Sampling(top_k=1), seed=0, device=torch.device("cpu"),
    )  # fmt: skip
    [paths] = ours.paths([ForecastRequest("600977/CNY", bars(frame), 6, [0.5])])
    np.testing.assert_allclose(paths[0].numpy(), expected, rtol=1e-5)


def test_stopped_killed_and_resumed_ends_as_the_uninterrupted_run(workspace, toto):
    out = workspace / "interrupted"
    log = out / "evidence" / "training_log.txt"
    stopped = _interrupt(workspace, out, log, "checkpoint step 10 ", signal.SIGTERM)
    assert stopped.returncode == 0
    assert "stopped by SIGTERM at step" in stopped.stderr
    assert "--resume" in stopped.stderr
    killed = _interrupt(workspace, out, log, "checkpoint step 20 ", signal.SIGKILL, "--resume")
    assert killed.returncode == -signal.SIGKILL
    resumed = finetune(workspace, "toto", out, "--resume")
    assert "resumed from" in resumed.result.stderr
    ours, uninterrupted = (load_file(r / "weights" / "model.safetensors") for r in (out, toto.out))
    assert ours.keys() == uninterrupted.keys()
    assert all(torch.equal(ours[k], uninterrupted[k]) for k in ours)
    assert resumed.eval() == toto.eval()


def _interrupt(
    workspace: Path, out: Path, log: Path, line: str, how: signal.Signals, *extra: str
) -> subprocess.CompletedProcess[str]:
    """Start a run and send it `how` as soon as its training log holds `line`."""
    with (workspace / "interrupted.err").open("w+") as errors:
        process = subprocess.Popen(
            [TRADER, *arguments(workspace, "toto", out, *extra)], cwd=workspace, env=env(),
            stdout=subprocess.DEVNULL, stderr=errors, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while not (log.exists() and line in log.read_text()):
            assert process.poll() is None, "the run ended before the checkpoint"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(process.pid, how)
        code = process.wait(timeout=300)
        errors.seek(0)
        return subprocess.CompletedProcess(process.args, code, "", errors.read())


def test_two_gloo_processes_train_to_the_single_process_losses(workspace):
    """The same global batch split over two processes: the first steps agree to float
    rounding; Adam from random weights then amplifies rounding (splitting the batch in two
    within one process does the same), so later losses agree to a few percent. Both without
    dropout: each process draws its own masks, so with it the two runs differ by design."""
    config = workspace / "without_dropout.toml"
    config.write_text(CONFIG + "dropout = false\n")
    toto = finetune(workspace, "toto", workspace / "one", "--config", str(config))
    assert "dropout: off" in toto.result.stderr
    out = workspace / "ddp"
    result = subprocess.run(
        [TRADER, *arguments(workspace, "toto", out, "--nproc-per-node", "2", "--config",
                             str(config))],
        cwd=workspace, env=env(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    ddp = Run(out, result)
    assert "world size 2" in (out / "evidence" / "training_log.txt").read_text()
    assert (out / "weights" / "model.safetensors").exists()
    assert {"base", "finetuned", "naive"} <= set(ddp.eval())
    two, one = ddp.records("train"), toto.records("train")
    assert [r["step"] for r in two] == [r["step"] for r in one]
    assert two[0]["loss"] == pytest.approx(one[0]["loss"], rel=1e-4)  # steps 1-5
    validations = zip(ddp.records("validation"), toto.records("validation"), strict=True)
    for tolerance, (a, b) in zip([1e-6, 0.05, 0.05, 0.05], validations, strict=True):
        assert a["step"] == b["step"]
        assert a["loss"] == pytest.approx(b["loss"], rel=tolerance)
