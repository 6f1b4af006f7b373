"""Eager or compiled model execution, and torch's own account of recompiles."""

from __future__ import annotations

import logging
import threading

from torch._logging._internal import set_logs

from trader.logging import adopt_library_loggers

# The logger torch writes "Recompiling function ..." reports to, once the `recompiles`
# artifact is on.
_RECOMPILES = "torch._dynamo.guards.__recompiles"


class RecompileCounter(logging.Handler):
    """Counts recompiles as torch reports them (not guessed from timings or shapes)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self._lock_count = threading.Lock()
        self.count = 0
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        lines = record.getMessage().splitlines()
        if lines and lines[0].startswith("Recompiling function"):
            with self._lock_count:
                self.count += 1
                # The first guard that failed says why (a shape, a Python value, ...).
                self.reasons.append(lines[2].strip(" -") if len(lines) > 2 else lines[0])

    def install(self) -> RecompileCounter:
        # torch's log settings are process-wide; this turns one artifact on and keeps the
        # lines in our pipeline.
        set_logs(recompiles=True)
        adopt_library_loggers("torch")
        logging.getLogger(_RECOMPILES).addHandler(self)
        return self

    def uninstall(self) -> None:
        logging.getLogger(_RECOMPILES).removeHandler(self)
