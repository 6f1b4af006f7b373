"""Published checkpoints (`config.json` + `model.safetensors`) to modules, strictly: every tensor
the architecture has must be there with its shape, nothing else may be, and every value must be
finite; an error names the offending tensors."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trader.forecast.kronos.config import (
    MODEL_DROPOUT,
    TOKENIZER_DROPOUT,
    DropoutRates,
    ModelConfig,
    TokenizerConfig,
)
from trader.forecast.kronos.model import KronosModel
from trader.forecast.kronos.tokenizer import KronosTokenizer, unused_published_tensors
from trader.forecast.weights import CheckpointMismatch, check_state, load_checkpoint


def load_tokenizer(directory: Path) -> KronosTokenizer:
    checkpoint = load_checkpoint(directory)
    raw = _object(checkpoint.config, directory)
    config = TokenizerConfig.from_json(raw, str(directory))
    tokenizer = KronosTokenizer(
        config, DropoutRates.from_json(raw, str(directory), TOKENIZER_DROPOUT)
    )
    _fill(tokenizer, checkpoint.tensors, unused_published_tensors(config), directory)
    return tokenizer


def load_model(directory: Path) -> KronosModel:
    checkpoint = load_checkpoint(directory)
    raw = _object(checkpoint.config, directory)
    config = ModelConfig.from_json(raw, str(directory))
    model = KronosModel(config, DropoutRates.from_json(raw, str(directory), MODEL_DROPOUT))
    _fill(model, checkpoint.tensors, {}, directory)
    return model


def _object(config: Any, directory: Path) -> dict[str, Any]:
    if not isinstance(config, dict):
        raise CheckpointMismatch(f"{directory}: config.json is not a JSON object")
    return config


def _fill(
    module: nn.Module,
    tensors: Mapping[str, torch.Tensor],
    unused: Mapping[str, torch.Size],
    directory: Path,
) -> None:
    """Load `tensors` into `module`; `unused` are published tensors inference does not read
    (checked for presence and shape, then dropped)."""
    source = str(directory / "model.safetensors")
    module.load_state_dict(check_state(module.state_dict(), tensors, source, unused), strict=True)
    module.eval().requires_grad_(False)
