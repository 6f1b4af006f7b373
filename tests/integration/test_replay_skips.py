"""`trader run --replay` and `trader demo` end as `trader backtest` does: each symbol's skipped
ticks by reason in the first lines of output, and exit 1 when a symbol skipped more than
`backtest.max_skipped_share` of them, unless --allow-skips; the log says when a symbol
starts and stops skipping, not once a tick. Real recorded bars (tests/data: SOL/USDT 1h, and
the demo's own excerpt), with a candle taken out of every eight here."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import sqlite3
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tests.integration.daemon import daemon_env, recording
from tests.recorded import SOLUSDT_1H_2022
from trader.backtest.run import run_backtest
from trader.config.schema import Settings
from trader.demo.run import DemoOptions, run_demo
from trader.exit_codes import EX_FAILED
from trader.market.replay import read_recording

pytestmark = pytest.mark.integration

CONTEXT = 48  # daemon_env's market.context_bars


def holed(source: Path | bytes, path: Path, clean: int, holes: int, then: int = 0) -> Path:
    """`source`'s first `clean` rows as recorded, then `holes` rows with every eighth taken
    out (a symbol never has the 16 bars in a row it needs to trade again), then `then` rows
    as recorded, as a CSV."""
    data = source if isinstance(source, bytes) else source.read_bytes()
    header, *rows = gzip.decompress(data).decode().splitlines()
    cut = [row for i, row in enumerate(rows[clean : clean + holes]) if i % 8 != 7]
    after = rows[clean + holes : clean + holes + then]
    path.write_text("\n".join([header, *rows[:clean], *cut, *after]) + "\n")
    return path


def ledger_skips(ledger: Path) -> tuple[int, Counter[str]]:
    """The ticks the ledger booked, and SOL/USDT's skipped ones by reason."""
    with sqlite3.connect(ledger) as c:
        rows = [json.loads(s) for (s,) in c.execute("SELECT skipped FROM ticks")]
    return len(rows), Counter(r["SOL/USDT"] for r in rows if "SOL/USDT" in r)


def said(reasons: Counter[str]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]))


def events(stderr: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stderr.splitlines()]


def test_a_replay_that_mostly_skipped_says_so_first_and_exits_1(cli, tmp_path):
    data = holed(SOLUSDT_1H_2022, tmp_path / "SOLUSDT_1h.csv", clean=200, holes=400)
    done = cli.run("run", "--replay", str(data), env=daemon_env(tmp_path))
    assert done.returncode == EX_FAILED, done.stderr[-3000:]
    ticks, reasons = ledger_skips(tmp_path / "ledger.sqlite3")
    skipped = reasons.total()
    assert skipped > ticks / 2  # the case: most ticks skipped
    heading, line, *rest = done.stdout.splitlines()
    assert heading == (
        "trader run --replay did not do what was asked: a symbol skipped more than "
        f"backtest.max_skipped_share (5%) of its {ticks:,} ticks (exit 1 unless --allow-skips):"
    )
    assert line == (
        f"  SOL/USDT: {skipped:,} of {ticks:,} ticks skipped ({skipped / ticks:.1%}): "
        f"{said(reasons)} - more than backtest.max_skipped_share (5%)"
    )
    assert rest == []
    logged = events(done.stderr)
    (verdict,) = [e for e in logged if e["event"] == "replay skipped too many ticks"]
    assert verdict["level"] == "error"
    assert verdict["skipped"] == {"SOL/USDT": dict(reasons)}
    # The log: one line as it started skipping and one as the gap began, then a reminder
    # every 100 ticks; never one a tick.
    per_event = Counter(e["event"] for e in logged if e.get("symbol") == "SOL/USDT")
    assert per_event["symbol skipped"] == len(reasons) == 2
    assert per_event["symbol still skipped"] == skipped // 100
    assert per_event["symbol no longer skipped"] == 0  # it never had 16 bars in a row again

    # Accepted: the same summary first, exit 0.
    again = tmp_path / "accepted"
    again.mkdir()
    done = cli.run("run", "--replay", str(data), "--allow-skips", env=daemon_env(again))
    assert done.returncode == 0, done.stderr[-3000:]
    heading, line = done.stdout.splitlines()
    assert heading == (
        "trader run --replay: a symbol skipped more than backtest.max_skipped_share (5%) of its "
        f"{ticks:,} ticks (accepted with --allow-skips):"
    )
    assert line.startswith(f"  SOL/USDT: {skipped:,} of {ticks:,} ticks skipped")


