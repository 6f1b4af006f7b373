"""Where the models run and at what precision, decided once at start-up and stated.

`cuda` never falls back: asked for and absent, it is an error that says how to fix it. `auto`
may fall back to the CPU, and the choice carries the reason so that callers say it aloud.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PRECISIONS = ("float32", "bfloat16", "float16")


class DeviceUnavailable(Exception):
    """The device or precision asked for cannot be used here; the message says why and the fix."""


@dataclass(frozen=True)
class DeviceChoice:
    device: torch.device
    precision: str  # one of PRECISIONS: the autocast dtype of the forward pass
    reason: str
    fallback: str | None = None  # why `auto` runs on the CPU, when it does

    def describe(self) -> dict[str, str | None]:
        return {
            "device": str(self.device),
            "precision": self.precision,
            "reason": self.reason,
            "fallback": self.fallback,
        }


def choose_device(requested: str, precision: str = "auto") -> DeviceChoice:
    """`requested` is auto, cpu, cuda or cuda:N; `precision` is auto or one of PRECISIONS."""
    build = f"torch {torch.__version__} (CUDA build {torch.version.cuda or 'none'})"
    if requested == "cpu":
        device, reason, fallback = torch.device("cpu"), "forecast.device = cpu", None
    elif torch.cuda.is_available():
        device = torch.device("cuda" if requested == "auto" else requested)
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise DeviceUnavailable(
                f"{requested} asked for, but {torch.cuda.device_count()} CUDA device(s) exist"
            )
        device = torch.device("cuda", index)
        name = torch.cuda.get_device_name(index)
        reason = f"{requested}: {name} with {build}"
        fallback = None
    elif requested == "auto":
        device, reason = torch.device("cpu"), f"auto: no usable CUDA device with {build}"
        fallback = "no CUDA device" if torch.version.cuda else "torch is a CPU-only build"
    else:
        raise DeviceUnavailable(
            f"forecast.device = {requested}, but {build} sees no CUDA device. Install a CUDA "
            "build of torch>=2.7 for this GPU and its driver, or set forecast.device = auto "
            "(which may run on the CPU) or cpu"
        )
    return DeviceChoice(device, _precision(precision, device), reason, fallback)


def _precision(requested: str, device: torch.device) -> str:
    if device.type == "cpu":
        if requested not in ("auto", "float32"):
            raise DeviceUnavailable(
                f"forecast.precision = {requested} runs on GPUs only; the CPU runs float32 "
                "(set forecast.precision = auto or float32)"
            )
        return "float32"
    native_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    if requested == "auto":
        if native_bf16:
            return "bfloat16"
        return "float16" if torch.cuda.get_device_capability(device) >= (7, 0) else "float32"
    if requested == "bfloat16" and not native_bf16:
        name = torch.cuda.get_device_name(device)
        raise DeviceUnavailable(
            f"{name} has no native bfloat16; set forecast.precision = float16 or auto"
        )
    return requested
