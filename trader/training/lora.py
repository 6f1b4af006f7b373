"""LoRA adapters (via `peft`) on the attention and MLP projections, merged into full weights
for serving; QLoRA (the frozen base in 4-bit NF4 via `bitsandbytes`) only on a CUDA device
where bitsandbytes loads, refused with the reason anywhere else.

Merging adds each adapter's delta (B @ A x alpha / rank) to the base weight as it was before
any quantization, so a QLoRA run serves full-precision weights plus what it learnt, and the
written checkpoint has exactly the published tensor names. peft loads only when asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, cast

import torch
from torch import Tensor, nn

from trader.config.finetune_settings import FinetuneSettings

ADAPTER = "default"


class LoraUnavailable(Exception):
    """LoRA or QLoRA cannot run here; the message says why and what to do."""


@dataclass(frozen=True)
class Adapters:
    """The adapted network's tensors before adapters were added (on the CPU, full
    precision), the base of every merge."""

    originals: dict[str, Tensor]
    quantized: bool


def qlora_refusal(device: torch.device) -> str | None:
    """Why QLoRA cannot run on `device`, or None when it can."""
    if device.type != "cuda":
        return (
            f"QLoRA keeps the frozen base in 4 bits with bitsandbytes, which needs a CUDA "
            f"GPU; this run is on {device}. Use --lora (a full-precision base) here"
        )
    try:
        import bitsandbytes  # noqa: F401, PLC0415 - optional, CUDA only
    except Exception as error:  # a missing package or a library that will not load
        return (
            f"QLoRA needs bitsandbytes with CUDA support ({type(error).__name__}: {error}); "
            "install it (pip install 'trader[qlora]') or use --lora"
        )
    return None


def lora_refusal() -> str | None:
    """Why LoRA cannot run here (peft does not import), or None when it can: asked before
    the data is read, so a run that cannot train is refused at once."""
    try:
        import peft  # noqa: F401, PLC0415 - heavy, optional
    except ImportError as error:
        return f"--lora needs peft ({error}): pip install 'trader[finetune]'"
    return None


def add_adapters(
    module: nn.Module,
    targets: str,
    settings: FinetuneSettings,
    *,
    quantize_on: torch.device | None = None,
    compute_dtype: torch.dtype = torch.float32,
) -> Adapters:
    """Freeze `module` and give the projections whose names match the regular expression
    `targets` trainable adapters, in place; with `quantize_on`, those projections' frozen
    weights become 4-bit on that CUDA device first."""
    refusal = lora_refusal()
    if refusal is not None:
        raise LoraUnavailable(refusal)
    from peft import LoraConfig, inject_adapter_in_model  # noqa: PLC0415 - heavy

    originals = {name: t.detach().cpu().clone() for name, t in module.state_dict().items()}
    if quantize_on is not None:
        refusal = qlora_refusal(quantize_on)
        if refusal is not None:
            raise LoraUnavailable(refusal)
        _quantize(module, targets, quantize_on, compute_dtype)
    config = LoraConfig(
        r=settings.lora_rank,
        lora_alpha=settings.lora_alpha,
        lora_dropout=settings.lora_dropout,
        target_modules=targets,
    )
    inject_adapter_in_model(config, module, adapter_name=ADAPTER)
    return Adapters(originals, quantize_on is not None)


def checkpoint_state(module: nn.Module, adapters: Adapters | None) -> dict[str, Tensor]:
    """What a checkpoint keeps of the network: every tensor, or with adapters only those that
    train. The frozen base is the run's own (DIR/base, or the base it names), rebuilt the same
    way on resume; and a 4-bit base's quantization state would not load back into
    bitsandbytes' layers."""
    state = module.state_dict()
    if adapters is None:
        return state
    return {name: state[name] for name in _trained(module)}


def load_checkpoint_state(
    module: nn.Module, state: dict[str, Tensor], adapters: Adapters | None
) -> None:
    """Put back what `checkpoint_state` kept; a checkpoint that lacks a trained tensor or
    holds one the network does not have is refused (ValueError)."""
    if adapters is None:
        module.load_state_dict(state)
        return
    absent = _trained(module) - set(state)
    unexpected = module.load_state_dict(state, strict=False).unexpected_keys
    if absent or unexpected:
        raise ValueError(
            f"the checkpoint does not fit this run's adapters: {len(absent)} trained tensors "
            f"missing, {len(unexpected)} unknown (e.g. {sorted(absent or unexpected)[0]})"
        )


def _trained(module: nn.Module) -> set[str]:
    return {name for name, parameter in module.named_parameters() if parameter.requires_grad}


def merged_state(module: nn.Module, adapters: Adapters | None) -> dict[str, Tensor]:
    """The network's tensors under their own names, adapters merged in, on the CPU."""
    if adapters is None:
        return {name: t.detach().cpu().clone() for name, t in module.state_dict().items()}
    from peft.tuners.lora import LoraLayer  # noqa: PLC0415 - loaded with the adapters

    out = dict(adapters.originals)
    with torch.no_grad():
        for name, layer in module.named_modules():
            if isinstance(layer, LoraLayer):
                key = f"{name}.weight"
                # Each kind of adapted layer (Linear, bitsandbytes' Linear4bit) has its own.
                delta = cast(Any, layer).get_delta_weight(ADAPTER).detach().float().cpu()
                out[key] = (out[key].float() + delta).to(out[key].dtype)
    return out


def _quantize(
    module: nn.Module, targets: str, device: torch.device, compute_dtype: torch.dtype
) -> None:
    import bitsandbytes as bnb  # noqa: PLC0415 - checked by qlora_refusal

    for name, child in list(module.named_modules()):
        if not isinstance(child, nn.Linear) or not re.fullmatch(targets, name):
            continue
        quantized = bnb.nn.Linear4bit(
            child.in_features,
            child.out_features,
            bias=child.bias is not None,
            compute_dtype=compute_dtype,
            quant_type="nf4",
        )
        quantized.weight = bnb.nn.Params4bit(
            child.weight.data.cpu(), requires_grad=False, quant_type="nf4"
        )
        if child.bias is not None:
            quantized.bias = nn.Parameter(child.bias.data.clone(), requires_grad=False)
        parent_name, _, attr = name.rpartition(".")
        parent = module.get_submodule(parent_name)
        setattr(parent, attr, quantized.to(device))  # quantized as it moves to the GPU
