"""Random-weight Toto checkpoints in the published format, and the reference model that loads
them (`toto-ts==0.2.0`), for conformance tests and the bench."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from trader.forecast.random_weights import TOTO_PUBLISHED, TOTO_SMALL

# The published configuration, and a small one of the same structure (more than one
# space-wise layer, a short patch), as our random-weight writer has them.
PUBLISHED: dict[str, Any] = TOTO_PUBLISHED
SMALL: dict[str, Any] = TOTO_SMALL


def reference_classes() -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from toto.inference.forecaster import TotoForecaster  # noqa: PLC0415
        from toto.model.toto import Toto  # noqa: PLC0415
    return Toto, TotoForecaster


def write_checkpoint(directory: Path, config: dict[str, Any], seed: int) -> None:
    """Random weights of the reference architecture, saved as Datadog publishes them: fused
    SwiGLU names, the rotary frequencies included."""
    toto, _ = reference_classes()
    torch.manual_seed(seed)
    model = toto(**(config | {"use_memory_efficient_attention": False}))
    with torch.no_grad():
        for parameter in model.parameters():  # away from init values that hide bugs (ones)
            parameter.add_(torch.randn_like(parameter) * 0.02)
    fused = {".mlp.0.": ".mlp.0.w12.", ".mlp.2.": ".mlp.0.w3."}
    state = {}
    for name, tensor in model.state_dict().items():
        published = name
        for plain, fused_name in fused.items():
            published = published.replace(plain, fused_name)
        state[published] = tensor.contiguous()
    state["model.transformer.rotary_emb.freqs"] = model.model.transformer.rotary_emb.freqs.clone()
    directory.mkdir(parents=True, exist_ok=True)
    save_file(state, directory / "model.safetensors")
    (directory / "config.json").write_text(json.dumps(config, indent=2))


def load_reference(directory: Path) -> Any:
    """The reference model, loaded by the reference's own loader from the same files."""
    toto, _ = reference_classes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = toto.load_from_checkpoint(str(directory), map_location="cpu", strict=True)
    return model.eval()


def reference_samples(
    model: Any, x: torch.Tensor, valid: torch.Tensor, horizon: int, samples: int, per_batch: int
) -> torch.Tensor:
    """The reference forecaster's sample paths [B, V, horizon, samples] for `x` [B, V, T]
    (hourly timestamps: the published model does not use them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from toto.data.util.dataset import MaskedTimeseries  # noqa: PLC0415
    _, forecaster = reference_classes()
    b, v, _ = x.shape
    series = MaskedTimeseries(
        series=x,
        padding_mask=valid,
        id_mask=torch.zeros_like(x, dtype=torch.int),
        timestamp_seconds=torch.zeros_like(x, dtype=torch.int),
        time_interval_seconds=torch.full((b, v), 3600, dtype=torch.int),
    )
    forecast = forecaster(model).forecast(
        series, prediction_length=horizon, num_samples=samples, samples_per_batch=per_batch
    )
    result: torch.Tensor = forecast.samples
    return result


def quantile_z(ours: torch.Tensor, theirs: torch.Tensor, q: float) -> torch.Tensor:
    """Where our q-quantile falls in the reference's empirical distribution (samples on the
    last axis), in standard errors of the difference of two sample quantile levels: about
    |N(0, 1)| (mean 0.80) when both sample the same distribution."""
    n, m = ours.shape[-1], theirs.shape[-1]
    level = (theirs <= ours.quantile(q, dim=-1).unsqueeze(-1)).float().mean(-1)
    return (level - q).abs() / math.sqrt(q * (1 - q) * (1 / n + 1 / m))
