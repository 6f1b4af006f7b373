"""SIGINT and SIGTERM ask a run to stop: the step in progress finishes, a checkpoint is
written, and the run exits 0 saying how to resume. A second SIGINT interrupts at once."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class StopRequest:
    def __init__(self) -> None:
        self.requested: str | None = None  # the signal's name, once one came

    def _handle(self, number: int, frame: FrameType | None) -> None:
        name = signal.Signals(number).name
        if self.requested is not None and number == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = name


@contextmanager
def stop_on_signals(stop: StopRequest) -> Iterator[StopRequest]:
    previous = {
        number: signal.signal(number, stop._handle) for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
