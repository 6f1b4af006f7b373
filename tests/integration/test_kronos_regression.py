"""Our Kronos-small, on the published weights, against the outputs the published model produced
for the first 256 / 512 bars of XSHG_600977_5min.csv (tests/data/README.md): greedy, 8 bars,
max_context 512, relative tolerance 1e-5.

The weights are read from TRADER_KRONOS_SMALL_DIR and TRADER_KRONOS_TOKENIZER_DIR (directories
holding config.json and model.safetensors) or from the Hugging Face cache at the recorded
revisions; where they are in neither place, the test skips and says so."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tests.integration.kronos_reference import COLUMNS, bars, read_bars
from tests.recorded import KRONOS_REGRESSION, XSHG_600977_5MIN
from trader.forecast.kronos.loading import load_model, load_tokenizer
from trader.forecast.kronos.predictor import KronosForecaster
from trader.forecast.kronos.sampling import Sampling
from trader.forecast.protocol import ForecastRequest
from trader.forecast.weights import FILES

pytestmark = pytest.mark.integration

# (environment variable, repository, revision, sha256 prefix of model.safetensors)
MODEL = (
    "TRADER_KRONOS_SMALL_DIR",
    "NeoQuasar/Kronos-small",
    "901c26c1332695a2a8f243eb2f37243a37bea320",
    "b082dfcb",
)
TOKENIZER = (
    "TRADER_KRONOS_TOKENIZER_DIR",
    "NeoQuasar/Kronos-Tokenizer-base",
    "0e0117387f39004a9016484a186a908917e22426",
    "59d85f6a",
)


def published(variable: str, repo: str, revision: str, sha256: str) -> Path:
    if variable in os.environ:
        directory = Path(os.environ[variable])
        if not all((directory / name).is_file() for name in FILES):
            pytest.fail(f"{variable}={directory} does not hold {' and '.join(FILES)}")
    else:
        from huggingface_hub import snapshot_download  # noqa: PLC0415
        from huggingface_hub.errors import LocalEntryNotFoundError  # noqa: PLC0415

        try:
            directory = Path(
                snapshot_download(
                    repo, revision=revision, allow_patterns=list(FILES), local_files_only=True
                )
            )
        except (LocalEntryNotFoundError, OSError, ValueError):
            pytest.skip(
                f"the published {repo} weights (revision {revision[:8]}) are not in the Hugging "
                f"Face cache and {variable} is not set"
            )
    digest = hashlib.sha256((directory / "model.safetensors").read_bytes()).hexdigest()
    if not digest.startswith(sha256):
        pytest.fail(f"{directory} holds other weights than {repo}@{revision[:8]} ({digest[:8]})")
    return directory


@pytest.fixture(scope="module")
def forecaster() -> KronosForecaster:
    return KronosForecaster(
        load_model(published(*MODEL)),
        load_tokenizer(published(*TOKENIZER)),
        max_context=512,
        sample_count=1,
        sampling=Sampling(temperature=1.0, top_k=1, top_p=1.0),
        seed=123,
        device=torch.device("cpu"),
    )


@pytest.mark.parametrize("context", [256, 512])
def test_greedy_forecasts_match_the_published_model(forecaster, context):
    expected = pd.read_csv(
        KRONOS_REGRESSION / f"regression_output_{context}.csv", parse_dates=["timestamps"]
    )
    window = bars(read_bars(XSHG_600977_5MIN).iloc[:context])
    [forecast] = forecaster.forecast([ForecastRequest("600977/CNY", window, 8, [0.5])])
    [paths] = forecaster.paths([ForecastRequest("600977/CNY", window, 8, [0.5])])
    # The outputs were stamped with the bars that followed, every 5 minutes: as ours are.
    starts = [forecast.step_end(k) - window[-1].timeframe.duration for k in range(8)]
    assert [s.replace(tzinfo=None) for s in starts] == list(expected["timestamps"])
    np.testing.assert_allclose(paths[0].numpy(), expected[COLUMNS].to_numpy(), rtol=1e-5)
    assert forecast.mean["close"] == pytest.approx(list(expected["close"]), rel=1e-5)
