"""The device and precision decision, on the tables real machines report: `cuda` never falls
back and says how to fix what stops it; `auto` falls back to the CPU and says why, in the log
and in the metrics."""

from __future__ import annotations

import re

import pytest
import torch
from prometheus_client import CollectorRegistry, generate_latest
from structlog.testing import capture_logs

from tests.unit.forecast.test_kernels import CU124_26, CU128_27
from trader.config.schema import Settings
from trader.forecast.device import CudaEnvironment, Gpu, choose_device, probe_environment
from trader.forecast.device_choice import DeviceUnavailable
from trader.forecast.nvidia import DriverGpu, parse_gpu_query
from trader.forecast.smoke import Check, SmokeReport, run_smoke_test

RTX_5090 = Gpu(0, "NVIDIA GeForce RTX 5090", (12, 0), 32 * 2**30)
RTX_3090 = Gpu(0, "NVIDIA GeForce RTX 3090", (8, 6))
T4 = Gpu(0, "Tesla T4", (7, 5))
NO_KERNEL = "CUDA error: no kernel image is available for execution on the device"


def cuda_build(version: str, cuda: str, arch_list: tuple[str, ...], *gpus: Gpu) -> CudaEnvironment:
    return CudaEnvironment(version, cuda, None, arch_list, gpus)


CPU_ONLY = CudaEnvironment("2.13.0+cpu", None, None, (), ())


class Smoke:
    """The smoke test as a GPU would answer it: passing, or failing some checks."""

    def __init__(self, failing: dict[str, str] | None = None) -> None:
        self.failing = failing or {}
        self.ran: list[tuple[str, bool]] = []

    def __call__(self, device: torch.device, bf16: bool) -> SmokeReport:
        self.ran.append((str(device), bf16))
        names = ["matmul float32", "attention float32", "lstm+conv float32"]
        names += ["matmul bfloat16", "attention bfloat16"] if bf16 else []
        failing = self.failing.get(str(device), "")
        checks = [
            Check(n, not re.search(failing, n) if failing else True, 0.001, NO_KERNEL)
            for n in names
        ]
        return SmokeReport(str(device), tuple(checks))


def test_cpu_runs_float32_and_refuses_half_precision():
    choice = choose_device("cpu", environment=CPU_ONLY)
    assert (choice.device, choice.precision, choice.fallback) == (
        torch.device("cpu"),
        "float32",
        None,
    )
    assert choice.name  # the CPU's model name
    with pytest.raises(DeviceUnavailable, match="GPUs only"):
        choose_device("cpu", "bfloat16")


def test_auto_on_a_cpu_only_build_falls_back_and_says_why():
    choice = choose_device("auto", environment=CPU_ONLY)
    assert choice.device == torch.device("cpu")
    assert choice.fallback == "torch 2.13.0+cpu is a CPU-only build and no NVIDIA GPU is visible"
    assert choice.describe()["fallback"] == choice.fallback


@pytest.mark.parametrize("requested", ["cuda", "cuda:1"])
def test_cuda_asked_for_without_cuda_is_an_error_with_the_reason_and_the_fix(requested):
    with pytest.raises(DeviceUnavailable) as raised:
        choose_device(requested, environment=CPU_ONLY)
    message = str(raised.value)
    assert message.startswith(f"forecast.device = {requested}, but torch 2.13.0+cpu is a CPU-only")
    assert (
        "Fix: on a machine with an NVIDIA GPU and driver, install torch>=2.7 built for CUDA 12.8"
        in message
    )


def test_a_cpu_only_build_beside_a_gpu_the_driver_sees_names_the_gpu():
    env = CudaEnvironment(
        "2.13.0+cpu", None, None, (), (),
        driver=(DriverGpu(0, "NVIDIA GeForce RTX 5070 Ti", (12, 0), "575.51", "16303 MiB"),),
    )  # fmt: skip
    choice = choose_device("auto", environment=env)
    assert choice.device.type == "cpu"
    assert choice.fallback == (
        "torch 2.13.0+cpu is a CPU-only build, but the driver sees "
        "NVIDIA GeForce RTX 5070 Ti (12.0)"
    )
    with pytest.raises(DeviceUnavailable, match=r"Fix: install torch>=2\.7 built for CUDA 12\.8"):
        choose_device("cuda", environment=env)


