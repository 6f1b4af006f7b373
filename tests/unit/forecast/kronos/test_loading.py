"""Published checkpoints load strictly: every tensor named, shaped and finite, the config exact."""

from __future__ import annotations

import json

import pytest
import torch

from tests.unit.forecast.kronos import builders
from trader.config.forecast_settings import KronosSettings
from trader.forecast.kronos import KronosForecaster, load_kronos
from trader.forecast.kronos.loading import load_model, load_tokenizer
from trader.forecast.weights import CheckpointMismatch, WeightsUnavailable


@pytest.fixture
def model_tensors():
    return builders.published_tensors(builders.model())


@pytest.fixture
def tokenizer_tensors():
    return builders.published_tensors(builders.tokenizer())


def test_a_published_checkpoint_loads_with_its_values(tmp_path, model_tensors, tokenizer_tensors):
    model = load_model(builders.write_checkpoint(tmp_path / "m", builders.MODEL, model_tensors))
    tokenizer = load_tokenizer(
        builders.write_checkpoint(tmp_path / "t", builders.TOKENIZER, tokenizer_tensors)
    )
    assert model.config == builders.MODEL
    assert tokenizer.config == builders.TOKENIZER
    for module, tensors in ((model, model_tensors), (tokenizer, tokenizer_tensors)):
        state = module.state_dict()
        for name, value in state.items():
            assert torch.equal(value, tensors[name]), name
        assert not module.training
        assert not any(p.requires_grad for p in module.parameters())


def test_the_fixed_time_tables_load_under_their_nested_names(tmp_path):
    config = builders.MODEL.__class__(**{**builders.MODEL.__dict__, "learn_te": False})
    tensors = builders.published_tensors(builders.model(config=config))
    assert "time_emb.minute_embed.emb.weight" in tensors
    model = load_model(builders.write_checkpoint(tmp_path, config, tensors))
    assert not model.config.learn_te


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("transformer.1.ffn.w2.weight", "drop", "missing: transformer.1.ffn.w2.weight"),
        ("transformer.9.norm1.weight", "add", "unexpected: transformer.9.norm1.weight"),
        ("head.proj_s1.bias", "reshape", "misshapen: head.proj_s1.bias (8,) (expected (16,))"),
        ("embedding.emb_s2.weight", "nan", "non-finite values in embedding.emb_s2.weight"),
        ("norm.weight", "int", "wrong dtype: norm.weight (torch.int64)"),
    ],
)
def test_a_wrong_model_tensor_is_named(tmp_path, model_tensors, name, change, message):
    if change == "drop":
        del model_tensors[name]
    elif change == "add":
        model_tensors[name] = torch.ones(32)
    elif change == "reshape":
        model_tensors[name] = torch.zeros(8)
    elif change == "nan":
        model_tensors[name][3, 1] = float("nan")
    else:
        model_tensors[name] = torch.ones(32, dtype=torch.long)
    directory = builders.write_checkpoint(tmp_path, builders.MODEL, model_tensors)
    with pytest.raises(CheckpointMismatch, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_model(directory)


def test_the_tokenizer_needs_its_published_training_tensors(tmp_path, tokenizer_tensors):
    """They are never read, but a checkpoint without them is not the published format."""
    del tokenizer_tensors["tokenizer.bsq.basis"]
    directory = builders.write_checkpoint(tmp_path, builders.TOKENIZER, tokenizer_tensors)
    with pytest.raises(CheckpointMismatch, match=r"missing: tokenizer\.bsq\.basis"):
        load_tokenizer(directory)


def test_a_missing_tokenizer_block_is_named(tmp_path, tokenizer_tensors):
    del tokenizer_tensors["decoder.1.self_attn.rotary.inv_freq"]
    directory = builders.write_checkpoint(tmp_path, builders.TOKENIZER, tokenizer_tensors)
    with pytest.raises(CheckpointMismatch, match=r"decoder\.1\.self_attn\.rotary\.inv_freq"):
        load_tokenizer(directory)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"num_sectors": 86}, r"unknown \['num_sectors'\]"),
        ({"n_heads": 3}, "does not split into 3 heads"),
        ({"learn_te": 1}, "learn_te = 1 is not valid"),
        ({"d_model": "32"}, "d_model = '32' is not valid"),
    ],
)
def test_a_config_of_another_architecture_is_refused(tmp_path, model_tensors, extra, message):
    directory = builders.write_checkpoint(tmp_path, builders.MODEL, model_tensors, extra)
    with pytest.raises(CheckpointMismatch, match=message):
        load_model(directory)


def test_a_missing_config_key_is_named(tmp_path, model_tensors):
    directory = builders.write_checkpoint(tmp_path, builders.MODEL, model_tensors)
    raw = json.loads((directory / "config.json").read_text())
    del raw["ff_dim"]
    (directory / "config.json").write_text(json.dumps(raw))
    with pytest.raises(CheckpointMismatch, match=r"missing \['ff_dim'\]"):
        load_model(directory)


def test_a_tokenizer_checkpoint_is_not_a_model(tmp_path, tokenizer_tensors):
    directory = builders.write_checkpoint(tmp_path, builders.TOKENIZER, tokenizer_tensors)
    with pytest.raises(CheckpointMismatch, match="does not describe a Kronos model"):
        load_model(directory)


def test_load_kronos_finds_both_in_the_weights_directory(
    tmp_path, model_tensors, tokenizer_tensors
):
    builders.write_checkpoint(tmp_path / "Kronos-tiny", builders.MODEL, model_tensors)
    builders.write_checkpoint(
        tmp_path / "Kronos-Tokenizer-tiny", builders.TOKENIZER, tokenizer_tensors
    )
    forecaster = load_kronos(
        "NeoQuasar/Kronos-tiny",
        "NeoQuasar/Kronos-Tokenizer-tiny",
        settings=KronosSettings(max_context=32, sample_count=4, top_k=5),
        seed=3,
        device=torch.device("cpu"),
        weights_dir=tmp_path,
    )
    assert isinstance(forecaster, KronosForecaster)
    assert forecaster.name == "kronos"
    assert (forecaster.max_context, forecaster.sample_count, forecaster.seed) == (32, 4, 3)
    assert forecaster.sampling.top_k == 5


def test_load_kronos_says_where_it_looked(tmp_path):
    with pytest.raises(WeightsUnavailable, match="no weights for NeoQuasar/Kronos-nowhere"):
        load_kronos(
            "NeoQuasar/Kronos-nowhere",
            "NeoQuasar/Kronos-Tokenizer-nowhere",
            settings=KronosSettings(),
            seed=0,
            device=torch.device("cpu"),
            weights_dir=tmp_path,
        )


def test_a_compiled_kronos_is_refused_not_silently_run_eagerly(tmp_path):
    with pytest.raises(ValueError, match=r"forecast\.kronos\.runtime = 'compile' is refused"):
        load_kronos(
            tmp_path,
            tmp_path,
            settings=KronosSettings(runtime="compile"),
            seed=0,
            device=torch.device("cpu"),
        )


def test_a_tokenizer_of_other_bits_does_not_pair_with_the_model():
    config = builders.TOKENIZER.__class__(
        **{**builders.TOKENIZER.__dict__, "s1_bits": 5, "s2_bits": 5}
    )
    with pytest.raises(ValueError, match="do not match the model"):
        KronosForecaster(
            builders.model(),
            builders.tokenizer(config=config),
            max_context=8,
            sample_count=1,
            sampling=builders.Sampling(),
            seed=0,
            device=torch.device("cpu"),
        )
