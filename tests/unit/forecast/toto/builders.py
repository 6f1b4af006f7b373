"""Tiny random Toto checkpoints in the published format, and bars to feed them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from trader.domain import Bar, Timeframe
from trader.forecast.protocol import ForecastRequest
from trader.forecast.toto.config import TotoConfig
from trader.forecast.toto.model import TotoModel

CONFIG = {
    "patch_size": 8,
    "stride": 8,
    "embed_dim": 32,
    "num_layers": 2,
    "num_heads": 2,
    "mlp_hidden_dim": 64,
    "dropout": 0.1,
    "spacewise_every_n_layers": 2,
    "spacewise_first": False,
    "scaler_cls": "<class 'model.scaler.CausalPatchStdMeanScaler'>",
    "output_distribution_classes": ["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
    "output_distribution_kwargs": {"k_components": 3},
    "use_memory_efficient_attention": True,
    "stabilize_with_global": True,
    "scale_factor_exponent": 10.0,
}
HOUR = Timeframe("1h")
START = datetime(2025, 1, 1, tzinfo=UTC)
LEVELS = (0.1, 0.4, 0.5, 0.6, 0.9)


def published(seed: int = 0) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    model = TotoModel(TotoConfig.from_json(CONFIG, "test"))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    return {name: t.contiguous() for name, t in model.state_dict().items()}


def write(
    directory: Path, tensors: dict[str, torch.Tensor], config: dict[str, Any] | None = None
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    save_file(tensors, directory / "model.safetensors")
    (directory / "config.json").write_text(json.dumps(config or CONFIG))
    return directory


def bars(symbol: str, n: int, seed: int, start: datetime = START) -> list[Bar]:
    generator = torch.Generator().manual_seed(seed)
    closes = (100 + torch.randn(n, generator=generator).cumsum(0)).tolist()
    return [
        Bar(symbol, HOUR, start + timedelta(hours=i), c, c + 0.5, c - 0.5, c, 10.0)
        for i, c in enumerate(closes)
    ]


def request(symbol: str, n: int, horizon: int, seed: int = 0) -> ForecastRequest:
    return ForecastRequest(symbol, bars(symbol, n, seed), horizon, LEVELS)


def write_checkpoint(directory: Path, seed: int = 0) -> Path:
    return write(directory, published(seed))
