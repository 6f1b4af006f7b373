"""What `trader finetune` was asked for, settings aside."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trader.market.files.options import AS_WRITTEN, ReadOptions


@dataclass(frozen=True)
class FinetuneRequest:
    model: str  # toto or kronos
    data: tuple[Path, ...]
    out: Path
    symbols: tuple[str, ...] = ()  # one per file, or none (each file's name says)
    base: str | None = None  # a folder, random:small, or None for the configured model
    device: str | None = None  # default: forecast.device
    max_steps: int | None = None
    epochs: int | None = None
    lora: bool = False
    qlora: bool = False
    resume: bool = False
    reading: ReadOptions = AS_WRITTEN
    argv: tuple[str, ...] = ()

    @property
    def adapters(self) -> bool:
        """LoRA adapters: --lora, or --qlora (LoRA on a 4-bit base)."""
        return self.lora or self.qlora