def test_a_cuda_build_that_sees_no_device_points_at_the_driver():
    env = CudaEnvironment("2.7.0+cu128", "12.8", None, (), (), "torch sees no CUDA device")
    with pytest.raises(DeviceUnavailable, match="no NVIDIA driver answers"):
        choose_device("cuda", environment=env)


def test_sm_120_with_a_cu124_build_is_refused_before_any_kernel_runs():
    env = cuda_build("2.6.0+cu124", "12.4", CU124_26, RTX_5090)
    smoke = Smoke()
    with pytest.raises(DeviceUnavailable) as raised:
        choose_device("cuda", environment=env, smoke=smoke)
    assert "torch 2.6.0+cu124 has no sm_120 kernels: install torch>=2.7 built for CUDA 12.8" in str(
        raised.value
    )
    assert "cuda:0 (NVIDIA GeForce RTX 5090, compute capability 12.0)" in str(raised.value)
    assert smoke.ran == []  # nothing is run on a card the build has no kernels for
    fallback = choose_device("auto", environment=env, smoke=smoke)
    assert fallback.device.type == "cpu"
    assert fallback.fallback is not None
    assert "has no sm_120 kernels" in fallback.fallback


def test_sm_120_with_a_cu128_build_is_used_in_bfloat16_and_the_decision_is_stated():
    env = cuda_build("2.7.0+cu128", "12.8", CU128_27, RTX_5090)
    smoke = Smoke()
    choice = choose_device("auto", environment=env, smoke=smoke)
    assert (choice.device, choice.precision, choice.fallback) == (
        torch.device("cuda", 0), "bfloat16", None,
    )  # fmt: skip
    assert smoke.ran == [("cuda:0", True)]  # the bf16 ops are checked because bf16 is claimed
    described = choice.describe()
    assert described | {"reason": None, "kernels": None} == {
        "device": "cuda:0", "precision": "bfloat16", "reason": None, "fallback": None,
        "name": "NVIDIA GeForce RTX 5090", "capability": "12.0", "torch": "2.7.0+cu128",
        "cuda": "12.8", "bf16": "true", "kernels": None,
    }  # fmt: skip
    assert "runs sm_120 kernels" in str(described["kernels"])
    assert "smoke test passed" in str(described["reason"])


def test_sm_86_runs_sm_80_kernels_and_ptx_only_builds_are_used_when_they_cover_the_card():
    sm_80 = cuda_build("x", "12.1", ("sm_80",), RTX_3090)
    assert choose_device("cuda", environment=sm_80, smoke=Smoke()).bf16
    ptx_80 = cuda_build("x", "12.1", ("compute_80",), RTX_3090)
    ptx = choose_device("cuda", environment=ptx_80, smoke=Smoke())
    assert ptx.device == torch.device("cuda", 0)
    assert "JIT-compiled" in str(ptx.kernels)
    with pytest.raises(DeviceUnavailable, match="has no sm_86 kernels"):
        choose_device("cuda", environment=cuda_build("x", "12.1", ("compute_90",), RTX_3090))


def test_a_card_failing_the_smoke_test_is_refused_and_auto_takes_the_next_one():
    second = Gpu(1, "NVIDIA RTX A6000", (8, 6))
    env = cuda_build("2.7.0+cu128", "12.8", CU128_27, RTX_5090, second)
    smoke = Smoke({"cuda:0": "attention"})
    with pytest.raises(DeviceUnavailable) as raised:
        choose_device("cuda:0", environment=env, smoke=smoke)
    assert f"attention float32 failed on cuda:0: {NO_KERNEL}" in str(raised.value)
    assert "install torch>=2.7 built for CUDA 12.8" in str(raised.value)
    choice = choose_device("auto", environment=env, smoke=smoke)
    assert (choice.device, choice.name) == (torch.device("cuda", 1), "NVIDIA RTX A6000")


def test_a_card_that_claims_bfloat16_but_cannot_run_it_gets_float16():
    env = cuda_build("2.7.0+cu128", "12.8", CU128_27, RTX_3090)
    smoke = Smoke({"cuda:0": "bfloat16"})
    choice = choose_device("auto", environment=env, smoke=smoke)
    assert (choice.precision, choice.bf16) == ("float16", False)
    with pytest.raises(DeviceUnavailable, match="has no native bfloat16"):
        choose_device("cuda", "bfloat16", environment=env, smoke=smoke)