def test_a_replay_that_skipped_nothing_says_so_and_exits_0(cli, tmp_path):
    data = recording(tmp_path, CONTEXT + 40)
    done = cli.run("run", "--replay", str(data), env=daemon_env(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    ticks, reasons = ledger_skips(tmp_path / "ledger.sqlite3")
    assert reasons.total() == 0
    assert done.stdout.splitlines() == [
        f"trader run --replay: skipped ticks of {ticks:,}, within backtest.max_skipped_share (5%):",
        f"  SOL/USDT: 0 of {ticks:,} ticks skipped (0.0%)",
    ]
    # Without --replay there are no ticks of a file to judge.
    refused = cli.run("run", "--allow-skips", env=daemon_env(tmp_path))
    assert refused.returncode == 2
    assert "--allow-skips applies to --replay" in refused.stderr


@pytest.mark.parametrize("accepted", [False, True])
def test_a_demo_that_mostly_skipped_says_so_first_and_exits_1(tmp_path, accepted):
    excerpt = (resources.files("trader.demo") / "SOLUSDT_1h.csv.gz").read_bytes()
    # Its 512 bars of context as recorded, then holes: most of the 96 ticks skip.
    data = holed(excerpt, tmp_path / "SOLUSDT_1h.csv", clean=530, holes=100)
    out = io.StringIO()
    folder = tmp_path / "demo"
    options = DemoOptions(folder, ticks=96, allow_skips=accepted, recording=data)
    code = run_demo(options, out)
    ticks, reasons = ledger_skips(folder / "ledger.sqlite3")
    skipped = reasons.total()
    assert ticks == 96
    assert skipped > ticks / 2
    end = out.getvalue().split("\n\n")[1].splitlines()  # after the start and the progress
    line = (
        f"  SOL/USDT: {skipped:,} of {ticks:,} ticks skipped ({skipped / ticks:.1%}): "
        f"{said(reasons)} - more than backtest.max_skipped_share (5%)"
    )
    if accepted:
        assert code == 0
        assert end == [
            "trader demo: a symbol skipped more than backtest.max_skipped_share (5%) of its 96 "
            "ticks (accepted with --allow-skips):",
            line,
        ]
    else:
        assert code == EX_FAILED
        assert end == [
            "trader demo did not do what was asked: a symbol skipped more than "
            "backtest.max_skipped_share (5%) of its 96 ticks (exit 1 unless --allow-skips):",
            line,
        ]
        assert "done in" not in out.getvalue()
    assert "what happened" in out.getvalue()  # the ledger's summary follows either way


def test_a_backtest_logs_a_run_of_skips_as_the_daemon_does(tmp_path):
    # The backtest's data step replays a plan, and books quiet stretches without it: the
    # log still says when the symbol starts skipping, why, and when it is priced again.
    data = holed(SOLUSDT_1H_2022, tmp_path / "SOLUSDT_1h.csv", clean=300, holes=200, then=100)
    sol = read_recording(data, "SOL/USDT")
    settings = Settings(
        market={"context_bars": 64, "min_contiguous_bars": 16},
        forecast={"model": "baseline", "baseline_lookback": 32},
        backtest={"cache_dir": tmp_path / "cache"},
    )
    with capture_logs() as logs:
        result = asyncio.run(run_backtest(settings, {"SOL/USDT": sol}, strategies=["simple"]))
    reasons = result.runs["simple"].skipped_by_symbol["SOL/USDT"]
    said_ = [e for e in logs if e.get("symbol") == "SOL/USDT" and "skipped" in e["event"]]
    counts = Counter(e["event"] for e in said_)
    assert counts["symbol skipped"] == len(reasons) == 2
    assert counts["symbol still skipped"] == sum(reasons.values()) // 100
    (end,) = [e for e in said_ if e["event"] == "symbol no longer skipped"]
    assert end["reasons"] == dict(reasons)


def test_a_replay_stopped_before_it_booked_anything_says_so_and_fails(tmp_path: Path):
    """A SIGTERM during start-up can leave a ledger that is migrated and holds no account yet:
    the verdict reads it without a traceback, says the replay booked no tick, and fails."""
    from trader.backtest.replay_verdict import end_replay, read_verdict  # noqa: PLC0415
    from trader.ledger.database import Database  # noqa: PLC0415

    ledger = tmp_path / "ledger.db"

    async def made_only() -> None:
        await (await Database.open(ledger)).close()

    asyncio.run(made_only())
    verdict = read_verdict(ledger, ["SOL/USDT"], 0.5)
    out = io.StringIO()
    with capture_logs() as logs:
        code = end_replay(verdict, accepted=True, out=out)
    assert code == EX_FAILED
    assert out.getvalue() == "trader run --replay did not do what was asked: it booked no tick\n"
    assert [log["event"] for log in logs] == ["replay booked no tick"]
