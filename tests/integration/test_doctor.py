"""`trader doctor` as a user runs it: the report, the verdict and exit code, the evidence
folder; `cuda` asked for where there is none."""

from __future__ import annotations

import subprocess

import pytest
import torch

from tests.integration.conftest import TRADER, clean_env

pytestmark = pytest.mark.integration

SECRET = "sk-live-0123456789abcdef"


def doctor(cwd, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TRADER, "doctor", *args], cwd=cwd, env=clean_env(**env),
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: not a CPU verdict")
def test_the_evidence_folder_on_this_machine_carries_a_cpu_verdict(tmp_path):
    evidence = tmp_path / "evidence"
    # A configured secret, also planted in an allow-listed variable: it must not get out.
    result = doctor(
        tmp_path, "--evidence", str(evidence), "--size", "small",
        TRADER_EXCHANGE__API_KEY=SECRET, CUDA_VISIBLE_DEVICES=SECRET,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict: OK: forecasts run on the CPU" in result.stdout
    names = {p.name for p in evidence.iterdir()}
    expected = {"README.md", "env_info.txt", "torch_cuda_check.txt", "inference_smoke.txt"}
    assert names == expected | ({"nvidia_smi.txt"} & names)
    readme = (evidence / "README.md").read_text()
    assert "**OK** (exit 0): forecasts run on the CPU" in readme
    assert "| decision | cpu (float32) |" in readme
    environment = (evidence / "env_info.txt").read_text()
    assert f"torch {torch.__version__}" in environment
    assert "CUDA_VISIBLE_DEVICES=**********" in environment
    check = (evidence / "torch_cuda_check.txt").read_text()
    assert "decision for forecast.device = auto:" in check
    assert "  device: cpu" in check
    assert "ok   lstm+conv float32" in check
    smoke = (evidence / "inference_smoke.txt").read_text()
    assert "RANDOM weights" in smoke
    assert "first forecast" in smoke
    assert "peak process RSS" in smoke
    for path in evidence.iterdir():
        assert SECRET not in path.read_text(), path.name
    assert SECRET not in result.stdout + result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_asked_for_where_there_is_none_exits_69_with_the_reason_and_the_fix(tmp_path):
    result = doctor(tmp_path, "--device", "cuda", "--no-inference")
    assert result.returncode == 69
    assert "verdict: UNUSABLE: forecast.device = cuda, but torch" in result.stdout
    assert "Fix: " in result.stdout
    assert "the daemon refuses to start with this setting" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_device_that_is_not_one_is_a_usage_error(tmp_path):
    result = doctor(tmp_path, "--device", "tpu", "--no-inference")
    assert result.returncode == 64
    assert "is not auto, cpu, cuda or cuda:N" in result.stderr
