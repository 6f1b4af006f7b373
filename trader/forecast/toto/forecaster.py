"""Toto behind the `Forecaster` protocol.

Per call: requests are grouped by horizon and by context length padded to whole patches (a
batch shares one length, as the reference requires: left padding is not masked in attention,
so padding two series to a common length would change the shorter one's forecast). Each
group's context is encoded once per series; the first forecast patch is drawn straight from
that; only then do the sample paths fan out, each decoding its own later patches against the
shared context keys. Horizons are decoded in whole patches and cut to length. Draws use a
generator seeded from the settings' seed and the batch, so re-running a tick gives the same
forecast.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx.experimental._config as fx_config

from trader.domain import Forecast
from trader.forecast.autocast import Autocast
from trader.forecast.protocol import ForecastRequest
from trader.forecast.runtime import ModelRuntime, RuntimeForecaster
from trader.forecast.samples import forecasts_from_samples
from trader.forecast.toto.config import MAX_CONTEXT
from trader.forecast.toto.model import Head, TotoModel
from trader.forecast.toto.sampling import replace_extreme, sample_mixture
from trader.forecast.toto.scaler import ScalerState, scale_context, scale_patch

# Decode buffers per chunk of sample paths stay under this many bytes.
DECODE_BUDGET_BYTES = 256 * 2**20
# Whether this torch can tie unbacked sizes of several inputs to one symbol (read once: the
# check runs on the decode path).
_SHARED_UNBACKED = (
    "shape_id" in inspect.signature(torch._dynamo.decorators.mark_unbacked).parameters
)


class TotoForecaster(RuntimeForecaster):
    name = "toto"

    def __init__(
        self,
        model: TotoModel,
        *,
        variates: Sequence[str] = ("close", "high", "low"),
        num_samples: int = 256,
        seed: int = 0,
        device: torch.device | None = None,
        precision: str = "float32",
        compile_mode: str | None = None,
        compiled: bool = False,
        compiler: Callable[..., Any] | None = None,
        max_recompiles: int = 2,
    ) -> None:
        self.device = device or torch.device("cpu")
        self.model = model.to(self.device).eval()
        self.variates = tuple(variates)
        self.num_samples = num_samples
        self.seed = seed
        self._precision = Autocast.of(precision, self.device)
        self.patch = model.config.patch_size
        compile_ = compiler or torch.compile
        self.runtime = ModelRuntime(
            self.name,
            compiled=compiled,
            compiler=lambda fn: _shape_oblivious(compile_(fn, mode=compile_mode, dynamic=True)),
            max_recompiles=max_recompiles,
        )
        self._prefill = self.runtime.wrap(self.model.prefill)
        self._decode = self.runtime.wrap(self.model.decode)

    @torch.inference_mode()
    def _forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        for index, request in enumerate(requests):
            if not request.bars:
                raise ValueError(f"{request.symbol}: no bars to forecast from")
            length = min(len(request.bars), MAX_CONTEXT)
            padded = math.ceil(length / self.patch) * self.patch
            groups[padded, request.horizon].append(index)
        out: list[Forecast | None] = [None] * len(requests)
        for (padded, _), indices in groups.items():
            batch = [requests[i] for i in indices]
            for i, forecast in zip(indices, self._group(batch, padded), strict=True):
                out[i] = forecast
        return [f for f in out if f is not None]

    def _group(self, requests: Sequence[ForecastRequest], padded: int) -> list[Forecast]:
        horizon = requests[0].horizon
        series, valid = self._inputs(requests, padded)
        generator = torch.Generator(device=self.device).manual_seed(self._seed(requests))
        samples = self.sample_paths(series, valid, horizon, self.num_samples, generator)
        return forecasts_from_samples(
            samples.permute(0, 2, 3, 1),  # [B, S, V, H] -> [B, V, H, S]
            symbols=[r.symbol for r in requests],
            fields=self.variates,
            levels=requests[0].quantiles,
            model=self.name,
            as_of=[r.bars[-1].end for r in requests],
            timeframe=[r.bars[-1].timeframe for r in requests],
        )

    def _inputs(
        self, requests: Sequence[ForecastRequest], padded: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, V, padded] values and validity, left-padded with zeros."""
        series = torch.zeros(len(requests), len(self.variates), padded, dtype=torch.float32)
        valid = torch.zeros(series.shape, dtype=torch.bool)
        for b, request in enumerate(requests):
            bars = request.bars[-MAX_CONTEXT:]
            values = [[getattr(bar, field) for bar in bars] for field in self.variates]
            series[b, :, padded - len(bars) :] = torch.tensor(values, dtype=torch.float32)
            valid[b, :, padded - len(bars) :] = True
        return series.to(self.device), valid.to(self.device)

    def _seed(self, requests: Sequence[ForecastRequest]) -> int:
        key = f"{self.seed}|" + "|".join(
            f"{r.symbol}@{r.bars[-1].end.isoformat()}" for r in requests
        )
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") >> 1

    def sample_paths(
        self,
        series: torch.Tensor,
        valid: torch.Tensor,
        horizon: int,
        samples: int,
        generator: torch.Generator,
    ) -> torch.Tensor:
        """[B, S, V, horizon] sample paths after the context `series` [B, V, T]."""
        config = self.model.config
        scaled, loc, scale, state = scale_context(
            series, valid, self.patch,
            stabilize=config.stabilize_with_global, exponent=config.scale_factor_exponent,
        )  # fmt: skip
        with self._precision():
            if self.runtime.compiling:
                _unbacked_batch((scaled, 0))
            head, keys, values = self._prefill(scaled)
        b, v = series.shape[:2]
        # The first patch needs no decoding: every path draws from the context's head.
        fan_out = _expand(head, samples)  # [B, S, V, P, K]
        first = sample_mixture(fan_out, generator)
        first = replace_extreme(first * scale[:, None, :, -1:] + loc[:, None, :, -1:])
        patches = math.ceil(horizon / self.patch)
        if patches == 1:
            return first[..., :horizon]
        chunks = []
        chunk = self._chunk(b, v, keys, patches - 1, samples)
        for start in range(0, samples, chunk):
            n = min(chunk, samples - start)
            chunks.append(
                self._decode_paths(
                    first[:, start : start + n], keys, values, state, patches, generator
                )
            )
        return torch.cat(chunks, dim=1)[..., :horizon]

    def _chunk(self, b: int, v: int, keys: torch.Tensor, slots: int, samples: int) -> int:
        layers, _, heads, _, dim = keys.shape
        per_path = 2 * layers * v * heads * max(2, slots) * dim * keys.element_size()
        return max(1, min(samples, DECODE_BUDGET_BYTES // max(1, per_path * b)))

    def _decode_paths(
        self,
        first: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        context_state: ScalerState,
        patches: int,
        generator: torch.Generator,
    ) -> torch.Tensor:
        b, s, v, p = first.shape
        layers, _, heads, context, dim = keys.shape
        context_keys = keys.view(layers, b, v, heads, context, dim)
        context_values = values.view(layers, b, v, heads, context, dim)
        state = context_state.repeat(s)
        # At least two slots: a size-1 dimension would get a compiled graph of its own.
        slots = max(2, patches - 1)
        decoded_k = keys.new_zeros((layers, b, s, v, heads, slots, dim))
        decoded_v = torch.zeros_like(decoded_k)
        drawn = [first]
        current = first
        for step in range(patches - 1):
            scaled, loc, scale, state = scale_patch(current.reshape(b * s, v, p), state, p)
            index = torch.tensor(step, device=self.device)
            paths = scaled.view(b, s, v, p)
            if self.runtime.compiling:
                _unbacked_batch(
                    (paths, 0),
                    (context_keys, 1),
                    (context_values, 1),
                    (decoded_k, 1),
                    (decoded_v, 1),
                )
            with self._precision():
                head, new_k, new_v = self._decode(
                    paths,
                    context_keys,
                    context_values,
                    decoded_k,
                    decoded_v,
                    index,
                )
            # The new patch's keys join the path's cache here, outside the compiled step: a
            # graph that mutates its inputs would cost CUDA graphs.
            decoded_k[..., step, :] = new_k[..., 0, :]
            decoded_v[..., step, :] = new_v[..., 0, :]
            draw = sample_mixture(head, generator)  # [B, S, V, P]
            loc, scale = loc.view(b, s, v, 1), scale.view(b, s, v, 1)
            current = replace_extreme(draw * scale + loc)
            drawn.append(current)
        return torch.cat(drawn, dim=-1)


def _unbacked_batch(*dimensions: tuple[torch.Tensor, int]) -> None:
    """Mark the symbols' dimension of a compiled call's inputs unbacked: a backed batch size
    still gets a graph of its own at 1 (inductor guards on it when it lays out the strides of
    a reshape), an unbacked one never specialises. One shared symbol where torch supports it
    (`shape_id`); an older torch would give each input a symbol of its own, which tracing
    cannot prove equal, so there several inputs stay backed (a batch of 1 may then cost one
    counted recompile)."""
    mark = torch._dynamo.decorators.mark_unbacked
    if _SHARED_UNBACKED:
        for tensor, dim in dimensions:
            mark(tensor, dim, shape_id="symbols")
    elif len(dimensions) == 1:
        mark(*dimensions[0])


def _shape_oblivious(compiled: Callable[..., Any]) -> Callable[..., Any]:
    """Trace with every size symbolic: no graph specialised on a size of 1 (one symbol, one
    slot, one context patch) and none on two sizes happening to be equal, so new context
    lengths, horizons and batch sizes reuse the graph instead of recompiling."""

    def call(*args: Any, **kwargs: Any) -> Any:
        # A torch config module: patch() restores the settings on exit.
        with fx_config.patch(backed_size_oblivious=True, use_duck_shape=False):  # type: ignore[attr-defined]
            return compiled(*args, **kwargs)

    return call


def _expand(head: Head, samples: int) -> Head:
    """[B, V, 1*P, K] -> [B, S, V, P, K] without copying."""

    def fan(t: torch.Tensor) -> torch.Tensor:
        return t.unsqueeze(1).expand(t.shape[0], samples, *t.shape[1:])

    return Head(fan(head.df), fan(head.loc), fan(head.scale), fan(head.logits))
