"""How a run shows itself going: on a terminal, a progress bar (steps, loss, ETA) with the
notable lines written above it; off a terminal, JSON log lines (a line per logging step).
Only rank 0 speaks."""

from __future__ import annotations

import sys
from typing import Any

from trader.logging import get_logger


class Progress:
    def __init__(self, total: int, initial: int, *, speak: bool, terminal: bool | None = None):
        self.log = get_logger("trader.finetune")
        self.speak = speak
        tty = sys.stderr.isatty() if terminal is None else terminal
        self.bar: Any = None
        if speak and tty:
            from tqdm import tqdm  # noqa: PLC0415 - terminals only

            self.bar = tqdm(
                total=total, initial=initial, unit="step", dynamic_ncols=True, file=sys.stderr
            )

    def advance(self, loss: float) -> None:
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            self.bar.update(1)

    def say(self, event: str, text: str, **fields: Any) -> None:
        """A notable line: above the bar on a terminal, a JSON log line elsewhere."""
        if not self.speak:
            return
        if self.bar is not None:
            self.bar.write(text, file=sys.stderr)
        else:
            self.log.info(event, **fields)

    def warn(self, event: str, text: str, **fields: Any) -> None:
        if self.speak:
            self.log.warning(event, message=text, **fields)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
