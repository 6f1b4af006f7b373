"""The published Toto 2.0 sizes, by name, with where each configuration comes from.

Real checkpoints carry their own config.json, which is what loading reads; a preset serves
where there are no weights (random weights for `trader doctor`, `trader bench compile`, the
conformance tests and the bench) and names the repository of each size. Only the 4m
config.json could be read from a public copy. The 22m one is reconstructed: its tensor shapes
are pinned by the published checkpoint's size (the reference's own save_pretrained writes a
file of exactly that size for this configuration), the rest follows the 4m one and is
marked as assumed. No configuration values were found for the 313m, 1B, 2.5B and 2.5B-FT
checkpoints: their presets name the repository only (the 313m one carries a configuration
of the published parameter count for the bench, marked as such).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Datadog/Toto-2.0-4m's config.json (https://huggingface.co/Datadog/Toto-2.0-4m, config.json;
# the reference's save_pretrained writes the same fields).
_PUBLISHED_4M: dict[str, Any] = {
    "attn_bias": True,
    "d_ff": 688,
    "d_model": 256,
    "dropout_p": 0.0,
    "heads_per_group": 1,
    "layer_group_size": 4,
    "mlp_bias": False,
    "norm_eps": 0.0001,
    "norm_include_weight": False,
    "num_groups": 4,
    "num_heads": 4,
    "num_layers": 4,
    "num_output_patches": 1,
    "num_variate_layers_per_group": 1,
    "patch_size": 32,
    "per_dim_scale": True,
    "pre_norm": True,
    "qk_dim": 64,
    "qk_norm": False,
    "qk_norm_include_weight": False,
    "residual_attn_ratio": 5.136215466577748,
    "residual_mult": 0.75,
    "use_xpos": True,
    "v_dim": 64,
    "variate_layer_first": False,
}


def _scaled(d_model: int, layers: int, group: int) -> dict[str, Any]:
    heads = d_model // 64
    return _PUBLISHED_4M | {
        "d_model": d_model,
        "d_ff": (int(4 * d_model * 2 / 3) + 7) // 8 * 8,
        "num_heads": heads,
        "num_groups": heads,
        "num_layers": layers,
        "layer_group_size": group,
    }


@dataclass(frozen=True)
class Preset:
    name: str
    repo: str
    parameters: str
    config: dict[str, Any] | None  # None: no configuration values were found
    source: str


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "4m", "Datadog/Toto-2.0-4m", "4,144,448", _PUBLISHED_4M,
            "published config.json (Datadog/Toto-2.0-4m); the reference builds 4,144,448 "
            "parameters from it and its save_pretrained writes 16,582,848 bytes, the "
            "published model.safetensors' size",
        ),
        Preset(
            "22m", "Datadog/Toto-2.0-22m", "21,915,584", _scaled(512, 6, 3),
            "reconstructed, not published: d_model 512, 6 layers, 8 heads of 64, d_ff 1368 "
            "give 21,915,584 parameters (the model card's 21.9M) and the reference's "
            "save_pretrained writes 87,669,368 bytes, the published model.safetensors' size; "
            "layer_group_size 3 (one variate layer in three) is assumed, and the other "
            "fields are the 4m's (same training recipe)",
        ),
        Preset(
            "313m", "Datadog/Toto-2.0-313m", "312,684,608", _scaled(1024, 24, 4),
            "not found: a configuration of the published parameter count (d_model 1024, "
            "24 layers, the 4m's other fields) stands in for benches; the real one may differ",
        ),
        Preset("1B", "Datadog/Toto-2.0-1B", "1B", None, "not found"),
        Preset("2.5B", "Datadog/Toto-2.0-2.5B", "2.5B", None, "not found"),
        Preset("2.5B-FT", "Datadog/Toto-2.0-2.5B-FT", "2.5B", None, "not found"),
    )
}  # fmt: skip


def repository(model: str) -> str:
    """A preset's repository, else `model` itself (a repository id or a directory)."""
    return PRESETS[model].repo if model in PRESETS else model


def preset_config(size: str) -> dict[str, Any]:
    preset = PRESETS.get(size)
    if preset is None:
        raise ValueError(f"no Toto 2.0 size {size!r}: {', '.join(PRESETS)}")
    if preset.config is None:
        raise ValueError(
            f"Toto 2.0 {size}: its configuration was not found ({preset.source}); give its "
            "checkpoint directory instead"
        )
    return dict(preset.config)
