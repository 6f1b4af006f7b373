"""Training-only dropout for the inference modules: rates read from a checkpoint's config, and
the call that leaves eval mode's computation untouched (the module is not even called)."""

from __future__ import annotations

from typing import Any, TypeVar

from torch import Tensor, nn

M = TypeVar("M", bound=nn.Module)


def is_rate(value: Any) -> bool:
    """A dropout probability as config.json spells one: a number in [0, 1), not a bool."""
    return not isinstance(value, bool) and isinstance(value, int | float) and 0 <= value < 1


def attention_rate(dropout: nn.Dropout) -> float:
    """The `dropout_p` scaled_dot_product_attention takes for the attention weights: the
    module's rate in training mode, 0 in eval mode (the module itself is never called)."""
    return dropout.p if dropout.training else 0.0


def without_dropout(module: M) -> M:
    """Every rate in `module` set to 0 (attention weights' included): training mode then
    computes what eval mode does, with no random draw (e.g. to compare process counts)."""
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return module


def dropped(dropout: nn.Dropout, x: Tensor) -> Tensor:
    """`dropout(x)` in training mode at a rate above zero; `x` itself otherwise, so inference
    pays nothing and a zero rate draws no random numbers (nn.Dropout draws none either)."""
    return dropout(x) if dropout.training and dropout.p > 0 else x
