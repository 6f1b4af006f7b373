"""Eval mode for a block of work inside training: validation, and the frozen tokenizer's
encoding, score without the dropout that training applies (as the authors' loops do)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn


@contextmanager
def evaluating(module: nn.Module) -> Iterator[None]:
    """`module` and everything it holds in eval mode for the block; each put back as it was
    (a frozen part of a training objective may be in eval mode already)."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training
