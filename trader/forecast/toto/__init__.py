"""Toto (Datadog Toto-Open-Base-1.0), inference only: the published checkpoint, the same
distributions as the reference package `toto-ts`, the context encoded once per symbol and the
sample paths decoded against a static KV cache."""

from __future__ import annotations

from pathlib import Path

from trader.config.forecast_settings import TotoSettings
from trader.forecast.device_choice import DeviceChoice
from trader.forecast.toto.forecaster import TotoForecaster
from trader.forecast.toto.loading import load_toto

__all__ = ["TotoForecaster", "load_toto", "load_toto_forecaster"]


def load_toto_forecaster(
    model: str | Path,
    *,
    settings: TotoSettings,
    seed: int,
    device: DeviceChoice,
    weights_dir: Path | None = None,
    token: str | None = None,
    allow_download: bool = False,
) -> TotoForecaster:
    """The forecaster for a checkpoint: a local directory or a Hugging Face repository."""
    return TotoForecaster(
        load_toto(model, weights_dir=weights_dir, token=token, allow_download=allow_download),
        variates=settings.variates,
        num_samples=settings.num_samples,
        seed=seed,
        device=device.device,
        precision=device.precision,
        compiled=settings.runtime == "compile",
        compile_mode=settings.compile_mode,
        max_recompiles=settings.max_recompiles,
    )