@pytest.mark.parametrize(
    ("gpu", "precision"),
    [(Gpu(0, "H100", (9, 0)), "bfloat16"), (T4, "float16"), (Gpu(0, "P100", (6, 0)), "float32")],
)
def test_auto_precision_follows_what_the_gpu_does_natively(gpu, precision):
    env = cuda_build("2.7.0+cu126", "12.6", CU124_26, gpu)
    assert choose_device("auto", environment=env, smoke=Smoke()).precision == precision


def test_a_missing_index_and_bfloat16_on_a_t4_are_refused():
    env = cuda_build("2.7.0+cu126", "12.6", CU124_26, T4)
    with pytest.raises(DeviceUnavailable, match="1 CUDA device"):
        choose_device("cuda:1", environment=env, smoke=Smoke())
    with pytest.raises(DeviceUnavailable, match="Tesla T4 has no native bfloat16"):
        choose_device("cuda", "bfloat16", environment=env, smoke=Smoke())
    assert choose_device("cuda", "float16", environment=env, smoke=Smoke()).precision == "float16"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_this_machines_torch_is_probed_without_a_gpu():
    env = probe_environment(ask_driver=False)
    assert (env.torch, env.cuda, env.gpus) == (torch.__version__, torch.version.cuda, ())


def test_nvidia_smis_answer_is_parsed_and_error_lines_skipped():
    text = (
        "0, NVIDIA GeForce RTX 5090, 12.0, 575.51.03, 32607\n"
        "1, Tesla K80, [N/A], 470.82.01, 11441\n"
        "Failed to initialize NVML: Driver/library version mismatch\n"
    )
    assert parse_gpu_query(text) == [
        DriverGpu(0, "NVIDIA GeForce RTX 5090", (12, 0), "575.51.03", "32607 MiB"),
        DriverGpu(1, "Tesla K80", None, "470.82.01", "11441 MiB"),
    ]


def test_the_smoke_test_runs_the_models_operations_on_this_cpu():
    report = run_smoke_test(torch.device("cpu"), bf16=True)
    assert report.ok, report.lines()
    assert [c.name for c in report.checks] == [
        "matmul float32", "attention float32", "lstm+conv float32",
        "matmul bfloat16", "attention bfloat16",
    ]  # fmt: skip


def test_the_smoke_test_fails_on_wrong_numbers_errors_and_results_off_the_device():
    from trader.forecast import smoke  # noqa: PLC0415

    def wrong(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.ones(3, device=device), torch.zeros(3, dtype=torch.float64)

    def off(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.ones(3), torch.ones(3, dtype=torch.float64)  # computed on the CPU

    def broken(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        raise RuntimeError(NO_KERNEL + "\nCUDA kernel errors might be asynchronously reported")

    assert not smoke._check("wrong", wrong, 1e-3, torch.device("cpu")).ok
    failed = smoke._check("broken", broken, 1e-3, torch.device("cpu"))
    assert (failed.ok, failed.detail) == (False, NO_KERNEL)
    moved = smoke._check("off", off, 1e-3, torch.device("meta"))
    assert not moved.ok
    assert "not meta" in moved.detail


def test_an_auto_fallback_shows_in_the_start_up_log_and_the_device_metric(monkeypatch):
    """The case this was built for: a Blackwell card and a torch without its kernels."""
    from trader import runner  # noqa: PLC0415
    from trader.telemetry.metrics import Metrics  # noqa: PLC0415

    env = cuda_build("2.6.0+cu124", "12.4", CU124_26, RTX_5090)
    monkeypatch.setattr("trader.forecast.device.probe_environment", lambda: env)
    settings = Settings(forecast={"model": "toto", "device": "auto"})
    with capture_logs() as logs:
        choice = runner.model_device(settings)
    (line,) = [e for e in logs if e["event"] == "models run on the CPU"]
    assert line["log_level"] == "warning"
    assert "has no sm_120 kernels" in line["fallback"]
    assert (line["device"], line["name"], line["torch"]) == ("cpu", choice.name, "2.6.0+cu124")
    metrics = Metrics(CollectorRegistry(), ["BTC/USDT"])
    metrics.describe_device(choice.describe())
    exposition = generate_latest(metrics.registry).decode()
    (info,) = [x for x in exposition.splitlines() if x.startswith("trader_device_info{")]
    assert 'device="cpu"' in info
    assert re.search(r'fallback="[^"]*has no sm_120 kernels', info)
