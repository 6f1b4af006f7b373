"""The daemon's device decision, examined: every GPU's kernel check and smoke test, the CPU's
smoke test, and what `forecast.device` resolves to (or why it cannot)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from trader.forecast.device import (
    CudaEnvironment,
    GpuVerdict,
    Smoke,
    assess_gpu,
    choose_device,
    default_smoke,
    no_gpu_reason,
    probe_environment,
)
from trader.forecast.device_choice import DeviceChoice, DeviceUnavailable
from trader.forecast.kernels import capability_text
from trader.forecast.smoke import SmokeReport


@dataclass(frozen=True)
class DeviceFindings:
    requested: str
    precision: str
    environment: CudaEnvironment
    gpus: tuple[GpuVerdict, ...]
    cpu_smoke: SmokeReport
    choice: DeviceChoice | None
    error: str | None  # why the requested device cannot be used (with the fix)

    @property
    def gpu_present(self) -> bool:
        """A GPU torch or the driver sees: running on the CPU then is a degradation."""
        return bool(self.environment.gpus or self.environment.driver)


def examine_devices(
    requested: str,
    precision: str,
    *,
    environment: CudaEnvironment | None = None,
    smoke: Smoke = default_smoke,
) -> DeviceFindings:
    env = environment or probe_environment()
    reports: dict[tuple[str, bool], SmokeReport] = {}

    def once(device: torch.device, bf16: bool) -> SmokeReport:
        key = (str(device), bf16)
        if key not in reports:
            reports[key] = smoke(device, bf16)
        return reports[key]

    gpus = tuple(assess_gpu(env, gpu, once) for gpu in env.gpus)
    choice, error = None, None
    try:
        choice = choose_device(requested, precision, environment=env, smoke=once)
    except DeviceUnavailable as unavailable:
        error = str(unavailable)
    return DeviceFindings(
        requested, precision, env, gpus, once(torch.device("cpu"), False), choice, error
    )


def device_text(findings: DeviceFindings) -> str:
    """`torch_cuda_check.txt`: what torch sees, each device's checks, and the decision."""
    env = findings.environment
    lines = [
        env.build + (f", ROCm {env.hip}" if env.hip else ""),
        f"arch list: {' '.join(env.arch_list) or '(none: no CUDA device initialised)'}",
        f"CUDA devices torch sees: {len(env.gpus)}",
    ]
    if env.unavailable:
        lines.append(f"torch error: {env.unavailable}")
    if not env.gpus:
        reason, fix = no_gpu_reason(env)
        lines += [f"why none: {reason}", f"fix: {fix}"]
    for driver_gpu in env.driver:
        capability = capability_text(driver_gpu.capability) if driver_gpu.capability else "?"
        lines.append(
            f"driver sees GPU {driver_gpu.index}: {driver_gpu.name}, compute capability "
            f"{capability}, driver {driver_gpu.driver}, {driver_gpu.memory}"
        )
    for verdict in findings.gpus:
        gpu = verdict.gpu
        memory = f", {gpu.memory_bytes / 2**30:.1f} GiB" if gpu.memory_bytes else ""
        lines += [
            "",
            f"cuda:{gpu.index}: {gpu.name}, compute capability "
            f"{capability_text(gpu.capability)}{memory}, native bfloat16: {verdict.bf16}",
            "  kernels: "
            + (verdict.kernels.describe() if verdict.kernels else "ROCm (arch rule n/a)"),
        ]
        if verdict.smoke is None:
            lines.append("  smoke test: not run (no kernels for this GPU)")
        else:
            lines += ["  smoke test:", *(f"    {line}" for line in verdict.smoke.lines())]
        problem = verdict.problem(env.torch)
        lines.append(f"  usable: {'yes' if problem is None else 'NO: ' + problem}")
    lines += ["", "cpu smoke test:", *(f"  {line}" for line in findings.cpu_smoke.lines())]
    lines += ["", f"decision for forecast.device = {findings.requested}:"]
    if findings.choice is not None:
        lines += [f"  {key}: {value}" for key, value in findings.choice.describe().items()]
    else:
        lines.append(f"  REFUSED: {findings.error}")
    return "\n".join(lines) + "\n"
