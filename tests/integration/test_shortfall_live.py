"""`trader shortfall` on a live daemon's ledger: the daemon trading live on the emulator
(`trader sandbox`: Binance's signed API through ccxt, and Alpaca's, its US stock-style
sessions included), then replayed on the paper broker. Its ticks fall a settle delay after
each bar close, and the replay runs at those very times, so the same decision has the same
client order id in both; the real quotes are not the modelled ones, so a decision that differs
is put down to the quote, never blamed; and the P&L difference is split into parts that add up
to it exactly, the live run valued at the replay's marks."""

from __future__ import annotations

import json
import signal
from decimal import Decimal
from pathlib import Path

import pytest

from tests.integration.conftest import Cli, clean_env
from tests.integration.sandboxed import daemon_env, emulator, start_sandbox
from tests.integration.test_engine_crash import ticks_booked, wait_for_ticks
from trader.exit_codes import EX_OK

pytestmark = pytest.mark.integration
SYMBOLS = {"binance": ("SOL/USDT", "BTC/USDT"), "alpaca": ("SOL/USD", "BTC/USD")}
TICKS = 25


@pytest.mark.timeout(300)
@pytest.mark.parametrize("venue", ["binance", "alpaca"])
def test_a_live_run_on_the_emulator_is_replayed_at_its_own_ticks(
    cli: Cli, tmp_path: Path, venue: str
) -> None:
    sandbox, ready = start_sandbox(tmp_path, venue, SYMBOLS[venue])
    ledger = tmp_path / "ledger.sqlite3"
    try:
        daemon = cli.start("run", "--log-level", "WARNING", env=daemon_env(tmp_path, ready))
        wait_for_ticks(ledger, TICKS, daemon.process)
        assert ticks_booked(ledger) >= TICKS, daemon.process.poll()
        emulator(ready, "/__emulator__/clock", {"paused": True})
        daemon.process.send_signal(signal.SIGTERM)
        assert daemon.finish(timeout=60) == 0
    finally:
        sandbox.send_signal(signal.SIGTERM)
        sandbox.wait(timeout=30)
    done = cli.run("shortfall", str(ledger), "--json", env=clean_env())
    text = done.stdout
    lines = text[: text.find("\n{")].splitlines()
    document = json.loads(text[text.find("\n{") :])
    assert done.returncode == EX_OK, (lines, done.stderr[-2000:])
    assert lines[0].startswith("trader shortfall: the replay reproduced every decision"), lines
    assert "daemon starts: 1 (0 without a recorded stop), settings 1 distinct" in lines
    # The replay ran every tick the daemon ran, at the same times (a settle delay after the
    # bar close), so orders pair by client order id.
    assert document["ticks_only_actual"] == []
    assert document["ticks_both"] >= TICKS
    both = [o for o in document["orders"] if o["outcome"] not in ("only_actual", "only_modelled")]
    assert both, lines
    # The daemon decided on real quotes, the replay on modelled ones.
    assert {o["quote"]["source"] for o in both} == {"real"}
    assert {o["modelled_quote"]["source"] for o in both} == {"modelled"}
    parts = document["attribution"]
    values = {k: Decimal(v) for k, v in parts["parts"].items()}
    assert sum(values.values()) == Decimal(parts["difference"])
    assert values["remainder"] == 0, parts["remainder_reason"]
