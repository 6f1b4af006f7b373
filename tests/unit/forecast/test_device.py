"""The device and precision decision: `cuda` never falls back, `auto` says when it does."""

from __future__ import annotations

import pytest
import torch

from trader.forecast.device import DeviceUnavailable, choose_device


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def gpu(monkeypatch):
    """A CUDA device as torch would report it; each test sets its capability."""

    def install(capability: tuple[int, int], bf16: bool, name: str = "NVIDIA Test GPU") -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16)

    return install


def test_cpu_runs_float32_and_refuses_half_precision(no_cuda):
    choice = choose_device("cpu")
    assert (choice.device, choice.precision, choice.fallback) == (
        torch.device("cpu"),
        "float32",
        None,
    )
    with pytest.raises(DeviceUnavailable, match="GPUs only"):
        choose_device("cpu", "bfloat16")


def test_auto_without_cuda_falls_back_to_the_cpu_and_says_why(no_cuda):
    choice = choose_device("auto")
    assert choice.device == torch.device("cpu")
    assert choice.fallback
    assert choice.describe()["fallback"] == choice.fallback


@pytest.mark.parametrize("requested", ["cuda", "cuda:1"])
def test_cuda_asked_for_and_absent_is_an_error_with_the_fix(no_cuda, requested):
    with pytest.raises(DeviceUnavailable, match=r"sees no CUDA device\. Install a CUDA build"):
        choose_device(requested)


@pytest.mark.parametrize(
    ("capability", "bf16", "precision"),
    [((9, 0), True, "bfloat16"), ((7, 5), False, "float16"), ((6, 1), False, "float32")],
)
def test_auto_precision_follows_what_the_gpu_does_natively(gpu, capability, bf16, precision):
    gpu(capability, bf16)
    choice = choose_device("auto")
    assert (choice.device, choice.precision) == (torch.device("cuda", 0), precision)
    assert "NVIDIA Test GPU" in choice.reason


def test_bfloat16_on_a_gpu_without_it_is_refused_and_a_missing_index_too(gpu):
    gpu((7, 5), bf16=False, name="Tesla T4")
    with pytest.raises(DeviceUnavailable, match="Tesla T4 has no native bfloat16"):
        choose_device("cuda", "bfloat16")
    with pytest.raises(DeviceUnavailable, match="1 CUDA device"):
        choose_device("cuda:1")
    assert choose_device("cuda", "float16").precision == "float16"
