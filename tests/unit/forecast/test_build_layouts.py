"""A folder that is itself a checkpoint, as `trader finetune` writes one (Toto: config.json +
model.safetensors; Kronos: predictor/ and tokenizer/), loads as `--weights` and as
`forecast.weights_dir`; another model's folder is refused by name, never half-loaded."""

from __future__ import annotations

import pytest

from trader.config.forecast_settings import ForecastSettings
from trader.forecast.build import ModelUnavailable, build_forecaster
from trader.forecast.device import choose_device
from trader.forecast.random_weights import write_random_kronos, write_random_toto

CPU = choose_device("cpu")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    write_random_toto(root / "toto", "small")
    write_random_kronos(root / "kronos", "small")
    return root


@pytest.mark.parametrize("model", ["toto", "kronos"])
def test_a_run_folder_loads_as_weights_and_as_the_weights_dir(folders, model):
    settings = ForecastSettings(device="cpu", download=False)
    given = build_forecaster(model, settings, CPU, model_path=folders / model)
    configured = build_forecaster(
        model, settings.model_copy(update={"weights_dir": folders / model}), CPU
    )
    assert given.name == configured.name == model


def test_a_folder_of_the_other_model_is_refused(folders):
    settings = ForecastSettings(device="cpu", download=False)
    with pytest.raises(ModelUnavailable, match="kronos"):
        build_forecaster("kronos", settings, CPU, model_path=folders / "toto")
