"""Autoregressive generation of token paths with a KV cache, giving what the reference's
window-by-window recomputation gives.

The reference, at each step, runs the model over the last `max_context` tokens with RoPE
positions counted from the window's start. While the window still starts at the first context
token, every earlier hidden state is unchanged by a new token, so caching keys and values is
exact. Once the window slides, every position moves and the dropped token no longer feeds the
others: nothing earlier can be reused, so each step recomputes its window, as the reference does.

Two things make both regimes cheap where they can be: the S sample paths of a symbol share its
context, so its keys and values are computed and stored once per symbol, and each path stores
only its own generated tokens; and in a sliding window the context part is still shared, so it is
recomputed once per symbol and only the generated part once per path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from trader.forecast.kronos.model import KV
from trader.forecast.kronos.sampling import Sampling, draw


class Steps(Protocol):
    """The model's steps generation calls: `KronosModel` itself, or the same steps with
    `window` and `extend` compiled (`trader bench compile --model kronos`)."""

    def window(self, s1: Tensor, s2: Tensor, stamp: Tensor) -> tuple[Tensor, list[KV]]: ...

    def extend(
        self,
        s1: Tensor,
        s2: Tensor,
        stamp: Tensor,
        positions: Tensor,
        prefix: list[KV],
        prefix_valid: Tensor | None,
        own: list[KV] | None = None,
        at: int = 0,
    ) -> Tensor: ...

    def dependency_kv(self, hidden: Tensor) -> KV: ...

    def s1_logits(self, hidden: Tensor) -> Tensor: ...

    def s2_logits(
        self,
        hidden: Tensor,
        s1: Tensor,
        prefix: KV | None,
        prefix_valid: Tensor | None,
        own: KV | None,
    ) -> Tensor: ...


@dataclass(frozen=True)
class Contexts:
    """A batch of symbols' context tokens, right-padded to the longest.

    s1, s2: ids [B, L]; lengths: each symbol's real length (<= max_context); stamps: time
    features [B, L, 5] of the context bars; future: [B, H, 5] of the bars to generate.
    """

    s1: Tensor
    s2: Tensor
    lengths: Sequence[int]
    stamps: Tensor
    future: Tensor


@dataclass(frozen=True)
class _Step:
    """What the heads need at one step, for some symbols: the last hidden state of every path
    [n, S, d] and the dependency layer's keys and values over each window."""

    hidden: Tensor
    dep_prefix: KV
    dep_valid: Tensor | None
    dep_own: KV


