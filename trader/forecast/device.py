"""Where the models run and at what precision, decided once at start-up and stated.

A GPU is usable only if the torch build carries kernels for its compute capability (torch's
own rule, `trader.forecast.kernels`) and a smoke test of the operations the models run passes
on it (`trader.forecast.smoke`). `cuda` / `cuda:N` never fall back: unusable, it is an error
whose message gives the reason and the fix. `auto` takes the first usable GPU, else the CPU,
and the choice then carries the reason in `fallback`, for the warning, the metrics and the
status.
"""

from __future__ import annotations

import platform
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from trader.forecast.device_choice import DeviceChoice, DeviceUnavailable
from trader.forecast.kernels import (
    KernelSupport,
    advice_for,
    capability_text,
    kernel_support,
    missing_kernels_message,
)
from trader.forecast.nvidia import DriverGpu, driver_gpus
from trader.forecast.smoke import SmokeReport, run_smoke_test
from trader.logging import adopt_library_loggers

PRECISIONS = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Gpu:
    """One CUDA device as torch reports it."""

    index: int
    name: str
    capability: tuple[int, int]
    memory_bytes: int | None = None

    @property
    def bf16(self) -> bool:
        # torch's rule for native bfloat16 (`is_bf16_supported(including_emulation=False)`).
        return self.capability >= (8, 0)


@dataclass(frozen=True)
class CudaEnvironment:
    """What torch (and, where torch sees nothing, the driver) says about CUDA here."""

    torch: str
    cuda: str | None  # the CUDA version of the build; None for a CPU-only build
    hip: str | None
    arch_list: tuple[str, ...]
    gpus: tuple[Gpu, ...]
    unavailable: str | None = None  # why torch sees no GPU, when it says
    driver: tuple[DriverGpu, ...] = ()  # nvidia-smi's GPUs, looked up when torch sees none

    @property
    def build(self) -> str:
        return f"torch {self.torch} (CUDA build {self.cuda or 'none'})"


def probe_environment(*, ask_driver: bool = True) -> CudaEnvironment:
    """torch's view of the GPUs. Reading it never raises: a broken driver is a finding."""
    gpus: list[Gpu] = []
    unavailable = None
    arch_list: tuple[str, ...] = ()
    try:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            available = torch.cuda.is_available()
        if not available and said:
            # e.g. "The NVIDIA driver on your system is too old": torch's own reason.
            unavailable = str(said[-1].message).strip().splitlines()[0]
        if available:
            arch_list = tuple(torch.cuda.get_arch_list())
            for index in range(torch.cuda.device_count()):
                props = torch.cuda.get_device_properties(index)
                gpus.append(Gpu(index, props.name, (props.major, props.minor), props.total_memory))
    except Exception as error:  # a driver/runtime mismatch raises here: report it instead
        unavailable = f"torch could not read the CUDA devices: {error}"
    driver: tuple[DriverGpu, ...] = ()
    if not gpus and ask_driver:
        driver = tuple(driver_gpus())
    return CudaEnvironment(
        torch.__version__,
        torch.version.cuda,
        getattr(torch.version, "hip", None),
        arch_list,
        tuple(gpus),
        unavailable,
        driver,
    )


Smoke = Callable[[torch.device, bool], SmokeReport]


def default_smoke(device: torch.device, bf16: bool) -> SmokeReport:
    return run_smoke_test(device, bf16=bf16)


@dataclass(frozen=True)
class GpuVerdict:
    """Whether one GPU is usable here, why, and (when not) the fix."""

    gpu: Gpu
    kernels: KernelSupport | None  # None on ROCm builds, where the arch rule does not apply
    smoke: SmokeReport | None  # None when the kernels are missing (nothing worth running)
    bf16: bool

    @property
    def usable(self) -> bool:
        return self.smoke is not None and self.smoke.ok

    def problem(self, torch_version: str) -> str | None:
        """Why the GPU cannot be used, with the fix; None when it can."""
        gpu = self.gpu
        label = (
            f"cuda:{gpu.index} ({gpu.name}, compute capability {capability_text(gpu.capability)})"
        )
        if self.kernels is not None and not self.kernels.usable:
            return f"{label}: {missing_kernels_message(torch_version, self.kernels)}"
        if self.smoke is not None and not self.smoke.ok:
            failure = self.smoke.failure or "the smoke test failed"
            if "no kernel image" in failure:
                fix = advice_for(self.gpu.capability).instruction()
            else:
                fix = (
                    "check that the NVIDIA driver supports this CUDA build (nvidia-smi), and "
                    "attach `trader doctor --evidence DIR` to a bug report"
                )
            return f"{label}: {failure}. Fix: {fix}"
        return None


def assess_gpu(env: CudaEnvironment, gpu: Gpu, smoke: Smoke) -> GpuVerdict:
    """The kernel check, then (only if it passes) the smoke test on the device."""
    kernels = None if env.hip else kernel_support(gpu.capability, env.arch_list)
    if kernels is not None and not kernels.usable:
        return GpuVerdict(gpu, kernels, None, gpu.bf16)
    report = smoke(torch.device("cuda", gpu.index), gpu.bf16)
    if gpu.bf16 and not report.ok and _only_bf16_failed(report):
        # The card claims bfloat16 but cannot run it: usable in float32/float16 only.
        float_report = SmokeReport(
            report.device, tuple(c for c in report.checks if "bfloat16" not in c.name)
        )
        return GpuVerdict(gpu, kernels, float_report, bf16=False)
    return GpuVerdict(gpu, kernels, report, gpu.bf16)


