"""Random-weight Toto checkpoints in the published format, and the reference model that loads
them (`toto-ts==0.2.0`), for conformance tests and the bench."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

PUBLISHED: dict[str, Any] = {
    "patch_size": 64,
    "stride": 64,
    "embed_dim": 768,
    "num_layers": 12,
    "num_heads": 12,
    "mlp_hidden_dim": 3072,
    "dropout": 0.1,
    "spacewise_every_n_layers": 12,
    "spacewise_first": False,
    "scaler_cls": "<class 'model.scaler.CausalPatchStdMeanScaler'>",
    "output_distribution_classes": ["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
    "output_distribution_kwargs": {"k_components": 24},
    "use_memory_efficient_attention": True,
    "stabilize_with_global": True,
    "scale_factor_exponent": 10.0,
}
# Small and quick, but with more than one space-wise layer and a short patch.
SMALL: dict[str, Any] = PUBLISHED | {
    "patch_size": 16,
    "stride": 16,
    "embed_dim": 64,
    "num_layers": 4,
    "num_heads": 4,
    "mlp_hidden_dim": 128,
    "spacewise_every_n_layers": 2,
    "output_distribution_kwargs": {"k_components": 4},
}


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
