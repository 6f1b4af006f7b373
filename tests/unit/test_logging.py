from __future__ import annotations

import io
import json
import logging
import os
import warnings

import pytest

from trader.config.daemon_settings import LogSettings
from trader.logging import configure_logging, get_logger, log_context


@pytest.fixture(autouse=True)
def _restore_root_logger():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.captureWarnings(False)


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_off_a_tty_every_line_is_json_with_the_essentials_first():
    stream = io.StringIO()
    configure_logging(LogSettings(), stream=stream)
    get_logger("trader.test").info("tick done", symbols=2)
    [line] = lines(stream)
    assert list(line)[:4] == ["timestamp", "level", "logger", "event"]
    assert line["event"] == "tick done"
    assert line["symbols"] == 2
    assert line["timestamp"].endswith("Z")


def test_standard_library_loggers_go_through_the_same_pipeline():
    stream = io.StringIO()
    configure_logging(LogSettings(), stream=stream)
    logging.getLogger("ccxt.base.exchange").warning("rate limited on %s", "binance")
    logging.getLogger("ccxt").info("GET /api/v3/ticker")  # chatty at INFO: suppressed
    logging.getLogger("apscheduler.executors").error("job failed")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("torch says something", UserWarning, stacklevel=1)
    events = [(line["logger"], line["level"], line["event"]) for line in lines(stream)]
    assert events[0] == ("ccxt.base.exchange", "warning", "rate limited on binance")
    assert events[1] == ("apscheduler.executors", "error", "job failed")
    assert events[2][0] == "py.warnings"
    assert "torch says something" in events[2][2]
    assert len(events) == 3


def test_context_is_bound_where_the_work_happens_and_only_there():
    stream = io.StringIO()
    configure_logging(LogSettings(), stream=stream)
    log = get_logger("trader.engine")
    with log_context(tick_id="2024-01-01T00:00Z", symbol="SOL/USDT"):
        log.info("decision")
        logging.getLogger("ccxt").warning("inside")
    log.info("after")
    first, second, third = lines(stream)
    assert (first["tick_id"], first["symbol"]) == ("2024-01-01T00:00Z", "SOL/USDT")
    assert second["symbol"] == "SOL/USDT"
    assert "symbol" not in third


def test_secrets_are_masked_in_every_line_whoever_wrote_it():
    stream = io.StringIO()
    secrets = ["sk-live-123456", 'pa"ss\\word']
    configure_logging(LogSettings(level="DEBUG"), stream=stream, secrets=secrets)
    log = get_logger("trader.test")
    log.info("connecting", headers={"X-MBX-APIKEY": "sk-live-123456"})
    logging.getLogger("ccxt").warning("signed request key=sk-live-123456")
    log.info("password", value='pa"ss\\word')
    try:
        raise RuntimeError("auth failed for sk-live-123456")
    except RuntimeError:
        log.exception("exchange error")
    text = stream.getvalue()
    assert "sk-live-123456" not in text
    assert "ss\\\\word" not in text
    assert text.count("**********") == 5
    assert len(lines(stream)) == 4


def test_log_level_filters_and_json_can_be_forced_on_a_tty():
    read_fd, write_fd = os.openpty()
    with os.fdopen(write_fd, "w") as tty:
        configure_logging(LogSettings(level="WARNING", format="json"), stream=tty)
        get_logger("t").info("hidden")
        get_logger("t").warning("shown")
        tty.flush()
        text = os.read(read_fd, 65536).decode()
    os.close(read_fd)
    [line] = [json.loads(x) for x in text.splitlines()]
    assert line["event"] == "shown"


def test_on_a_tty_lines_are_readable_colour_not_json():
    read_fd, write_fd = os.openpty()
    with os.fdopen(write_fd, "w") as tty:
        configure_logging(LogSettings(), stream=tty)
        get_logger("trader.service").info("ready", symbols=2)
        tty.flush()
        text = os.read(read_fd, 65536).decode()
    os.close(read_fd)
    assert "\x1b[" in text  # ANSI colour
    assert "ready" in text
    assert "symbols" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])
