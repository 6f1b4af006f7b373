"""Tiny random Kronos models and tokenizers, their checkpoints, and bars to feed them."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import torch
from safetensors.torch import save_file

from trader.domain import Bar, Timeframe
from trader.forecast.kronos.config import ModelConfig, TokenizerConfig
from trader.forecast.kronos.model import KronosModel
from trader.forecast.kronos.predictor import KronosForecaster
from trader.forecast.kronos.sampling import Sampling
from trader.forecast.kronos.tokenizer import KronosTokenizer, unused_published_tensors

TOKENIZER = TokenizerConfig(
    d_in=6, d_model=32, n_heads=2, ff_dim=64, n_enc_layers=3, n_dec_layers=3,
    s1_bits=4, s2_bits=4, group_size=4,
)  # fmt: skip
MODEL = ModelConfig(
    s1_bits=4, s2_bits=4, n_layers=2, d_model=32, n_heads=2, ff_dim=64, learn_te=True
)
HOUR = Timeframe("1h")
M = TypeVar("M", KronosModel, KronosTokenizer)
T0 = datetime(2024, 3, 1, tzinfo=UTC)


def _randomised(module: M, seed: int) -> M:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            scale = 1 / math.sqrt(parameter.shape[-1])
            base = 1.0 if "norm" in name else 0.0
            parameter.copy_(base + scale * torch.randn(parameter.shape, generator=generator))
    return module.eval().requires_grad_(False)


def model(seed: int = 0, config: ModelConfig = MODEL) -> KronosModel:
    return _randomised(KronosModel(config), seed)


def tokenizer(seed: int = 1, config: TokenizerConfig = TOKENIZER) -> KronosTokenizer:
    return _randomised(KronosTokenizer(config), seed)


def forecaster(
    *,
    max_context: int = 64,
    sample_count: int = 1,
    sampling: Sampling | None = None,
    seed: int = 0,
) -> KronosForecaster:
    return KronosForecaster(
        model(),
        tokenizer(),
        max_context=max_context,
        sample_count=sample_count,
        sampling=sampling or Sampling(top_k=1),
        seed=seed,
        device=torch.device("cpu"),
    )


def published_tensors(module: KronosModel | KronosTokenizer) -> dict[str, torch.Tensor]:
    """The module's tensors as a published checkpoint holds them."""
    tensors = {name: t.clone() for name, t in module.state_dict().items()}
    if isinstance(module, KronosTokenizer):
        for name, shape in unused_published_tensors(module.config).items():
            tensors[name] = torch.zeros(shape)
    return tensors


def write_checkpoint(
    directory: Path,
    config: ModelConfig | TokenizerConfig,
    tensors: dict[str, torch.Tensor],
    extra_config: dict[str, object] | None = None,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    raw = dataclasses.asdict(config) | {"ffn_dropout_p": 0.1} | (extra_config or {})
    (directory / "config.json").write_text(json.dumps(raw))
    save_file(tensors, str(directory / "model.safetensors"))
    return directory


def bars(
    n: int, *, symbol: str = "SOL/USDT", seed: int = 0, start: datetime = T0, quote: bool = True
) -> list[Bar]:
    """A random walk of hourly bars starting at `start`."""
    generator = torch.Generator().manual_seed(seed)
    steps = torch.randn(n, 4, generator=generator, dtype=torch.float64)
    out = []
    price = 100.0
    for i in range(n):
        o = price
        c = o * math.exp(0.01 * float(steps[i, 0]))
        h = max(o, c) * (1 + 0.005 * abs(float(steps[i, 1])))
        low = min(o, c) * (1 - 0.005 * abs(float(steps[i, 2])))
        volume = 1000 * math.exp(0.5 * float(steps[i, 3]))
        out.append(
            Bar(symbol, HOUR, start + i * HOUR.duration, o, h, low, c, volume,
                volume * c if quote else None)
        )  # fmt: skip
        price = c
    return out
