"""Strict loading of the published Toto format: every tensor named and shaped, the config one
this implementation does."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from tests.unit.forecast.toto.builders import CONFIG, published, write, write_checkpoint
from trader.forecast.toto import load_toto
from trader.forecast.weights import CheckpointMismatch, WeightsUnavailable


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("toto"))


def test_the_published_names_load_with_their_values(checkpoint):
    model = load_toto(checkpoint)
    stored = load_file(checkpoint / "model.safetensors")
    for name, value in model.state_dict().items():
        assert torch.equal(value, stored[name]), name


def test_unfused_mlp_names_and_the_rotary_table_are_accepted(tmp_path, checkpoint):
    tensors = {
        name.replace(".mlp.0.w12.", ".mlp.0.").replace(".mlp.0.w3.", ".mlp.2."): value
        for name, value in published().items()
    }
    model = load_toto(checkpoint)
    tensors["model.transformer.rotary_emb.freqs"] = model.model.transformer.rotary.inv_freq.clone()
    loaded = load_toto(write(tmp_path, tensors))
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("drop", "missing: model.transformer.layers.1.attention.wO.weight"),
        ("add", "unexpected: model.transformer.layers.7.norm1.scale"),
        ("reshape", "misshapen: model.transformer.layers.1.attention.wO.weight (32, 16)"),
        ("rotary", "model.transformer.rotary_emb.freqs is not the rotary table"),
        ("nan", "non-finite values in model.transformer.layers.1.attention.wO.weight"),
    ],
)
def test_a_wrong_tensor_is_an_error_that_names_it(tmp_path, change, message):
    tensors = published()
    name = "model.transformer.layers.1.attention.wO.weight"
    if change == "drop":
        del tensors[name]
    elif change == "add":
        tensors["model.transformer.layers.7.norm1.scale"] = torch.ones(32)
    elif change == "reshape":
        tensors[name] = tensors[name][:, :16].contiguous()
    elif change == "nan":
        tensors[name][0, 0] = float("nan")
    else:
        tensors["model.transformer.rotary_emb.freqs"] = torch.ones(8)
    with pytest.raises(CheckpointMismatch, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_toto(write(tmp_path, tensors))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stride": 4}, "patch_size and stride differ"),
        ({"scaler_cls": "<class 'model.scaler.StdMeanScaler'>"}, "StdMeanScaler"),
        ({"num_heads": 5}, "embed_dim is not a multiple of num_heads"),
        ({"embed_dim": None}, "missing or malformed"),
    ],
)
def test_a_config_this_implementation_does_not_do_is_refused(tmp_path, change, message):
    with pytest.raises(CheckpointMismatch, match=message):
        load_toto(write(tmp_path, published(), CONFIG | change))


def test_no_weights_is_an_error_that_says_where_it_looked_and_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(WeightsUnavailable) as raised:
        load_toto("Datadog/Toto-Open-Base-1.0", weights_dir=tmp_path)
    text = str(raised.value)
    assert "Hugging Face cache" in text
    assert "huggingface-cli download Datadog/Toto-Open-Base-1.0" in text
