"""From bars to what Kronos reads, and back: the six columns, the per-window z-score, the time
features. Each step is the reference's own arithmetic (numpy, float32), so a window normalises to
the same bits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import torch
from numpy.typing import NDArray

from trader.domain import Bar

COLUMNS = ("open", "high", "low", "close", "volume", "amount")
CLIP = 5.0
EPSILON = 1e-5


@dataclass(frozen=True)
class Window:
    """One symbol's context, normalised: values [T, 6] float32 with the mean and std [6] that
    undo it, and the time features [T, 5] of the bars and [H, 5] of the bars to forecast."""

    values: NDArray[np.float32]
    mean: NDArray[np.float32]
    std: NDArray[np.float32]
    stamps: NDArray[np.int64]
    future: NDArray[np.int64]


def window(bars: Sequence[Bar], horizon: int) -> Window:
    values, mean, std = normalise(bar_values(bars))
    last = bars[-1]
    future = [last.start + k * last.timeframe.duration for k in range(1, horizon + 1)]
    return Window(values, mean, std, time_features([b.start for b in bars]), time_features(future))


def bar_values(bars: Sequence[Bar]) -> NDArray[np.float32]:
    """[T, 6]: open, high, low, close, volume, amount. Amount is the quote volume when every bar
    has one, else volume times the mean price, as the reference fills a missing amount column
    (in float64, summing open + high + low + close in that order, as pandas does)."""
    raw = np.array([(b.open, b.high, b.low, b.close, b.volume) for b in bars], dtype=np.float64)
    quote = [b.quote_volume for b in bars]
    if all(q is not None for q in quote):
        amount = np.array(quote, dtype=np.float64)
    else:
        amount = raw[:, 4] * ((((raw[:, 0] + raw[:, 1]) + raw[:, 2]) + raw[:, 3]) / 4)
    table = np.column_stack([raw, amount]).astype(np.float32)
    # Column-major, like the array the reference gets from its DataFrame: numpy's sums along
    # axis 0 round differently for the two layouts, and the statistics must agree to the bit.
    return np.asfortranarray(table)


def normalise(
    values: NDArray[np.float32],
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
    """Z-score per column over the window (population std, + EPSILON), clipped to +-CLIP."""
    mean = np.mean(values, axis=0)
    std = np.std(values, axis=0)
    normed = np.clip((values - mean) / (std + EPSILON), -CLIP, CLIP)
    return normed, mean, std


def denormalise(
    x: torch.Tensor, mean: NDArray[np.float32], std: NDArray[np.float32]
) -> torch.Tensor:
    """x [..., 6] float32 back to prices and volumes (elementwise, so the same bits as numpy)."""
    scale = torch.from_numpy(std).to(x.device) + EPSILON
    return x * scale + torch.from_numpy(mean).to(x.device)


def time_features(stamps: Sequence[datetime]) -> NDArray[np.int64]:
    """[T, 5]: minute, hour, weekday (Monday 0), day, month, of each bar's timestamp.

    The timestamp is the bar's open time, in UTC: what exchanges stamp a bar with, and so what
    the reference is given when it is fed exchange data."""
    return np.array(
        [(t.minute, t.hour, t.weekday(), t.day, t.month) for t in stamps], dtype=np.int64
    ).reshape(-1, 5)
