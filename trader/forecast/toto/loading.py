"""A published Toto checkpoint, checked tensor by tensor, into a `TotoModel`."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from trader.forecast.toto.config import TotoConfig
from trader.forecast.toto.model import TotoModel
from trader.forecast.weights import (
    Checkpoint,
    CheckpointMismatch,
    check_state,
    load_checkpoint,
    locate,
)

# Checkpoints written without xFormers name the MLP "mlp.0" / "mlp.2"; the published one uses
# xFormers' fused names. Both spell the same tensors.
_UNFUSED = {
    r"\.mlp\.0\.(weight|bias)$": r".mlp.0.w12.\1",
    r"\.mlp\.2\.(weight|bias)$": r".mlp.0.w3.\1",
}
# Buffers derived from the config that some checkpoints carry: verified, then not loaded.
_DERIVED = re.compile(r"^model\.transformer(\.layers\.\d+\.attention)?\.rotary_emb\.(freqs|scale)$")


def _canonical(name: str) -> str:
    for pattern, replacement in _UNFUSED.items():
        name = re.sub(pattern, replacement, name)
    return name


def model_from_checkpoint(checkpoint: Checkpoint) -> TotoModel:
    source = str(checkpoint.directory)
    config = TotoConfig.from_json(checkpoint.config, source)
    model = TotoModel(config)
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in checkpoint.tensors.items():
        if _DERIVED.match(name):
            _check_derived(name, tensor, model, source)
        else:
            tensors[_canonical(name)] = tensor
    model.load_state_dict(check_state(model.state_dict(), tensors, source), strict=True)
    return model.eval().requires_grad_(False)


def _check_derived(name: str, tensor: torch.Tensor, model: TotoModel, source: str) -> None:
    rotary = model.model.transformer.rotary
    expected = rotary.inv_freq if name.endswith("freqs") else rotary.xpos
    if tensor.shape != expected.shape or not torch.allclose(tensor.float(), expected, rtol=1e-5):
        raise CheckpointMismatch(f"{source}: {name} is not the rotary table of this config")


def load_toto(
    repo: str | Path,
    *,
    weights_dir: Path | None = None,
    token: str | None = None,
    allow_download: bool = False,
) -> TotoModel:
    directory = locate(
        str(repo), weights_dir=weights_dir, token=token, allow_download=allow_download
    )
    return model_from_checkpoint(load_checkpoint(directory))
