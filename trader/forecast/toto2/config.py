"""Toto 2.0's architecture, read from a published `config.json` (the fields of the reference's
`Toto2ModelConfig`). A field the reference does not know, a missing one, or a value this
implementation does not run is an error that names the field."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trader.forecast.weights import CheckpointMismatch

# Not in config.json: the reference's fixed numerics.
ROPE_THETA = 10_000
ROPE_TABLE = 8192  # positions (patches) the rotary tables cover
XPOS_SCALE_BASE = 256
MIN_SCALE = 1e-6  # the causal scaler's floor
KNOTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the quantiles the head predicts
# Fields config.json carries that inference reads as given or checks (see `from_json`).
_REQUIRED = (
    "patch_size", "d_model", "num_heads", "num_layers", "layer_group_size",
    "num_variate_layers_per_group", "variate_layer_first", "residual_attn_ratio",
)  # fmt: skip


@dataclass(frozen=True)
class Toto2Config:
    patch_size: int
    d_model: int
    num_heads: int
    num_layers: int
    layer_group_size: int
    num_variate_layers_per_group: int
    variate_layer_first: bool
    residual_attn_ratio: float
    norm_eps: float = 5e-5
    attn_bias: bool = False
    mlp_bias: bool = False
    d_ff: int | None = None
    qk_dim: int | None = None
    v_dim: int | None = None
    num_groups: int | None = None
    residual_mult: float = 1.0
    qk_norm: bool = True
    norm_include_weight: bool = False
    qk_norm_include_weight: bool | None = None
    per_dim_scale: bool = False
    use_xpos: bool = False

    @property
    def ff_dim(self) -> int:
        return self.d_ff or (int(4 * self.d_model * 2 / 3) + 7) // 8 * 8

    @property
    def head_dim(self) -> int:
        return self.qk_dim or self.d_model // self.num_heads

    @property
    def value_dim(self) -> int:
        return self.v_dim or self.head_dim

    @property
    def kv_heads(self) -> int:
        return self.num_groups or self.num_heads

    @property
    def qk_weight(self) -> bool:
        return (
            self.norm_include_weight
            if self.qk_norm_include_weight is None
            else (self.qk_norm_include_weight)
        )

    @property
    def rotary_dim(self) -> int:
        """RoPE turns the first half of each head (the reference's partial factor 0.5)."""
        return int(self.head_dim * 0.5)

    @property
    def variate_layers(self) -> tuple[bool, ...]:
        """Per layer: True for attention across variates, else causal attention over time."""
        group, variate = self.layer_group_size, self.num_variate_layers_per_group
        if self.variate_layer_first:
            return tuple(i % group < variate for i in range(self.num_layers))
        return tuple(i % group >= group - variate for i in range(self.num_layers))

    @property
    def time_layers(self) -> int:
        return sum(not v for v in self.variate_layers)

    @classmethod
    def from_json(cls, config: Mapping[str, Any], source: str) -> Toto2Config:
        def refuse(why: str) -> CheckpointMismatch:
            return CheckpointMismatch(f"{source}: config.json: {why}")

        fields = {f.name for f in dataclasses.fields(cls)}
        # Written by the reference, read back as fixed values: checked, not configurable.
        fixed: dict[str, Any] = {"dropout_p": 0.0, "pre_norm": True, "num_output_patches": 1}
        unknown = sorted(set(config) - fields - set(fixed) - {"heads_per_group"})
        if unknown:
            raise refuse(f"unknown field {unknown[0]!r}" + _more(unknown))
        missing = [name for name in _REQUIRED if name not in config]
        if missing:
            raise refuse(f"missing field {missing[0]!r}" + _more(missing))
        for name, value in fixed.items():
            if name in config and config[name] != value:
                raise refuse(f"{name} = {config[name]!r} is not supported (only {value!r})")
        try:
            built = cls(**{name: config[name] for name in fields if name in config})
        except TypeError as error:
            raise refuse(str(error)) from None
        for name in fields:
            _check_type(built, name, refuse)
        if built.num_layers % built.layer_group_size:
            raise refuse("num_layers is not a multiple of layer_group_size")
        if built.num_heads < 1 or built.d_model % built.num_heads:
            raise refuse("d_model is not a multiple of num_heads")
        if built.num_heads % built.kv_heads:
            raise refuse("num_heads is not a multiple of num_groups")
        if "heads_per_group" in config and config["heads_per_group"] != (
            built.num_heads // built.kv_heads
        ):
            raise refuse("heads_per_group is not num_heads / num_groups")
        if built.rotary_dim % 2:
            raise refuse("qk_dim / 2 is odd (RoPE turns pairs)")
        return built

    def to_json(self) -> dict[str, Any]:
        """config.json as the reference's save_pretrained writes it."""
        return dataclasses.asdict(self) | {
            "d_ff": self.ff_dim,
            "qk_dim": self.head_dim,
            "v_dim": self.value_dim,
            "num_groups": self.kv_heads,
            "heads_per_group": self.num_heads // self.kv_heads,
            "qk_norm_include_weight": self.qk_weight,
            "dropout_p": 0.0,
            "pre_norm": True,
            "num_output_patches": 1,
        }


def _more(names: list[str]) -> str:
    return f" (and {', '.join(repr(n) for n in names[1:])})" if len(names) > 1 else ""


_FLAGS = {
    "variate_layer_first", "attn_bias", "mlp_bias", "qk_norm", "norm_include_weight",
    "per_dim_scale", "use_xpos", "qk_norm_include_weight",
}  # fmt: skip
_REALS = {"norm_eps", "residual_mult", "residual_attn_ratio"}
_OPTIONAL = {"d_ff", "qk_dim", "v_dim", "num_groups", "qk_norm_include_weight"}


def _check_type(config: Toto2Config, name: str, refuse: Callable[[str], Exception]) -> None:
    value = getattr(config, name)
    if value is None and name in _OPTIONAL:
        return
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if name in _FLAGS:
        ok, expected = isinstance(value, bool), "true or false"
    elif name in _REALS:
        ok, expected = number and value > 0, "a positive number"
    else:
        least = 0 if name == "num_variate_layers_per_group" else 1
        ok, expected = number and isinstance(value, int) and value >= least, "a whole number"
        expected += " >= 0" if least == 0 else " >= 1"
    if not ok:
        raise refuse(f"{name} = {value!r} is not {expected}")
