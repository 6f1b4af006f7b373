"""The forecasters the settings ask for, built on the chosen device. A model that cannot be
built here (no weights, a checkpoint of another architecture, an unsupported runtime) is a
`ModelUnavailable` whose message says why and what to do."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trader.config.forecast_settings import ForecastSettings
from trader.forecast.baseline import BaselineForecaster
from trader.forecast.protocol import Forecaster, ModelUnavailable

if TYPE_CHECKING:  # torch loads only for the models that need it, never for the baseline
    from trader.forecast.device_choice import DeviceChoice

__all__ = ["ModelUnavailable", "build_forecaster"]


def build_forecaster(
    name: str,
    settings: ForecastSettings,
    device: DeviceChoice | None,
    *,
    model_path: Path | None = None,
    tokenizer_path: Path | None = None,
) -> Forecaster:
    """`model_path` / `tokenizer_path` override the repositories in the settings; `device`
    may be None for the baseline alone (it runs on the CPU, without torch). A folder that is
    itself the checkpoint, as `trader finetune` writes one (Toto: config.json +
    model.safetensors; Kronos: predictor/ and tokenizer/), serves as `model_path` or as
    `forecast.weights_dir`."""
    if name == "baseline":
        return BaselineForecaster(settings.baseline_lookback)
    if device is None:
        raise ModelUnavailable(f"{name}: no device was chosen for it")
    from trader.forecast.weights import CheckpointMismatch, WeightsUnavailable  # noqa: PLC0415

    sources = weights_sources(name, settings, model_path=model_path, tokenizer_path=tokenizer_path)
    token = settings.hf_token.get_secret_value() if settings.hf_token else None
    # Imported per model: each pulls in its own modules, and the baseline needs neither.
    try:
        if name == "toto":
            from trader.forecast.toto import load_toto_forecaster  # noqa: PLC0415

            (source,) = sources
            return load_toto_forecaster(
                source,
                settings=settings.toto,
                seed=settings.seed,
                device=device,
                weights_dir=settings.weights_dir,
                token=token,
                allow_download=settings.download,
            )
        if name == "toto2":
            from trader.forecast.toto2 import load_toto2_forecaster  # noqa: PLC0415

            (source,) = sources
            return load_toto2_forecaster(
                source,
                settings=settings.toto2,
                device=device,
                weights_dir=settings.weights_dir,
                token=token,
                allow_download=settings.download,
            )
        if name == "kronos":
            from trader.forecast.kronos import load_kronos  # noqa: PLC0415

            predictor, tokenizer = sources
            return load_kronos(
                predictor,
                tokenizer,
                settings=settings.kronos,
                seed=settings.seed,
                device=device.device,
                weights_dir=settings.weights_dir,
                token=token,
                allow_download=settings.download,
            )
    except (WeightsUnavailable, CheckpointMismatch, ValueError) as error:
        raise ModelUnavailable(f"{name}: {error}") from error
    raise ModelUnavailable(f"no forecaster is called {name!r}: toto, toto2, kronos or baseline")


def weights_sources(
    name: str,
    settings: ForecastSettings,
    *,
    model_path: Path | None = None,
    tokenizer_path: Path | None = None,
) -> tuple[str | Path, ...]:
    """What `name`'s loader is given to find its checkpoints (a folder or a repository, as
    `forecast.weights.locate` looks them up): Kronos's predictor then tokenizer; none for the
    baseline. `trader.forecast.provenance` reads their origin from the same places."""
    if name not in ("toto", "toto2", "kronos"):
        return ()
    from trader.forecast.weights import holds_checkpoint, kronos_pair  # noqa: PLC0415 - torch

    if name == "toto":
        own = settings.weights_dir if holds_checkpoint(settings.weights_dir) else None
        return (model_path or own or settings.toto.repo,)
    if name == "toto2":
        from trader.forecast.toto2.presets import repository  # noqa: PLC0415

        return (model_path or repository(settings.toto2.model),)
    pair = kronos_pair(model_path) or (None if model_path else kronos_pair(settings.weights_dir))
    if pair is not None:
        model_path, tokenizer_path = pair[0], tokenizer_path or pair[1]
    return (
        model_path or settings.kronos.repo,
        tokenizer_path or settings.kronos.tokenizer_repo,
    )
