"""Loading a Toto 2.0 checkpoint refuses what is not the architecture, naming the key: a
missing tensor, a misshapen one, an unknown config field; a preset names its source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from trader.forecast.random_weights import write_random_toto2
from trader.forecast.toto2 import load_toto2
from trader.forecast.toto2.config import Toto2Config
from trader.forecast.toto2.presets import PRESETS, preset_config
from trader.forecast.weights import CheckpointMismatch

KEY = "transformer.layers.1.attn.in_proj.weight"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_random_toto2(tmp_path_factory.mktemp("toto2") / "small", "small").directory


def copy(source: Path, target: Path, tensors: dict[str, torch.Tensor] | None = None) -> Path:
    target.mkdir()
    (target / "config.json").write_text((source / "config.json").read_text())
    save_file(tensors or load_file(source / "model.safetensors"), target / "model.safetensors")
    return target


def test_random_weights_load_and_say_so(checkpoint: Path) -> None:
    loaded = load_toto2(checkpoint)
    assert loaded.random is not None
    assert "RANDOM" in loaded.random
    assert loaded.model.folded


def test_a_missing_tensor_is_named(checkpoint: Path, tmp_path: Path) -> None:
    tensors = load_file(checkpoint / "model.safetensors")
    del tensors[KEY]
    with pytest.raises(CheckpointMismatch, match=rf"missing: {KEY}"):
        load_toto2(copy(checkpoint, tmp_path / "c", tensors))


def test_a_wrong_shape_is_named(checkpoint: Path, tmp_path: Path) -> None:
    tensors = load_file(checkpoint / "model.safetensors")
    tensors[KEY] = tensors[KEY][:-1]
    with pytest.raises(CheckpointMismatch, match=rf"misshapen: {KEY} \("):
        load_toto2(copy(checkpoint, tmp_path / "c", tensors))


def test_an_unknown_config_field_is_named(checkpoint: Path, tmp_path: Path) -> None:
    target = copy(checkpoint, tmp_path / "c")
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps(config | {"rope_scaling": 2.0}))
    with pytest.raises(CheckpointMismatch, match="unknown field 'rope_scaling'"):
        load_toto2(target)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_output_patches": 2}, "num_output_patches = 2 is not supported"),
        ({"d_model": "wide"}, "d_model = 'wide' is not a whole number >= 1"),
        ({"use_xpos": 1}, "use_xpos = 1 is not true or false"),
        ({"num_layers": 6}, "num_layers is not a multiple of layer_group_size"),
    ],
)
def test_config_values_it_cannot_run_are_named(change: dict, message: str) -> None:
    with pytest.raises(CheckpointMismatch, match=message):
        Toto2Config.from_json(preset_config("4m") | change, "here")
    with pytest.raises(CheckpointMismatch, match="missing field 'patch_size'"):
        Toto2Config.from_json(
            {k: v for k, v in preset_config("4m").items() if k != "patch_size"}, "here"
        )


def test_presets_say_where_their_values_come_from() -> None:
    assert Toto2Config.from_json(preset_config("4m"), "4m").to_json() == preset_config("4m")
    assert "published config.json" in PRESETS["4m"].source
    assert "reconstructed" in PRESETS["22m"].source
    for size in ("1B", "2.5B", "2.5B-FT"):
        assert PRESETS[size].config is None
        assert PRESETS[size].source == "not found"
        with pytest.raises(ValueError, match="was not found"):
            preset_config(size)