def generate(
    model: Steps,
    contexts: Contexts,
    *,
    paths: int,
    max_context: int,
    sampling: Sampling,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """Draw `paths` continuations of H tokens per symbol: (s1, s2) ids, each [B, S, H]."""
    lengths = list(contexts.lengths)
    batch, horizon = len(lengths), contexts.future.shape[1]
    for what, tokens in (("context", max(lengths)), ("horizon", horizon)):
        if tokens > max_context:
            raise ValueError(f"a {what} of {tokens} tokens exceeds max_context {max_context}")
    device = contexts.s1.device
    prefix, dep_prefix, last = _prefill(model, contexts)
    lengths_t = torch.tensor(lengths, device=device)
    valid = None
    if min(lengths) != max(lengths):
        valid = torch.arange(max(lengths), device=device) < lengths_t[:, None]
    own = [_own_cache(k, paths, horizon) for k, _ in prefix]
    dep_own = _own_cache(dep_prefix[0], paths, horizon)
    out_s1 = torch.zeros(batch, paths, horizon, dtype=torch.long, device=device)
    out_s2 = torch.zeros_like(out_s1)
    for i in range(horizon):
        groups: list[tuple[Tensor | None, _Step]] = []
        sliding = [b for b, n in enumerate(lengths) if n + i > max_context]
        if i == 0:
            hidden = last.unsqueeze(1).expand(-1, paths, -1)
            groups.append((None, _Step(hidden, dep_prefix, valid, _upto(dep_own, 0))))
        elif len(sliding) < batch:
            # Every symbol takes the cached step (cheap: one token per path); those whose
            # window has slid are then recomputed and overwritten.
            h = model.extend(
                out_s1[:, :, i - 1 : i],
                out_s2[:, :, i - 1 : i],
                contexts.future[:, i - 1 : i],
                (lengths_t + (i - 1))[:, None],
                prefix,
                valid,
                own,
                i - 1,
            )
            dk, dv = model.dependency_kv(h)
            dep_own[0][..., i - 1 : i, :] = dk
            dep_own[1][..., i - 1 : i, :] = dv
            groups.append((None, _Step(h[:, :, -1], dep_prefix, valid, _upto(dep_own, i))))
        if sliding:
            index = torch.tensor(sliding, device=device)
            groups.append((index, _slide(model, contexts, out_s1, out_s2, index, i, max_context)))
        hidden = _assemble(batch, [(index, step.hidden) for index, step in groups])
        s1 = draw(model.s1_logits(hidden), sampling, generator)
        s2_logits = _assemble(
            batch,
            [
                (
                    index,
                    model.s2_logits(
                        step.hidden,
                        s1 if index is None else s1[index],
                        step.dep_prefix,
                        step.dep_valid,
                        step.dep_own,
                    ),
                )
                for index, step in groups
            ],
        )
        out_s1[:, :, i] = s1
        out_s2[:, :, i] = draw(s2_logits, sampling, generator)
    return out_s1, out_s2


def _prefill(model: Steps, contexts: Contexts) -> tuple[list[KV], KV, Tensor]:
    """Run each symbol's context once (symbols of equal length together): every layer's keys
    and values [B, H, L, hd], the dependency layer's, and the last hidden states [B, d]."""
    lengths = list(contexts.lengths)
    batch, width = len(lengths), max(lengths)
    groups = []
    for length in sorted(set(lengths)):
        index = torch.tensor([b for b, n in enumerate(lengths) if n == length])
        index = index.to(contexts.s1.device)
        hidden, kvs = model.window(
            contexts.s1[index, :length],
            contexts.s2[index, :length],
            contexts.stamps[index, :length],
        )
        groups.append((index, length, hidden, [*kvs, model.dependency_kv(hidden)]))
    if len(groups) == 1:
        _, _, hidden, kvs = groups[0]
        return kvs[:-1], kvs[-1], hidden[:, -1]
    first_hidden, first_kvs = groups[0][2], groups[0][3]
    caches = [(_padded(k, batch, width), _padded(v, batch, width)) for k, v in first_kvs]
    last = first_hidden.new_empty(batch, first_hidden.shape[-1])
    for index, length, hidden, kvs in groups:
        for (k_all, v_all), (k, v) in zip(caches, kvs, strict=True):
            k_all[index, :, :length] = k
            v_all[index, :, :length] = v
        last[index] = hidden[:, -1]
    return caches[:-1], caches[-1], last


def _slide(
    model: Steps,
    contexts: Contexts,
    out_s1: Tensor,
    out_s2: Tensor,
    index: Tensor,
    step: int,
    max_context: int,
) -> _Step:
    """Step `step` for symbols whose window has slid: it holds the last max_context - step
    context tokens (shared by the symbol's paths, at positions from 0) and the `step` tokens
    generated so far (each path's own), all recomputed."""
    shared = max_context - step
    lengths = torch.tensor(list(contexts.lengths), device=index.device)[index]
    columns = (lengths - shared)[:, None] + torch.arange(shared, device=index.device)
    rows = index[:, None]
    hidden, kvs = model.window(
        contexts.s1[rows, columns], contexts.s2[rows, columns], contexts.stamps[rows, columns]
    )
    own = model.extend(
        out_s1[index, :, :step],
        out_s2[index, :, :step],
        contexts.future[index, :step],
        torch.arange(shared, max_context, device=index.device),
        kvs,
        None,
    )
    return _Step(own[:, :, -1], model.dependency_kv(hidden), None, model.dependency_kv(own))


def _assemble(batch: int, parts: list[tuple[Tensor | None, Tensor]]) -> Tensor:
    """[B, ...] from per-group values: a None group covers every symbol; an indexed group
    (the sliding symbols) overwrites its rows."""
    out: Tensor | None = None
    for index, value in parts:
        if index is None:
            out = value.clone() if len(parts) > 1 else value
        else:
            if out is None:
                out = value.new_empty((batch, *value.shape[1:]))
            out[index] = value
    assert out is not None
    return out


def _upto(kv: KV, length: int) -> KV:
    return kv[0][..., :length, :], kv[1][..., :length, :]


def _own_cache(shared: Tensor, paths: int, horizon: int) -> KV:
    """Per-path keys and values [B, S, H, horizon, hd], shaped after shared ones [B, H, L, hd]."""
    shape = (shared.shape[0], paths, shared.shape[1], horizon, shared.shape[-1])
    return shared.new_zeros(shape), shared.new_zeros(shape)


def _padded(x: Tensor, batch: int, width: int) -> Tensor:
    return x.new_zeros((batch, x.shape[1], width, x.shape[-1]))
