"""structlog for the daemon and for the libraries it uses (ccxt, torch, apscheduler).

JSON lines when the log stream is not a TTY (journald, `docker logs`), readable colour on a TTY.
Logs go to stderr so that stdout stays for command output (`--json`). Context such as the tick
id and the symbol is bound with `log_context(...)` where the work happens. Every line passes a
redactor that masks the configured secrets, whatever library wrote it.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable
from typing import Any, TextIO

import structlog
from structlog.contextvars import bind_contextvars, reset_contextvars
from structlog.typing import EventDict, FilteringBoundLogger, Processor, WrappedLogger

from trader.config.daemon_settings import LogSettings

MASK = "**********"
# Libraries that narrate every request at INFO; their warnings still come through.
_CHATTY = ("ccxt", "urllib3", "asyncio", "apscheduler", "httpx", "filelock")

__all__ = ["adopt_library_loggers", "configure_logging", "get_logger", "log_context"]


class log_context:
    """Bind `values` to every line logged in the block; what they were before comes back
    after it. (structlog's bound_contextvars copies the whole context twice: too much for a
    backtest's tens of thousands of ticks.)"""

    __slots__ = ("_tokens", "_values")

    def __init__(self, **values: Any) -> None:
        self._values = values

    def __enter__(self) -> None:
        self._tokens = bind_contextvars(**self._values)

    def __exit__(self, *error: object) -> None:
        reset_contextvars(**self._tokens)


class _Redact:
    """Wrap a renderer: mask each secret in the rendered line, raw and JSON-escaped."""

    def __init__(self, renderer: Processor, secrets: Iterable[str]) -> None:
        self._renderer = renderer
        forms = {form for s in secrets if s for form in (s, json.dumps(s)[1:-1])}
        # Longest first, so a secret that contains another is masked whole.
        self._forms = sorted(forms, key=len, reverse=True)

    def __call__(self, logger: WrappedLogger, name: str, event: EventDict) -> str:
        line = self._renderer(logger, name, event)
        text = line if isinstance(line, str) else str(line)
        for form in self._forms:
            text = text.replace(form, MASK)
        return text


_FIRST = ("timestamp", "level", "logger", "event")


def _lead_with_essentials(logger: WrappedLogger, name: str, event: EventDict) -> EventDict:
    """timestamp, level, logger and event first: a JSON line reads left to right."""
    ordered = {key: event.pop(key) for key in _FIRST if key in event}
    ordered.update(event)
    return ordered


def configure_logging(
    settings: LogSettings, *, stream: TextIO | None = None, secrets: Iterable[str] = ()
) -> None:
    """Route structlog and standard-library logging through one pipeline onto `stream`.

    Logging is process-wide by nature; this is the one place that configures it.
    """
    out = sys.stderr if stream is None else stream
    as_json = settings.format == "json" or (settings.format == "auto" and not out.isatty())
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    renderer: Processor
    if as_json:
        shared += [structlog.processors.format_exc_info, _lead_with_essentials]
        renderer = structlog.processors.JSONRenderer(default=str)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=True)
    level = logging.getLevelNamesMapping()[settings.level]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        # Calls below the level return at once, before any processor runs (hot paths log).
        wrapper_class=structlog.make_filtering_bound_logger(level),
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            _Redact(renderer, secrets),
        ],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    # Again even where it was on: whatever replaced warnings.showwarning since (a test
    # harness restoring its own) would otherwise keep warnings out of the log.
    logging.captureWarnings(False)
    logging.captureWarnings(True)
    if "torch" in sys.modules:
        adopt_library_loggers("torch")


# torch's structured trace (every compile event with its payload, for TORCH_TRACE files) is
# not a log: it must not propagate, or each compile floods the log with DEBUG lines.
_NOT_LOGS = frozenset({"torch.__trace"})


def adopt_library_loggers(prefix: str) -> None:
    """Send a library's loggers through our pipeline. torch installs stderr handlers of its
    own (and stops propagation) when it is imported or reconfigures its logs: call this after
    either, so its lines come out as ours (JSON off a TTY, secrets masked)."""
    manager = logging.Logger.manager
    for name in [prefix, *[n for n in manager.loggerDict if n.startswith(prefix + ".")]]:
        if name in _NOT_LOGS:
            continue
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if type(handler) is logging.StreamHandler:
                logger.removeHandler(handler)
        logger.propagate = True


def get_logger(name: str, **context: Any) -> FilteringBoundLogger:
    """The logger for `name`, built now from the current configuration (binding resolves
    structlog's lazy proxy once, instead of on every call: this is on hot paths)."""
    logger: FilteringBoundLogger = structlog.get_logger(name).bind(**context)
    return logger
