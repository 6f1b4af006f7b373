"""The architecture hyper-parameters in the published `config.json` files (the keyword
arguments the reference classes were built with), read strictly: a missing or unknown key is an
error that names it, so a checkpoint of another architecture cannot load half-understood."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from trader.forecast.dropout import is_rate
from trader.forecast.weights import CheckpointMismatch

_DROPOUTS = ("ffn_dropout_p", "attn_dropout_p", "resid_dropout_p")
# The reference builds its dependency-aware layer with its default of 4 heads, whatever n_heads.
DEPENDENCY_HEADS = 4


@dataclass(frozen=True)
class DropoutRates:
    """Training-only rates, applied where the reference applies them (kronos-model-arch
    `model/module.py`): `attn` on the attention weights, `resid` after each block's attention
    projection, `ffn` after its feed-forward, `token` on the model's input embedding. Kept apart
    from the architecture: config.json names them `<name>_dropout_p`."""

    ffn: float = 0.0
    attn: float = 0.0
    resid: float = 0.0
    token: float = 0.0

    @classmethod
    def from_json(cls, raw: dict[str, Any], source: str, defaults: DropoutRates) -> DropoutRates:
        """The checkpoint's rates; a key it lacks takes the published rate in `defaults`."""
        rates = {}
        for field in dataclasses.fields(cls):
            key = f"{field.name}_dropout_p"
            value = raw.get(key, getattr(defaults, field.name))
            if not is_rate(value):
                raise CheckpointMismatch(f"{source}: config.json {key} = {value!r} is not valid")
            rates[field.name] = float(value)
        return cls(**rates)


# The rates of the published config.json files, for checkpoints that do not state theirs:
# NeoQuasar/Kronos-small (ffn and resid 0.25, attn and token 0.1) and Kronos-Tokenizer-base
# (none). The reference's dependency-aware layer is always built without dropout.
MODEL_DROPOUT = DropoutRates(ffn=0.25, attn=0.1, resid=0.25, token=0.1)
NO_DROPOUT = DropoutRates()
TOKENIZER_DROPOUT = NO_DROPOUT


@dataclass(frozen=True)
class TokenizerConfig:
    d_in: int
    d_model: int
    n_heads: int
    ff_dim: int
    n_enc_layers: int
    n_dec_layers: int
    s1_bits: int
    s2_bits: int
    group_size: int

    # Keys outside the architecture: the dropout rates (`DropoutRates`, training only) and the
    # quantizer's loss weights (training's objective).
    training_only = (*_DROPOUTS, "beta", "gamma0", "gamma", "zeta")

    @classmethod
    def from_json(cls, raw: dict[str, Any], source: str) -> TokenizerConfig:
        config = _parse(TokenizerConfig, raw, source)
        if config.s1_bits != config.s2_bits:
            # The reference decodes each half with codebook_dim // 2 bits: only equal halves
            # round-trip. Every published tokenizer has 10 + 10.
            raise CheckpointMismatch(f"{source}: s1_bits != s2_bits is not supported")
        return config

    @property
    def codebook_dim(self) -> int:
        return self.s1_bits + self.s2_bits


@dataclass(frozen=True)
class ModelConfig:
    s1_bits: int
    s2_bits: int
    n_layers: int
    d_model: int
    n_heads: int
    ff_dim: int
    learn_te: bool

    training_only = (*_DROPOUTS, "token_dropout_p")  # read by `DropoutRates`

    @classmethod
    def from_json(cls, raw: dict[str, Any], source: str) -> ModelConfig:
        return _parse(ModelConfig, raw, source)


_Config = TypeVar("_Config", TokenizerConfig, ModelConfig)


def _parse(cls: type[_Config], raw: dict[str, Any], source: str) -> _Config:
    names = [f.name for f in dataclasses.fields(cls)]
    missing = sorted(set(names) - set(raw))
    unknown = sorted(set(raw) - set(names) - set(cls.training_only))
    if missing or unknown:
        raise CheckpointMismatch(
            f"{source}: config.json does not describe a Kronos {cls.__name__[:-6].lower()}: "
            f"missing {missing or 'nothing'}, unknown {unknown or 'nothing'}"
        )
    values = {name: raw[name] for name in names}
    for name, value in values.items():
        valid = isinstance(value, bool) if name == "learn_te" else type(value) is int and value > 0
        if not valid:
            raise CheckpointMismatch(f"{source}: config.json {name} = {value!r} is not valid")
    config = cls(**values)
    # Half-split RoPE needs an even head width; the dependency layer always has 4 heads.
    widths = [(config.d_model, config.n_heads)]
    if isinstance(config, ModelConfig):
        widths.append((config.d_model, DEPENDENCY_HEADS))
    for width, heads in widths:
        if width % heads or (width // heads) % 2:
            raise CheckpointMismatch(f"{source}: d_model {width} does not split into {heads} heads")
    return config
