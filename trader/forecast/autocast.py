"""The precision a model's forward pass runs at: float32, or bf16/fp16 autocast on a GPU."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Autocast:
    device: torch.device
    dtype: torch.dtype

    @classmethod
    def of(cls, precision: str, device: torch.device) -> Autocast:
        """Refuses half precision on the CPU (it would be slower and less exact there)."""
        dtype = _DTYPES[precision]
        if dtype is not torch.float32 and device.type == "cpu":
            raise ValueError(f"{precision} runs on GPUs only; the CPU runs float32")
        return cls(device, dtype)

    def __call__(self) -> AbstractContextManager[Any]:
        if self.dtype is torch.float32:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.dtype)
