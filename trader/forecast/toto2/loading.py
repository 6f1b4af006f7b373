"""A published Toto 2.0 checkpoint (`config.json` + `model.safetensors`, as the reference's
save_pretrained writes them), checked tensor by tensor, into a `Toto2Model` ready to run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from trader.forecast.toto2.config import Toto2Config
from trader.forecast.toto2.model import Toto2Model
from trader.forecast.toto2.presets import repository
from trader.forecast.weights import Checkpoint, check_state, load_checkpoint, locate

# Written beside random weights by `write_random_toto2` (and the conformance helpers): what
# labels every forecast made from them.
RANDOM_MARKER = "trader-random-weights.json"


@dataclass(frozen=True)
class LoadedToto2:
    model: Toto2Model
    directory: Path
    random: str | None  # the label of random weights, None for real ones


def model_from_checkpoint(checkpoint: Checkpoint) -> Toto2Model:
    source = str(checkpoint.directory)
    model = Toto2Model(Toto2Config.from_json(checkpoint.config, source))
    state = check_state(model.state_dict(), checkpoint.tensors, source)
    model.load_state_dict(state, strict=True)
    return model.eval().requires_grad_(False).fold()


def random_label(directory: Path) -> str | None:
    marker = directory / RANDOM_MARKER
    if not marker.is_file():
        return None
    try:
        label = json.loads(marker.read_text()).get("label")
    except (OSError, ValueError, AttributeError):
        label = None
    return str(label or f"RANDOM weights ({marker}): the forecasts mean nothing")


def load_toto2(
    model: str | Path,
    *,
    weights_dir: Path | None = None,
    token: str | None = None,
    allow_download: bool = False,
) -> LoadedToto2:
    """`model`: a size (4m, 22m, ...: its Datadog repository), a repository id or a directory."""
    directory = locate(
        repository(str(model)), weights_dir=weights_dir, token=token, allow_download=allow_download
    )
    return LoadedToto2(
        model_from_checkpoint(load_checkpoint(directory)), directory, random_label(directory)
    )