def _only_bf16_failed(report: SmokeReport) -> bool:
    return all(check.ok or "bfloat16" in check.name for check in report.checks)


def no_gpu_reason(env: CudaEnvironment) -> tuple[str, str]:
    """Why torch has no GPU to offer, and the fix. A CPU-only build beside a GPU the driver
    sees is named as such: that is the case that quietly runs on the CPU."""
    seen = ", ".join(
        g.name + ("" if g.capability is None else f" ({capability_text(g.capability)})")
        for g in env.driver
    )
    capability = next((g.capability for g in env.driver if g.capability), (7, 5))
    advice = advice_for(capability)
    install = advice.instruction()
    if env.cuda is None and not env.hip:
        if env.driver:
            return f"torch {env.torch} is a CPU-only build, but the driver sees {seen}", install
        return (
            f"torch {env.torch} is a CPU-only build and no NVIDIA GPU is visible",
            f"on a machine with an NVIDIA GPU and driver, {install}",
        )
    why = env.unavailable or "torch sees no CUDA device"
    if env.driver:
        return (
            f"{env.build}: {why}, though nvidia-smi lists {seen}",
            f"update the NVIDIA driver to one that supports CUDA {env.cuda} (driver >= "
            f"{advice.driver} for CUDA {advice.cuda}), and check CUDA_VISIBLE_DEVICES",
        )
    return (
        f"{env.build}: {why} and no NVIDIA driver answers",
        "install the NVIDIA driver (nvidia-smi must list the GPU) or pass the GPU into the "
        "container (--gpus all / the NVIDIA container toolkit)",
    )


def choose_device(
    requested: str,
    precision: str = "auto",
    *,
    environment: CudaEnvironment | None = None,
    smoke: Smoke = default_smoke,
) -> DeviceChoice:
    """`requested` is auto, cpu, cuda or cuda:N; `precision` is auto or one of PRECISIONS.
    `environment` defaults to what torch reports here (tests pass real builds' tables)."""
    # The first use of torch where a model runs (the daemon loads it only then, after its logs
    # were configured): torch's import gave its loggers stderr handlers of their own.
    adopt_library_loggers("torch")
    if requested == "cpu":
        return _cpu(precision, "forecast.device = cpu", None)
    env = environment or probe_environment()
    if not env.gpus:
        reason, fix = no_gpu_reason(env)
        if requested == "auto":
            return _cpu(precision, f"auto: {reason}", reason, env)
        raise DeviceUnavailable(
            f"forecast.device = {requested}, but {reason}. Fix: {fix}; or set "
            "forecast.device = auto (which may run on the CPU) or cpu"
        )
    candidates = _candidates(requested, env.gpus)
    problems: list[str] = []
    for gpu in candidates:
        verdict = assess_gpu(env, gpu, smoke)
        problem = verdict.problem(env.torch)
        if problem is None:
            return _gpu_choice(requested, precision, env, verdict)
        problems.append(problem)
    if requested != "auto":
        raise DeviceUnavailable(f"forecast.device = {requested} is unusable: {problems[0]}")
    reason = "; ".join(problems)
    return _cpu(precision, f"auto: no usable GPU: {reason}", f"no usable GPU: {reason}", env)


def _candidates(requested: str, gpus: Sequence[Gpu]) -> list[Gpu]:
    if requested == "auto":
        return list(gpus)
    index = torch.device(requested).index or 0
    if index >= len(gpus):
        raise DeviceUnavailable(f"{requested} asked for, but {len(gpus)} CUDA device(s) exist")
    return [gpus[index]]


def _gpu_choice(
    requested: str, precision: str, env: CudaEnvironment, verdict: GpuVerdict
) -> DeviceChoice:
    gpu = verdict.gpu
    kernels = verdict.kernels.describe() if verdict.kernels else f"ROCm {env.hip}"
    reason = (
        f"{requested}: {gpu.name} (compute capability {capability_text(gpu.capability)}) with "
        f"{env.build}: {kernels}; smoke test passed"
    )
    return DeviceChoice(
        str(torch.device("cuda", gpu.index)),
        _gpu_precision(precision, gpu, verdict.bf16),
        reason,
        None,
        gpu.name,
        gpu.capability,
        env.torch,
        env.cuda,
        verdict.bf16,
        kernels,
    )


def _cpu(
    precision: str, reason: str, fallback: str | None, env: CudaEnvironment | None = None
) -> DeviceChoice:
    if precision not in ("auto", "float32"):
        raise DeviceUnavailable(
            f"forecast.precision = {precision} runs on GPUs only; the CPU runs float32 "
            "(set forecast.precision = auto or float32)"
        )
    choice = DeviceChoice("cpu", "float32", reason, fallback, cpu_name())
    if env is None:
        return choice
    return replace(choice, torch=env.torch, cuda=env.cuda)


def _gpu_precision(requested: str, gpu: Gpu, bf16: bool) -> str:
    if requested == "auto":
        if bf16:
            return "bfloat16"
        return "float16" if gpu.capability >= (7, 0) else "float32"
    if requested == "bfloat16" and not bf16:
        raise DeviceUnavailable(
            f"{gpu.name} has no native bfloat16; set forecast.precision = float16 or auto"
        )
    return requested


def cpu_name() -> str:
    """The CPU's model name (Linux), else what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"
