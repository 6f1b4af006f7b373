"""From sample paths to the domain's forecasts: quantiles and means per field and step."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import torch

from trader.domain import Forecast, Timeframe


def forecasts_from_samples(
    samples: torch.Tensor,
    *,
    symbols: Sequence[str],
    fields: Sequence[str],
    levels: Sequence[float],
    model: str,
    as_of: Sequence[datetime],
    timeframe: Sequence[Timeframe],
) -> list[Forecast]:
    """`samples` is [symbol, field, step, sample] (any float dtype, any device)."""
    values = samples.detach().to(device="cpu", dtype=torch.float64)
    q = torch.tensor(list(levels), dtype=torch.float64)
    quantiles = torch.quantile(values, q, dim=-1)  # [level, symbol, field, step]
    means = values.mean(dim=-1)  # [symbol, field, step]
    steps = values.shape[2]
    out = []
    for i, symbol in enumerate(symbols):
        table = {
            field: {float(level): quantiles[j, i, f].tolist() for j, level in enumerate(levels)}
            for f, field in enumerate(fields)
        }
        mean = {field: means[i, f].tolist() for f, field in enumerate(fields)}
        out.append(Forecast(symbol, model, as_of[i], timeframe[i], steps, table, mean))
    return out
