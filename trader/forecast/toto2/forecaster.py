"""Toto 2.0 behind the `Forecaster` protocol.

Per call, requests are grouped by horizon and by context length rounded up to whole patches;
each group is one batch (symbols x variates), left-padded with unobserved steps, forecast in
one `forecast_knots` call. The model's nine quantile knots (0.1 .. 0.9) are the forecast's
quantiles: other levels inside that range are interpolated linearly between knots, levels
outside it are refused; the mean is the mean of the knots. No sampling: the same bars give
the same forecast.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch

from trader.domain import Forecast
from trader.forecast.autocast import Autocast
from trader.forecast.protocol import ForecastRequest
from trader.forecast.runtime import ModelRuntime, RuntimeForecaster
from trader.forecast.toto2.config import KNOTS
from trader.forecast.toto2.decode import Inputs, forecast_knots
from trader.forecast.toto2.model import Toto2Model


class Toto2Forecaster(RuntimeForecaster):
    name = "toto2"

    def __init__(
        self,
        model: Toto2Model,
        *,
        variates: Sequence[str] = ("close", "high", "low"),
        context: int = 4096,
        decode_block: int = 0,
        device: torch.device | None = None,
        precision: str = "float32",
        compiled: bool = False,
        compile_mode: str | None = None,
        compiler: Callable[..., Any] | None = None,
        max_recompiles: int = 2,
        random: str | None = None,
    ) -> None:
        self.device = device or torch.device("cpu")
        self.model = model.to(self.device).eval()
        self.variates = tuple(variates)
        self.patch = model.config.patch_size
        self.context = context
        if decode_block % self.patch:
            raise ValueError(
                f"forecast.toto2.decode_block = {decode_block} is not a multiple of the "
                f"model's patch ({self.patch})"
            )
        self.decode_block = decode_block
        self._precision = Autocast.of(precision, self.device)
        self.random = random  # the label of random weights, said with every load
        compile_ = compiler or torch.compile
        self.runtime = ModelRuntime(
            self.name,
            compiled=compiled,
            compiler=lambda fn: compile_(fn, mode=compile_mode, dynamic=True),
            max_recompiles=max_recompiles,
        )
        self._run = self.runtime.wrap(self.model.run)

    @torch.inference_mode()
    def _forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        for index, request in enumerate(requests):
            _check(request, self.patch)
            length = min(len(request.bars), self.context)
            groups[math.ceil(length / self.patch) * self.patch, request.horizon].append(index)
        out: list[Forecast | None] = [None] * len(requests)
        for (padded, horizon), indices in groups.items():
            batch = [requests[i] for i in indices]
            with self._precision():
                knots = forecast_knots(
                    self.model,
                    self._inputs(batch, padded),
                    horizon,
                    self.decode_block or None,
                    self._run,
                )
            for i, forecast in zip(indices, self._forecasts(batch, knots), strict=True):
                out[i] = forecast
        return [f for f in out if f is not None]

    def _inputs(self, requests: Sequence[ForecastRequest], padded: int) -> Inputs:
        """[B, V, padded] values and observed flags, left-padded with unobserved zeros."""
        series = torch.zeros(len(requests), len(self.variates), padded, dtype=torch.float32)
        observed = torch.zeros(series.shape, dtype=torch.bool)
        for b, request in enumerate(requests):
            bars = request.bars[-min(self.context, padded) :]
            values = [[float(getattr(bar, field)) for bar in bars] for field in self.variates]
            series[b, :, padded - len(bars) :] = torch.tensor(values, dtype=torch.float32)
            observed[b, :, padded - len(bars) :] = True
        # A patch with no observation at all needs the reference's masked attention; padding
        # shorter than a patch never makes one.
        missing = bool((~torch.unflatten(observed, -1, (-1, self.patch)).any(-1)).any())
        ids = torch.zeros(series.shape[:2], dtype=torch.long)
        return Inputs(
            series.to(self.device), observed.to(self.device), ids.to(self.device), missing
        )

    def _forecasts(
        self, requests: Sequence[ForecastRequest], knots: torch.Tensor
    ) -> list[Forecast]:
        table = knots.detach().to(device="cpu", dtype=torch.float64)  # [9, B, V, H]
        means = table.mean(dim=0)
        out = []
        for b, request in enumerate(requests):
            quantiles = {
                field: {float(q): _level(table[:, b, f], q) for q in request.quantiles}
                for f, field in enumerate(self.variates)
            }
            mean = {field: means[b, f].tolist() for f, field in enumerate(self.variates)}
            last = request.bars[-1]
            out.append(
                Forecast(
                    request.symbol,
                    self.name,
                    last.end,
                    last.timeframe,
                    request.horizon,
                    quantiles,
                    mean,
                )
            )
        return out


def _check(request: ForecastRequest, patch: int) -> None:
    if len(request.bars) < patch:
        raise ValueError(
            f"{request.symbol}: Toto 2.0 needs at least one patch of context ({patch} bars), "
            f"got {len(request.bars)}"
        )
    outside = [q for q in request.quantiles if not KNOTS[0] - 1e-9 <= q <= KNOTS[-1] + 1e-9]
    if outside:
        raise ValueError(
            f"Toto 2.0 forecasts the quantiles 0.1 to 0.9; {outside} lie outside them "
            "(set forecast.quantiles within that range)"
        )


def _level(knots: torch.Tensor, level: float) -> list[float]:
    """The quantile `level` from the knots [9, H]: a knot, or linear between two."""
    upper = min(bisect.bisect_left(KNOTS, level - 1e-9), len(KNOTS) - 1)
    if abs(KNOTS[upper] - level) < 1e-9 or upper == 0:
        return knots[upper].tolist()
    lower = upper - 1
    weight = (level - KNOTS[lower]) / (KNOTS[upper] - KNOTS[lower])
    return torch.lerp(knots[lower], knots[upper], weight).tolist()
