"""Where a run trains, decided as the daemon decides (`trader doctor`'s checks: the build's
kernels for the GPU, a smoke test on it): `cuda` and `cuda:N` never fall back; `auto` may, and
says so first thing. Precision: bfloat16 autocast on GPUs with native bfloat16, float32
elsewhere (always on the CPU).

Under torchrun each process takes the GPU of its local rank (`cuda` or `auto` with GPUs), or
the CPU when there are none; rank 0 also examines every device for the evidence folder."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from trader.doctor.devices import DeviceFindings, examine_devices
from trader.forecast.device_choice import DeviceChoice
from trader.training.distributed import World


class TrainingDeviceRefused(Exception):
    """The device or precision asked for cannot train here; the message says why and the fix."""


@dataclass(frozen=True)
class TrainingDevice:
    choice: DeviceChoice  # precision: what the run trains in (float32 or bfloat16)
    findings: DeviceFindings

    @property
    def device(self) -> torch.device:
        return self.choice.device

    @property
    def autocast(self) -> torch.dtype | None:
        return torch.bfloat16 if self.choice.precision == "bfloat16" else None

    def start_line(self, world: World) -> str:
        c = self.choice
        if c.device.type == "cuda":
            capability = self.choice.describe()["capability"]
            where = f"{c.name}, compute capability {capability}, native bfloat16 {c.bf16}"
        else:
            where = c.name or "cpu"
        return (
            f"finetune on device={c.device} ({where}); torch {c.torch}, CUDA build "
            f"{c.cuda or 'none'}; precision {c.precision}; world size {world.size}"
        )

    def fallback_line(self) -> str | None:
        if self.choice.fallback is None:
            return None
        return f"WARNING: training on the CPU, not a GPU: {self.choice.fallback}"


def for_rank(requested: str, world: World) -> str:
    """The device this process asks for."""
    if not world.distributed or requested == "cpu":
        return requested
    if requested.startswith("cuda:"):
        raise TrainingDeviceRefused(
            f"--device {requested} names one GPU, but torchrun started {world.size} "
            "processes: give cuda (each process takes the GPU of its local rank), auto or cpu"
        )
    if requested == "cuda" or torch.cuda.device_count() > 0:
        return f"cuda:{world.local_rank}"
    return "cpu"


def decide(requested: str, precision: str, world: World) -> TrainingDevice:
    asked = for_rank(requested, world)
    findings = examine_devices(asked, "auto")
    if findings.choice is None:
        raise TrainingDeviceRefused(f"--device {asked}: {findings.error}")
    choice = findings.choice
    if choice.device.type == "cpu":
        if precision == "bfloat16":
            raise TrainingDeviceRefused(
                "finetune.precision = bfloat16 trains on GPUs only; the CPU trains in float32 "
                "(set finetune.precision = auto or float32)"
            )
        trained = "float32"
    elif precision == "auto":
        trained = "bfloat16" if choice.bf16 else "float32"
    elif precision == "bfloat16" and not choice.bf16:
        raise TrainingDeviceRefused(
            f"{choice.name} has no native bfloat16; set finetune.precision = float32 or auto"
        )
    else:
        trained = precision
    return TrainingDevice(replace(choice, precision=trained), findings)
