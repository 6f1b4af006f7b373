"""Kronos behind the `Forecaster` protocol: bars in, sample paths of whole bars out, summarised
as quantiles and means per field and step.

Per request: the last `max_context` bars are normalised and tokenised; `sample_count` paths of
`horizon` tokens are drawn for every symbol of the batch together (symbols may have different
numbers of bars and horizons); each path is decoded over the reference's window (the last
`max_context` tokens of context + path) and denormalised.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from trader.domain import Forecast
from trader.forecast.kronos import inputs
from trader.forecast.kronos.generate import Contexts, Steps, generate
from trader.forecast.kronos.model import KronosModel
from trader.forecast.kronos.sampling import Sampling
from trader.forecast.kronos.tokenizer import KronosTokenizer
from trader.forecast.protocol import ForecastRequest
from trader.forecast.runtime import ModelRuntime, RuntimeForecaster
from trader.forecast.samples import forecasts_from_samples

# What a forecast reports, by column of the model's output (amount is left out).
FIELDS = ("open", "high", "low", "close", "volume")
MIN_BARS = 2
# Per chunk of the batch, the caches (context keys and values per symbol, generated ones per
# path) stay under this; a larger batch runs in several chunks.
CACHE_BUDGET_BYTES = 512 * 2**20


class KronosForecaster(RuntimeForecaster):
    name = "kronos"

    def __init__(
        self,
        model: KronosModel,
        tokenizer: KronosTokenizer,
        *,
        max_context: int,
        sample_count: int,
        sampling: Sampling,
        seed: int,
        device: torch.device,
        runtime: ModelRuntime | None = None,
    ) -> None:
        """`runtime`: how the model's `window` and `extend` steps run; eager by default
        (the daemon refuses compiled Kronos; `trader bench compile` measures it)."""
        if tokenizer.config.s1_bits != model.config.s1_bits or (
            tokenizer.config.s2_bits != model.config.s2_bits
        ):
            raise ValueError(
                f"tokenizer bits {tokenizer.config.s1_bits}+{tokenizer.config.s2_bits} do not "
                f"match the model's {model.config.s1_bits}+{model.config.s2_bits}"
            )
        if tokenizer.config.d_in != len(inputs.COLUMNS):
            raise ValueError(f"the tokenizer reads {tokenizer.config.d_in} columns, not 6")
        if max_context < 1 or sample_count < 1:
            raise ValueError("max_context and sample_count must be positive")
        self.model = model.to(device)
        self.tokenizer = tokenizer.to(device)
        self.max_context = max_context
        self.sample_count = sample_count
        self.sampling = sampling
        self.seed = seed
        self.device = device
        self.runtime = runtime or ModelRuntime(self.name, compiled=False)
        self.steps: Steps = self.model
        if self.runtime.compiled:
            self.steps = _RuntimeSteps(self.model, self.runtime)

    def _forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        out = []
        for request, paths in zip(requests, self.paths(requests), strict=True):
            bars = request.bars
            fields = paths[..., : len(FIELDS)].permute(2, 1, 0).unsqueeze(0)  # [1, F, H, S]
            out += forecasts_from_samples(
                fields,
                symbols=[request.symbol],
                fields=FIELDS,
                levels=request.quantiles,
                model=self.name,
                as_of=[bars[-1].end],
                timeframe=[bars[-1].timeframe],
            )
        return out

    def paths(self, requests: Sequence[ForecastRequest]) -> list[Tensor]:
        """Per request, its sample paths [sample_count, horizon, 6] (open, high, low, close,
        volume, amount), on the CPU. Re-running a batch gives the same paths: the sampler is
        seeded from the settings' seed and the batch's symbols and times."""
        out: list[Tensor] = []
        for chunk in self._chunks(requests):
            out += self._paths(chunk)
        return out

    def _chunks(self, requests: Sequence[ForecastRequest]) -> list[Sequence[ForecastRequest]]:
        """Consecutive runs of requests whose caches fit CACHE_BUDGET_BYTES (at least one)."""
        config = self.model.config
        # Keys and values, float32, of every layer and the dependency layer, per token.
        per_token = 2 * 4 * config.d_model * (config.n_layers + 1)
        steps = max((r.horizon for r in requests), default=0)
        chunks: list[Sequence[ForecastRequest]] = []
        start, used = 0, 0
        for i, request in enumerate(requests):
            tokens = min(len(request.bars), self.max_context) + self.sample_count * steps
            if i > start and used + per_token * tokens > CACHE_BUDGET_BYTES:
                chunks.append(requests[start:i])
                start, used = i, 0
            used += per_token * tokens
        if start < len(requests):
            chunks.append(requests[start:])
        return chunks

    def _paths(self, requests: Sequence[ForecastRequest]) -> list[Tensor]:
        # Every symbol is generated to the batch's longest horizon (paths are causal: the extra
        # steps change nothing before them) and decoded at its own.
        steps = max(r.horizon for r in requests)
        windows = [self._window(request, steps) for request in requests]
        generator = torch.Generator(device=self.device).manual_seed(self._seed(requests))
        with torch.inference_mode():
            s1, s2 = self._encode(windows)
            lengths = [len(w.values) for w in windows]
            contexts = Contexts(
                _pad(s1, lengths),
                _pad(s2, lengths),
                lengths,
                _pad([self._tensor(w.stamps) for w in windows], lengths),
                torch.stack([self._tensor(w.future) for w in windows]),
            )
            gen_s1, gen_s2 = generate(
                self.steps,
                contexts,
                paths=self.sample_count,
                max_context=self.max_context,
                sampling=self.sampling,
                generator=generator,
            )
            decoded = self._decode(s1, s2, gen_s1, gen_s2, [r.horizon for r in requests])
            return [
                inputs.denormalise(x, w.mean, w.std).cpu()
                for x, w in zip(decoded, windows, strict=True)
            ]

    def _seed(self, requests: Sequence[ForecastRequest]) -> int:
        key = f"{self.seed}|" + "|".join(
            f"{r.symbol}@{r.bars[-1].end.isoformat()}" for r in requests
        )
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") >> 1

    def _window(self, request: ForecastRequest, steps: int) -> inputs.Window:
        bars = request.bars[-self.max_context :]
        symbol = request.symbol
        if len(bars) < MIN_BARS:
            raise ValueError(f"{symbol}: Kronos needs at least {MIN_BARS} bars, got {len(bars)}")
        if not 1 <= request.horizon <= self.max_context:
            # The reference's decode window is max_context tokens: it cannot return more steps.
            raise ValueError(
                f"{symbol}: horizon {request.horizon} is outside 1..{self.max_context}"
            )
        timeframe = bars[-1].timeframe
        for earlier, later in itertools.pairwise(bars):
            if later.start <= earlier.start or later.timeframe != timeframe:
                raise ValueError(f"{symbol}: bars are not one timeframe in time order")
        if any(b.symbol != symbol for b in bars):
            raise ValueError(f"{symbol}: the request holds bars of another symbol")
        return inputs.window(bars, steps)

    def _tensor(self, array: NDArray[Any]) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

    def _encode(self, windows: Sequence[inputs.Window]) -> tuple[list[Tensor], list[Tensor]]:
        """Token ids [T] per window; windows of equal length are encoded together."""
        s1: list[Tensor] = [torch.empty(0)] * len(windows)
        s2: list[Tensor] = [torch.empty(0)] * len(windows)
        for index in _groups([len(w.values) for w in windows]):
            x = torch.stack([self._tensor(windows[i].values) for i in index])
            ids1, ids2 = self.tokenizer.encode(x)
            for row, i in enumerate(index):
                s1[i], s2[i] = ids1[row], ids2[row]
        return s1, s2

    def _decode(
        self,
        s1: Sequence[Tensor],
        s2: Sequence[Tensor],
        gen_s1: Tensor,
        gen_s2: Tensor,
        horizons: Sequence[int],
    ) -> list[Tensor]:
        """Normalised bars [S, h, 6] per symbol: its paths' last h tokens decoded in the window
        the reference decodes, the last max_context tokens of context + path (the decoder is
        causal and the context part is shared, so it runs once per symbol)."""
        out: list[Tensor] = [torch.empty(0)] * len(s1)
        shapes = [(len(ids), h) for ids, h in zip(s1, horizons, strict=True)]
        for index in _groups(shapes):
            length, h = shapes[index[0]]
            start = max(0, length + h - self.max_context)
            prefix = None
            if start < length:
                prefix = (
                    torch.stack([s1[i][start:] for i in index]),
                    torch.stack([s2[i][start:] for i in index]),
                )
            rows = torch.tensor(index, device=self.device)
            paths = (gen_s1[rows, :, :h], gen_s2[rows, :, :h])
            decoded = self.tokenizer.decode_paths(prefix, paths)
            for row, i in enumerate(index):
                out[i] = decoded[row]
        return out


class _RuntimeSteps:
    """The model's steps with `window` and `extend` run through a runtime (compiled)."""

    def __init__(self, model: KronosModel, runtime: ModelRuntime) -> None:
        self.window = runtime.wrap(model.window)
        self.extend = runtime.wrap(model.extend)
        self.dependency_kv = model.dependency_kv
        self.s1_logits = model.s1_logits
        self.s2_logits = model.s2_logits


def _groups(keys: Sequence[Hashable]) -> list[list[int]]:
    """Indices grouped by equal key, in first-seen order."""
    groups: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _pad(rows: Sequence[Tensor], lengths: Sequence[int]) -> Tensor:
    """Right-pad rows [T, ...] to the longest, stacked [B, T_max, ...]."""
    width = max(lengths)
    out = rows[0].new_zeros((len(rows), width, *rows[0].shape[1:]))
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out
