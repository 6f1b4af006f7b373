"""What a run will learn from: the files read, the split by time, and the windows of each
part, with what was skipped and why, as lines for the log and the summary. Too little data
for one window in a part is an error that says how much there is and what would do."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trader.config.finetune_settings import FinetuneSettings
from trader.training.data import Cut, Series, origins, spread, windows
from trader.training.split import Split, split_by_time


class NotEnoughData(Exception):
    """A part of the split holds no window; the message says what there is."""


@dataclass(frozen=True)
class Plan:
    split: Split
    train: Cut
    validation: Cut  # every validation window
    test: Cut  # every test origin
    window: int
    first_ms: int
    last_ms: int

    def validation_refs(self, settings: FinetuneSettings) -> Any:
        return spread(self.validation.refs, settings.validation_windows)

    def test_refs(self, settings: FinetuneSettings) -> Any:
        return spread(self.test.refs, settings.evaluation_windows)

    def window_lines(self, settings: FinetuneSettings) -> list[str]:
        lines = []
        for name, cut, used in (
            ("train", self.train, len(self.train.refs)),
            ("validation", self.validation, len(self.validation_refs(settings))),
            ("test", self.test, len(self.test_refs(settings))),
        ):
            size = self.window if name != "test" else settings.context + settings.horizon
            lines.append(
                f"{name}: {len(cut.refs)} windows of {size} bars ({used} used), "
                f"{cut.skipped} skipped because a hole (a missing or invalid bar) fell inside"
            )
        return lines


def data_lines(series: Sequence[Series]) -> list[str]:
    lines = []
    for s in series:
        skipped = ", ".join(f"{n} {reason}" for reason, n in s.skipped_rows.items()) or "none"
        lines.append(
            f"{s.symbol} ({s.path.name}): {len(s)} valid {s.timeframe} bars on the "
            f"{s.calendar} calendar; invalid rows skipped: {skipped}; bars missing by the "
            f"calendar: {s.missing_bars}"
        )
    return lines


def plan(series: Sequence[Series], settings: FinetuneSettings, window: int, min_gap: int) -> Plan:
    if not any(len(s) for s in series):
        raise NotEnoughData("the files hold no valid bar")
    gap = max(settings.gap_bars, min_gap)
    split = split_by_time(series, settings, gap)
    first = min(int(s.starts_ms[0]) for s in series if len(s))
    last = max(int(s.starts_ms[-1]) for s in series if len(s))
    train = windows(series, window, first, split.train_end_ms)
    validation = windows(series, window, split.validation_start_ms, split.validation_end_ms)
    test = origins(series, settings.context, settings.horizon, split.test_start_ms)
    for name, cut, size in (
        ("training", train, window),
        ("validation", validation, window),
        ("test", test, settings.context + settings.horizon),
    ):
        if len(cut.refs) == 0:
            raise NotEnoughData(
                f"the {name} part of the split holds no window of {size} consecutive valid "
                f"bars ({sum(len(s) for s in series)} valid bars in all, {cut.skipped} windows "
                "skipped across holes; split: "
                + "; ".join(split.lines(first, last))
                + "). Give more bars, or a shorter finetune.context / finetune.horizon"
            )
    return Plan(split, train, validation, test, window, first, last)
