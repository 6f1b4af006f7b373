"""The split by time: train, a purged gap, validation, a purged gap, then the held-out test
tail. Boundaries are instants shared by every series (so no symbol's training reaches a time
another symbol is validated or tested on), placed at shares of all the bar times seen.

Training windows lie wholly before the first gap; validation windows wholly inside the
validation span; the test tail is what the evaluation forecasts, from contexts that may reach
back into earlier spans (they are only input), and nothing else ever reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trader.config.finetune_settings import FinetuneSettings
from trader.domain import from_epoch_ms
from trader.training.data import Series


@dataclass(frozen=True)
class Split:
    train_end_ms: int  # training bars start before this
    validation_start_ms: int
    validation_end_ms: int  # validation bars start before this
    test_start_ms: int
    gap_bars: int  # bars of the longest timeframe in each gap

    def as_dict(self) -> dict[str, Any]:
        return {
            "train_end": _iso(self.train_end_ms),
            "validation_start": _iso(self.validation_start_ms),
            "validation_end": _iso(self.validation_end_ms),
            "test_start": _iso(self.test_start_ms),
            "gap_bars": self.gap_bars,
        }

    def lines(self, first_ms: int, last_ms: int) -> list[str]:
        return [
            f"train       {_iso(first_ms)} .. before {_iso(self.train_end_ms)}",
            f"gap         {self.gap_bars} bars",
            f"validation  {_iso(self.validation_start_ms)} .. before "
            f"{_iso(self.validation_end_ms)}",
            f"gap         {self.gap_bars} bars",
            f"test (held out) {_iso(self.test_start_ms)} .. {_iso(last_ms)}",
        ]


def _iso(ms: int) -> str:
    return from_epoch_ms(ms).isoformat().replace("+00:00", "Z")


def split_by_time(series: Sequence[Series], settings: FinetuneSettings, gap_bars: int) -> Split:
    """Boundaries at the settings' shares of the distinct bar times of all series; each gap
    `gap_bars` bars of the longest timeframe long, taken from the span before it."""
    times = np.unique(np.concatenate([s.starts_ms for s in series]))
    count = len(times)
    validation = int(count * (1 - settings.validation_fraction - settings.test_fraction))
    test = int(count * (1 - settings.test_fraction))
    longest = max(s.timeframe.seconds for s in series) * 1000
    gap = gap_bars * longest
    validation_start, test_start = int(times[validation]), int(times[min(test, count - 1)])
    return Split(validation_start - gap, validation_start, test_start - gap, test_start, gap_bars)
