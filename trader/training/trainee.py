"""The model a run fine-tunes, built from its base on our inference modules: the objective
(an `nn.Module` whose forward is the loss, so DDP can wrap it, and which holds every network
involved under a prefix: Toto's `model.`, Kronos's `model.`, `tokenizer.` and `pre.`), which
prefixes are trained, how batches are made, and how the result is written back in the
published format."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from trader.config.finetune_settings import FinetuneSettings
from trader.config.forecast_settings import ForecastSettings
from trader.forecast.kronos.loading import load_model, load_tokenizer
from trader.forecast.random_weights import (
    KRONOS_MODEL_TRAINING,
    KRONOS_TOKENIZER_TRAINING,
    save_published,
)
from trader.forecast.toto.config import TotoConfig
from trader.forecast.toto.loading import load_toto
from trader.forecast.toto.model import Rotary
from trader.forecast.weights import load_checkpoint
from trader.private_files import write_file
from trader.training.base import Base
from trader.training.data import Series
from trader.training.kronos_objective import KronosBatches, KronosTraining, QuantizerWeights
from trader.training.toto_objective import TotoBatches, TotoTraining

TOTO_LORA = ("wQKV", "wO", "w12", "w3")  # attention and SwiGLU projections
KRONOS_LORA = ("q_proj", "k_proj", "v_proj", "out_proj", "w1", "w2", "w3")
# The quantizer's bit weights: published tensors no network holds, carried over as they are.
_BASES = ("tokenizer.bsq.basis", "tokenizer.bsq.group_basis")


@dataclass(frozen=True, eq=False)
class Trainee:
    model: str
    part: str  # toto: "all" or "head"; kronos: "predictor", "tokenizer" or "both"
    objective: nn.Module  # forward(*batch) -> the mean loss
    trained: tuple[str, ...]  # the objective's prefixes whose weights change
    batches: TotoBatches | KronosBatches
    window: int  # bars per training window
    min_gap: int  # the split's gaps are at least this many bars
    lora_names: tuple[str, ...]
    base: Base

    def trainable(self) -> list[nn.Parameter]:
        return [p for p in self.objective.parameters() if p.requires_grad]

    def lora_targets(self) -> str:
        """peft's target_modules: the named projections inside the trained networks."""
        prefixes, names = "|".join(self.trained), "|".join(self.lora_names)
        return rf"^({prefixes})\..*\b({names})$"

    def export(self, directory: Path, state: dict[str, Tensor]) -> None:
        """Write the objective's `state` (adapters merged) in the published format."""
        if self.model == "toto":
            _export_toto(self.base, directory, _under("model", state))
            return
        assert self.base.tokenizer is not None
        if "model" in self.trained:
            _export(
                self.base.path, directory / "predictor", _under("model", state),
                KRONOS_MODEL_TRAINING,
            )  # fmt: skip
        else:
            _copy(self.base.path, directory / "predictor")
        if "tokenizer" in self.trained:
            tokenizer = _under("tokenizer", state) | {
                f"post_quant_embed_pre.{name}": t for name, t in _under("pre", state).items()
            }
            _export(
                self.base.tokenizer, directory / "tokenizer", tokenizer,
                KRONOS_TOKENIZER_TRAINING, keep=_BASES,
            )  # fmt: skip
        else:
            _copy(self.base.tokenizer, directory / "tokenizer")


def build_trainee(
    base: Base,
    series: Sequence[Series],
    settings: FinetuneSettings,
    forecast: ForecastSettings,
) -> Trainee:
    if base.model == "toto":
        return _toto(base, series, settings, forecast)
    assert base.tokenizer is not None
    raw = load_checkpoint(base.tokenizer)
    tokenizer = load_tokenizer(base.tokenizer).train()
    config = tokenizer.config
    pre = nn.Linear(config.s1_bits, config.d_model)
    pre.load_state_dict({n: raw.tensors[f"post_quant_embed_pre.{n}"] for n in ("weight", "bias")})
    objective = KronosTraining(
        load_model(base.path).train(), tokenizer, pre, QuantizerWeights.from_config(raw.config),
        settings.kronos_train,
    )  # fmt: skip
    trained = {
        "predictor": ("model",), "tokenizer": ("tokenizer", "pre"),
        "both": ("model", "tokenizer", "pre"),
    }[settings.kronos_train]  # fmt: skip
    length = settings.context + settings.horizon
    return Trainee(
        "kronos", settings.kronos_train, objective, trained,
        KronosBatches(series, settings.context, length), length, settings.horizon, KRONOS_LORA,
        base,
    )  # fmt: skip


def _toto(
    base: Base, series: Sequence[Series], settings: FinetuneSettings, forecast: ForecastSettings
) -> Trainee:
    model = load_toto(base.path).train()
    patch = model.config.patch_size
    context = max(patch, settings.context // patch * patch)
    if settings.toto_train == "all":
        model.requires_grad_(True)
    else:
        model.model.unembed.requires_grad_(True)
        model.model.output_distribution.requires_grad_(True)
    batches = TotoBatches(series, forecast.toto.variates, context + patch)
    return Trainee(
        "toto", settings.toto_train, TotoTraining(model, settings.toto_nll_weight), ("model",),
        batches, context + patch, max(settings.horizon, patch), TOTO_LORA, base,
    )  # fmt: skip


def _under(prefix: str, state: dict[str, Tensor]) -> dict[str, Tensor]:
    """The tensors under `prefix.`, named without it."""
    pattern = re.compile(rf"^{re.escape(prefix)}\.")
    return {pattern.sub("", name): t for name, t in state.items() if pattern.match(name)}


def _export_toto(base: Base, directory: Path, state: dict[str, Tensor]) -> None:
    config = load_checkpoint(base.path).config
    head_dim = TotoConfig.from_json(config, str(base.path)).head_dim
    # The published file carries the rotary table; our loader checks it is this config's.
    freqs = Rotary(head_dim).inv_freq
    save_published(directory, config, state | {"model.transformer.rotary_emb.freqs": freqs})


def _export(
    source: Path,
    directory: Path,
    state: dict[str, Tensor],
    training_keys: dict[str, Any],
    keep: tuple[str, ...] = (),
) -> None:
    """The network's tensors with its base's config.json (completed with the published
    training-only keys the reference classes need) and the base's tensors named in `keep`."""
    checkpoint = load_checkpoint(source)
    config = training_keys | dict(checkpoint.config)
    kept = {name: checkpoint.tensors[name] for name in keep}
    save_published(directory, config, state | kept)


def _copy(source: Path, directory: Path) -> None:
    for name in ("config.json", "model.safetensors"):
        write_file(directory / name, (source / name).read_bytes(), what="the weights folder")
