"""Stand-ins for `trader doctor`'s inference smoke and `trader bench compile` where no real
weights or data are at hand: random weights in the published checkpoint format, built from our
own model classes, and random-walk bars. The weights load through the same strict path as real
ones; their forecasts mean nothing, but the time and memory they take are the architecture's.
Whatever uses them says so."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save
from torch import nn

from trader.config.forecast_settings import ForecastSettings
from trader.domain import Bar, Timeframe
from trader.forecast.kronos.config import ModelConfig, TokenizerConfig
from trader.forecast.kronos.model import KronosModel
from trader.forecast.kronos.tokenizer import KronosTokenizer, unused_published_tensors
from trader.forecast.provenance import describe, metadata
from trader.forecast.toto.config import CAUSAL_PATCH_SCALER, STUDENT_T_MIXTURE, TotoConfig
from trader.forecast.toto.model import TotoModel
from trader.forecast.toto2.config import Toto2Config
from trader.forecast.toto2.loading import RANDOM_MARKER
from trader.forecast.toto2.model import Toto2Model
from trader.forecast.toto2.presets import preset_config, repository
from trader.forecast.weights import WeightsUnavailable, locate
from trader.private_files import write_file

# Datadog/Toto-Open-Base-1.0's config.json.
TOTO_PUBLISHED: dict[str, Any] = {
    "patch_size": 64,
    "stride": 64,
    "embed_dim": 768,
    "num_layers": 12,
    "num_heads": 12,
    "mlp_hidden_dim": 3072,
    "dropout": 0.1,
    "spacewise_every_n_layers": 12,
    "spacewise_first": False,
    "scaler_cls": CAUSAL_PATCH_SCALER,
    "output_distribution_classes": [STUDENT_T_MIXTURE],
    "output_distribution_kwargs": {"k_components": 24},
    "use_memory_efficient_attention": True,
    "stabilize_with_global": True,
    "scale_factor_exponent": 10.0,
}
# Small enough to compile in seconds on a CPU, with the same structure (two space-wise layers).
TOTO_SMALL = TOTO_PUBLISHED | {
    "patch_size": 16,
    "stride": 16,
    "embed_dim": 64,
    "num_layers": 4,
    "num_heads": 4,
    "mlp_hidden_dim": 128,
    "spacewise_every_n_layers": 2,
    "output_distribution_kwargs": {"k_components": 4},
}
# NeoQuasar/Kronos-small with Kronos-Tokenizer-base, and a small one.
KRONOS_PUBLISHED = (
    ModelConfig(
        s1_bits=10, s2_bits=10, n_layers=8, d_model=512, n_heads=8, ff_dim=1024, learn_te=True
    ),
    TokenizerConfig(
        d_in=6, d_model=256, n_heads=4, ff_dim=512, n_enc_layers=4, n_dec_layers=4,
        s1_bits=10, s2_bits=10, group_size=4,
    ),
)  # fmt: skip
KRONOS_SMALL = (
    ModelConfig(s1_bits=6, s2_bits=6, n_layers=2, d_model=64, n_heads=4, ff_dim=128, learn_te=True),
    TokenizerConfig(
        d_in=6, d_model=32, n_heads=2, ff_dim=64, n_enc_layers=2, n_dec_layers=2,
        s1_bits=6, s2_bits=6, group_size=4,
    ),
)  # fmt: skip
# Toto 2.0: the structure of the 4m (time and variate layers, partial RoPE with xPos, per-dim
# query scale), small enough for tests.
TOTO2_SMALL = preset_config("4m") | {
    "d_model": 64, "d_ff": 168, "num_heads": 2, "num_groups": 2, "qk_dim": 32, "v_dim": 32,
    "num_layers": 4, "layer_group_size": 2, "patch_size": 8,
}  # fmt: skip
TOTO2_PUBLISHED_SIZE = "22m"
# The keys of the published config.json files that only shaped training (dropouts, the
# quantizer's loss weights), as Kronos-small and Kronos-Tokenizer-base have them: written too, so
# that the reference classes' `from_pretrained` (which takes every key as an argument) loads
# random and fine-tuned checkpoints alike.
KRONOS_MODEL_TRAINING = {
    "ffn_dropout_p": 0.25, "attn_dropout_p": 0.1, "resid_dropout_p": 0.25,
    "token_dropout_p": 0.1,
}  # fmt: skip
KRONOS_TOKENIZER_TRAINING = {
    "ffn_dropout_p": 0.0, "attn_dropout_p": 0.0, "resid_dropout_p": 0.0,
    "beta": 0.05, "gamma0": 1.0, "gamma": 1.1, "zeta": 0.05,
}  # fmt: skip
SIZES = ("published", "small")
_NAMES = {
    "toto": "Toto-Open-Base-1.0 (Datadog/Toto-Open-Base-1.0)",
    "toto2": f"Toto-2.0-{TOTO2_PUBLISHED_SIZE} (Datadog/Toto-2.0-{TOTO2_PUBLISHED_SIZE})",
    "kronos": "Kronos-small with Kronos-Tokenizer-base (NeoQuasar)",
}


@dataclass(frozen=True)
class RandomCheckpoint:
    """Where the random checkpoint lies, and the words that label it wherever it is used."""

    model: str
    size: str
    directory: Path
    tokenizer: Path | None
    parameters: int

    @property
    def label(self) -> str:
        if self.size == "published":
            shape = f"the published {_NAMES[self.model]} architecture"
        elif self.size == "small":
            shape = f"a small {self.model} architecture"
        else:  # a Toto 2.0 size
            shape = f"the Toto-2.0-{self.size} architecture"
        return (
            f"RANDOM weights in {shape}, {self.parameters / 1e6:.1f}M parameters: no real "
            "weights were given or found, so the forecasts mean nothing; time and memory are "
            "the architecture's"
        )

    def provenance(self, seed: int) -> dict[str, Any]:
        """What the weights file records: random, of which size and seed."""
        name = f"random:{self.size}"
        return {"kind": "random", "base": {"name": name, "seed": seed, "label": self.label}}


def _randomised(module: nn.Module, seed: int) -> nn.Module:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            base = 1.0 if "norm" in name or name.endswith("scale") else 0.0
            spread = parameter.shape[-1] ** -0.5
            parameter.copy_(base + spread * torch.randn(parameter.shape, generator=generator))
    return module


def save_published(
    directory: Path,
    config: dict[str, Any],
    tensors: dict[str, torch.Tensor],
    provenance: dict[str, Any] | None = None,
) -> None:
    """A checkpoint folder as published: model.safetensors (with `provenance` in its
    metadata) and config.json, each written whole and private, never through a link
    (`write_file`)."""
    recorded = None if provenance is None else metadata(provenance)
    data = save({n: t.contiguous() for n, t in tensors.items()}, metadata=recorded)
    write_file(directory / "model.safetensors", data, what="the weights folder")
    write_file(directory / "config.json", json.dumps(config, indent=2), what="the weights folder")


def write_random_toto(directory: Path, size: str = "published", seed: int = 0) -> RandomCheckpoint:
    config = TOTO_PUBLISHED if size == "published" else TOTO_SMALL
    model = _randomised(TotoModel(TotoConfig.from_json(config, "random weights")), seed)
    count = sum(p.numel() for p in model.parameters())
    written = RandomCheckpoint("toto", size, directory, None, count)
    save_published(directory, config, model.state_dict(), written.provenance(seed))
    return written


def residual_taus(config: Toto2Config) -> list[tuple[float, float]]:
    """Per layer, the (attention, MLP) residual weights Toto 2.0's training rule sets
    (unit_scaling's transformer_residual_scaling_rule, as the reference builds them)."""
    ratio, depth = config.residual_attn_ratio, 2 * config.num_layers
    alpha_mlp = config.residual_mult * (2 / (1 + ratio**2)) ** 0.5
    alpha_attn = ratio * alpha_mlp

    def tau(index: int) -> float:
        n_attn, n_mlp = (index + 1) // 2, index // 2
        alpha = alpha_attn if index % 2 == 0 else alpha_mlp
        return float(alpha / (depth / 2 + n_attn * alpha_attn**2 + n_mlp * alpha_mlp**2) ** 0.5)

    return [(tau(2 * i), tau(2 * i + 1)) for i in range(config.num_layers)]


def write_random_toto2(directory: Path, size: str = "published", seed: int = 0) -> RandomCheckpoint:
    """`size`: published (the 22m), small, or a preset's name (4m, 22m, 313m)."""
    name = TOTO2_PUBLISHED_SIZE if size == "published" else size
    raw = TOTO2_SMALL if name == "small" else preset_config(name)
    config = Toto2Config.from_json(raw, "random weights")
    model = Toto2Model(config)
    _randomised(model, seed)
    with torch.no_grad():
        for layer, (attn, mlp) in zip(model.transformer.blocks, residual_taus(config), strict=True):
            layer.attn_tau.fill_(attn)
            layer.mlp_tau.fill_(mlp)
    count = sum(p.numel() for p in model.parameters())
    written = RandomCheckpoint("toto2", size, directory, None, count)
    save_published(directory, config.to_json(), model.state_dict(), written.provenance(seed))
    marker = json.dumps({"label": written.label, "size": name})
    write_file(directory / RANDOM_MARKER, marker, what="the weights folder")
    return written


def write_random_kronos(
    directory: Path, size: str = "published", seed: int = 0
) -> RandomCheckpoint:
    """The model in `directory/predictor`, the tokenizer in `directory/tokenizer` (the layout
    `trader finetune` writes)."""
    model_config, tokenizer_config = KRONOS_PUBLISHED if size == "published" else KRONOS_SMALL
    model = _randomised(KronosModel(model_config), seed)
    tokenizer = _randomised(KronosTokenizer(tokenizer_config), seed + 1)
    tensors = dict(tokenizer.state_dict()) | unused_tensors(tokenizer_config, seed + 2)
    count = sum(p.numel() for p in [*model.parameters(), *tokenizer.parameters()])
    written = RandomCheckpoint(
        "kronos", size, directory / "predictor", directory / "tokenizer", count
    )
    save_published(
        directory / "predictor",
        dataclasses.asdict(model_config) | KRONOS_MODEL_TRAINING,
        model.state_dict(),
        written.provenance(seed),
    )
    save_published(
        directory / "tokenizer",
        dataclasses.asdict(tokenizer_config) | KRONOS_TOKENIZER_TRAINING,
        tensors,
        written.provenance(seed),
    )
    return written


def unused_tensors(config: TokenizerConfig, seed: int) -> dict[str, torch.Tensor]:
    """The published tokenizer tensors inference never reads, as a published checkpoint has
    them: the s1-only decoder input (random here) and the quantizer's bit weights, most
    significant first."""
    generator = torch.Generator().manual_seed(seed)
    shapes = unused_published_tensors(config)
    weight = shapes["post_quant_embed_pre.weight"]
    spread = weight[-1] ** -0.5
    return {
        "post_quant_embed_pre.weight": torch.randn(weight, generator=generator) * spread,
        "post_quant_embed_pre.bias": torch.zeros(shapes["post_quant_embed_pre.bias"]),
        "tokenizer.bsq.basis": 2 ** torch.arange(config.codebook_dim - 1, -1, -1),
        "tokenizer.bsq.group_basis": 2 ** torch.arange(config.group_size - 1, -1, -1),
    }


def write_random(model: str, directory: Path, size: str = "published") -> RandomCheckpoint:
    if size not in SIZES:
        raise ValueError(f"size {size!r} is not one of {', '.join(SIZES)}")
    if model == "toto":
        return write_random_toto(directory, size)
    if model == "toto2":
        return write_random_toto2(directory, size)
    if model == "kronos":
        return write_random_kronos(directory, size)
    raise ValueError(f"no random weights for {model!r}: toto, toto2 or kronos")


def random_walk_bars(
    symbol: str, count: int, *, timeframe: Timeframe, end: datetime, seed: int = 0
) -> list[Bar]:
    """`count` hourly-like bars of a random walk (1% steps) whose last bar closes at `end`."""
    generator = torch.Generator().manual_seed(seed)
    steps = torch.randn(count, 3, generator=generator, dtype=torch.float64).tolist()
    start = end - count * timeframe.duration
    bars, price = [], 100.0
    for i, (move, up, down) in enumerate(steps):
        close = price * math.exp(0.01 * move)
        high = max(price, close) * (1 + 0.004 * abs(up))
        low = min(price, close) * (1 - 0.004 * abs(down))
        at = start + i * timeframe.duration
        bars.append(Bar(symbol, timeframe, at, price, high, low, close, 1000.0 + 100 * abs(up)))
        price = close
    return bars


@dataclass(frozen=True)
class Weights:
    """The checkpoint a check runs on, and how it is labelled in its output."""

    model: Path
    tokenizer: Path | None
    label: str
    random: bool


def weights_or_random(
    model: str,
    settings: ForecastSettings,
    scratch: Path,
    *,
    weights: Path | None = None,
    tokenizer: Path | None = None,
    size: str = "published",
) -> Weights:
    """`weights` (and `tokenizer`) when given; else the configured repositories where they
    are on this machine already (never downloaded); else random weights written to
    `scratch`, labelled as such."""
    if weights is not None:  # described by what the file records: fine-tuned from random?
        origin = describe(model, weights)
        label = "; ".join([f"weights from {weights}: {origin.text}", *origin.warning_lines()])
        return Weights(weights, tokenizer, label, random=origin.kind == "random")
    repos: dict[str, tuple[str, str | None]] = {
        "toto": (settings.toto.repo, None),
        "toto2": (repository(settings.toto2.model), None),
        "kronos": (settings.kronos.repo, settings.kronos.tokenizer_repo),
    }
    repo, tokenizer_repo = repos[model]
    try:
        found = locate(repo, weights_dir=settings.weights_dir)
        found_tokenizer = tokenizer or (
            locate(tokenizer_repo, weights_dir=settings.weights_dir) if tokenizer_repo else None
        )
    except WeightsUnavailable:
        written = write_random(model, scratch / f"random-{model}-{size}", size)
        return Weights(written.directory, written.tokenizer, written.label, random=True)
    return Weights(found, found_tokenizer, f"{repo} from {found}", random=False)
