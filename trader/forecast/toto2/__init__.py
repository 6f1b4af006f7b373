"""Toto 2.0 (Datadog, 4M to 2.5B parameters), inference only: the published checkpoints, the
same quantiles as the reference package `toto-2`, block decoding against a static KV cache."""

from __future__ import annotations

from pathlib import Path

from trader.config.forecast_settings import Toto2Settings
from trader.forecast.device_choice import DeviceChoice
from trader.forecast.toto2.forecaster import Toto2Forecaster
from trader.forecast.toto2.loading import LoadedToto2, load_toto2
from trader.logging import get_logger

__all__ = ["LoadedToto2", "Toto2Forecaster", "load_toto2", "load_toto2_forecaster"]


def load_toto2_forecaster(
    model: str | Path,
    *,
    settings: Toto2Settings,
    device: DeviceChoice,
    weights_dir: Path | None = None,
    token: str | None = None,
    allow_download: bool = False,
) -> Toto2Forecaster:
    """The forecaster for a checkpoint: a size, a Hugging Face repository or a directory."""
    loaded = load_toto2(model, weights_dir=weights_dir, token=token, allow_download=allow_download)
    if loaded.random:  # said once at load, loudly: a daemon must not trade on them unknowingly
        get_logger("trader.forecast").warning(
            "toto2 weights are random", weights=str(loaded.directory), label=loaded.random
        )
    precision = device.precision if settings.precision == "auto" else settings.precision
    return Toto2Forecaster(
        loaded.model,
        variates=settings.variates,
        context=settings.context,
        decode_block=settings.decode_block,
        device=device.device,
        precision=precision,
        compiled=settings.runtime == "compile",
        compile_mode=settings.compile_mode,
        max_recompiles=settings.max_recompiles,
        random=loaded.random,
    )
