"""Where the models run and at what precision, as `trader.forecast.device.choose_device` decided
it, in a module that does not load torch: the baseline's daemon describes its device (the CPU)
without it, and starts a couple of seconds sooner."""

from __future__ import annotations

import runpy
import sys
from dataclasses import dataclass, field
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from trader.forecast.kernels import capability_text

if TYPE_CHECKING:
    from torch import device as TorchDevice


class DeviceUnavailable(Exception):
    """The device or precision asked for cannot be used here; the message says why and the fix."""


@cache
def torch_build() -> tuple[str, str | None]:
    """torch's version and the CUDA version it was built for (None: a CPU build), as torch
    says them (`torch.__version__`, `torch.version.cuda`), without loading torch where it is
    not loaded yet: its generated `torch/version.py` is read on its own (a plain file of
    constants, two dozen lines), which takes a millisecond where `import torch` takes two
    seconds."""
    loaded = sys.modules.get("torch")
    if loaded is not None:
        return loaded.__version__, loaded.version.cuda
    spec = find_spec("torch")
    if spec is None or spec.origin is None:
        raise ImportError("torch is not installed (a dependency of trader: reinstall it)")
    constants = runpy.run_path(str(Path(spec.origin).with_name("version.py")))
    return str(constants["__version__"]), constants.get("cuda")


def _torch_version() -> str:
    return torch_build()[0]


def _cuda_build() -> str | None:
    return torch_build()[1]


@dataclass(frozen=True)
class DeviceChoice:
    where: str  # torch's name of the device: "cpu", "cuda:0"
    precision: str  # one of PRECISIONS: the autocast dtype of the forward pass
    reason: str
    fallback: str | None = None  # why `auto` runs on the CPU, when it does
    name: str | None = None  # the GPU's (or CPU's) name
    capability: tuple[int, int] | None = None  # the GPU's compute capability
    torch: str = field(default_factory=_torch_version)
    cuda: str | None = field(default_factory=_cuda_build)  # CUDA version torch was built for
    bf16: bool | None = None  # native bfloat16 on the GPU; None on the CPU (float32 there)
    kernels: str | None = None  # which of the build's kernels serve the GPU

    @property
    def device(self) -> TorchDevice:
        import torch  # noqa: PLC0415 - the baseline's choice never loads it

        return torch.device(self.where)

    def describe(self) -> dict[str, str | None]:
        """A flat record for the start-up log line, metric labels and the status."""
        return {
            "device": self.where,
            "precision": self.precision,
            "reason": self.reason,
            "fallback": self.fallback,
            "name": self.name,
            "capability": None if self.capability is None else capability_text(self.capability),
            "torch": self.torch,
            "cuda": self.cuda,
            "bf16": None if self.bf16 is None else str(self.bf16).lower(),
            "kernels": self.kernels,
        }
