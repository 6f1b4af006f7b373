"""Kronos (NeoQuasar Kronos-mini / small / base with its BSQ tokenizer), inference only, with a
KV cache; the same forecasts as the reference package `kronos-model-arch`, faster."""

from __future__ import annotations

from pathlib import Path

import torch

from trader.config.forecast_settings import KronosSettings
from trader.forecast.kronos.loading import load_model, load_tokenizer
from trader.forecast.kronos.predictor import KronosForecaster
from trader.forecast.kronos.sampling import Sampling
from trader.forecast.weights import locate

__all__ = ["KronosForecaster", "load_kronos"]


def load_kronos(
    model: str | Path,
    tokenizer: str | Path,
    *,
    settings: KronosSettings,
    seed: int,
    device: torch.device,
    weights_dir: Path | None = None,
    token: str | None = None,
    allow_download: bool = False,
) -> KronosForecaster:
    """The forecaster for a model and its tokenizer, each a local directory or a Hugging Face
    repository (looked up as `trader.forecast.weights.locate` does). float32 throughout."""
    if settings.runtime != "eager":
        # No silent fallback: compiled Kronos recompiles as its KV cache grows and as windows
        # slide (`trader bench compile --model kronos` shows it), so asking for it is an error.
        raise ValueError(
            f"Kronos runs eagerly; forecast.kronos.runtime = {settings.runtime!r} is refused: "
            "its KV-cached generation recompiles as the cache grows (see `trader bench "
            "compile --model kronos`). Set forecast.kronos.runtime = eager"
        )

    def find(repo: str | Path) -> Path:
        return locate(
            str(repo), weights_dir=weights_dir, token=token, allow_download=allow_download
        )

    return KronosForecaster(
        load_model(find(model)),
        load_tokenizer(find(tokenizer)),
        max_context=settings.max_context,
        sample_count=settings.sample_count,
        sampling=Sampling(settings.temperature, settings.top_k, settings.top_p),
        seed=seed,
        device=device,
    )
