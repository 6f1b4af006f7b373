"""Toto's architecture, read from a published `config.json`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trader.forecast.dropout import is_rate
from trader.forecast.weights import CheckpointMismatch

# The class names Datadog's checkpoints carry, from the original training code.
CAUSAL_PATCH_SCALER = "<class 'model.scaler.CausalPatchStdMeanScaler'>"
STUDENT_T_MIXTURE = "<class 'model.distribution.MixtureOfStudentTsOutput'>"
# Not in config.json: the model's fixed numerics.
RMS_EPS = 1e-8
MIN_SCALE = 0.1
XPOS_SCALE_BASE = 512
ROPE_THETA = 10_000.0
MAX_CONTEXT = 4096


@dataclass(frozen=True)
class TotoConfig:
    patch_size: int = 64
    embed_dim: int = 768
    num_layers: int = 12
    num_heads: int = 12
    mlp_hidden_dim: int = 3072
    spacewise_every_n_layers: int = 12
    spacewise_first: bool = False
    k_components: int = 24
    stabilize_with_global: bool = True
    scale_factor_exponent: float = 10.0
    # Training only (eval mode never applies it): the rate toto-ts applies to the attention
    # weights and after the feed-forward; 0.1 in Toto-Open-Base-1.0's config.json.
    dropout: float = 0.1

    @property
    def head_dim(self) -> int:
        return self.embed_dim // self.num_heads

    @property
    def space_layers(self) -> tuple[bool, ...]:
        """Per layer: True for space-wise attention (across variates), else time-wise."""
        n = self.spacewise_every_n_layers
        if n == -1:
            return (False,) * self.num_layers
        block = [False] * (n - 1)
        block = [True, *block] if self.spacewise_first else [*block, True]
        return tuple(block * (self.num_layers // n))

    @classmethod
    def from_json(cls, config: Mapping[str, Any], source: str) -> TotoConfig:
        """The published config; anything this implementation does not do is refused."""

        def refuse(why: str) -> CheckpointMismatch:
            return CheckpointMismatch(f"{source}: config.json: {why}")

        if config.get("patch_size") != config.get("stride"):
            raise refuse("patch_size and stride differ (overlapping patches are not supported)")
        if config.get("scaler_cls", CAUSAL_PATCH_SCALER) != CAUSAL_PATCH_SCALER:
            raise refuse(f"scaler {config.get('scaler_cls')} is not supported")
        distributions = config.get("output_distribution_classes", [STUDENT_T_MIXTURE])
        if list(distributions) != [STUDENT_T_MIXTURE]:
            raise refuse(f"output distribution {distributions} is not supported")
        rate = config.get("dropout", 0.1)
        if not is_rate(rate):
            raise refuse(f"dropout {rate!r} is not a rate in [0, 1)")
        try:
            built = cls(
                patch_size=int(config["patch_size"]),
                embed_dim=int(config["embed_dim"]),
                num_layers=int(config["num_layers"]),
                num_heads=int(config["num_heads"]),
                mlp_hidden_dim=int(config["mlp_hidden_dim"]),
                spacewise_every_n_layers=int(config["spacewise_every_n_layers"]),
                spacewise_first=bool(config.get("spacewise_first", False)),
                k_components=int((config.get("output_distribution_kwargs") or {})["k_components"]),
                stabilize_with_global=bool(config.get("stabilize_with_global", True)),
                scale_factor_exponent=float(config.get("scale_factor_exponent", 10.0)),
                dropout=float(rate),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise refuse(f"missing or malformed {error}") from None
        if built.embed_dim % built.num_heads:
            raise refuse("embed_dim is not a multiple of num_heads")
        n = built.spacewise_every_n_layers
        if n != -1 and (n < 1 or built.num_layers % n):
            raise refuse("num_layers is not a multiple of spacewise_every_n_layers")
        return built
