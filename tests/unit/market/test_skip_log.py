"""Skipped ticks in the log: a symbol behind a run of holes says so when it starts skipping, when
it first skips for another reason, every `REMIND_EVERY` ticks it goes on, and when it is
priced again, never once a tick. The daemon's data step and the backtest's planned one alike.
Real recorded bars (tests/data: SOL/USDT 1h, 2022-23), with candles taken out here."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import datetime

from structlog.testing import capture_logs

from tests.recorded import SOLUSDT_1H_2022
from trader.clock import SimulatedClock
from trader.config.market_settings import MarketSettings
from trader.domain import from_epoch_ms
from trader.market.hygiene import SkipReason
from trader.market.quotes import FixedSpread
from trader.market.replay import Recording, ReplayMarketData, read_recording
from trader.market.replay_calendars import replay_calendars
from trader.market.skip_log import REMIND_EVERY
from trader.market.step import MarketDataStep

CONTEXT = 64
SYMBOL = "SOL/USDT"
HOLES = range(207, 560, 8)  # a candle out of every 8: the symbol never has 16 bars in a row


def holed() -> tuple[Recording, list[int]]:
    """The recording with a candle out of every 8 from row 207 to 560, and every bar close
    (the ticks, the holes' too: the market had those hours)."""
    full = read_recording(SOLUSDT_1H_2022)
    step = full.timeframe.seconds * 1000
    ends = [row[0] + step for row in full.rows]
    rows = [row for i, row in enumerate(full.rows) if i not in HOLES]
    return replace(full, rows=rows), ends


async def walk(recording: Recording, ticks: list[int]) -> list[dict[str, SkipReason]]:
    settings = MarketSettings(symbols=[SYMBOL], context_bars=CONTEXT, min_contiguous_bars=16)
    replay = replay_calendars(settings, {SYMBOL: recording})
    clock = SimulatedClock(from_epoch_ms(ticks[0]))
    feed = ReplayMarketData({SYMBOL: replay.recordings[SYMBOL]}, clock, FixedSpread(4))
    step = MarketDataStep(feed, settings, calendars=replay.calendars)
    await step.start(clock.now())
    skipped = []
    for tick in ticks:
        await clock.sleep_until(from_epoch_ms(tick))
        skipped.append(dict((await step.run(clock.now())).skipped))
    return skipped


async def test_a_run_of_skipped_ticks_is_a_few_lines_with_its_counts_not_a_line_a_tick():
    recording, ends = holed()
    ticks = ends[CONTEXT:700]
    with capture_logs() as logs:
        skipped = await walk(recording, ticks)
    said = [e for e in logs if e.get("symbol") == SYMBOL and "skipped" in e["event"]]
    # What the step's ticks said, counted here: the log must agree with it.
    reasons = Counter(s[SYMBOL] for s in skipped if SYMBOL in s)
    first = next(i for i, s in enumerate(skipped) if s)
    last = max(i for i, s in enumerate(skipped) if s)
    assert all(SYMBOL in s for s in skipped[first : last + 1])  # one run, unbroken
    total = reasons.total()
    assert set(reasons) == {SkipReason.STALE_BARS, SkipReason.GAP}
    assert total > 300  # the case this is for: hundreds of ticks skipped

    events = Counter(e["event"] for e in said)
    assert events == {
        "symbol skipped": 2,  # when it started (the first hole's bar) and when a gap began
        "symbol still skipped": total // REMIND_EVERY,
        "symbol no longer skipped": 1,
    }
    started, other = [e for e in said if e["event"] == "symbol skipped"]
    when = datetime.fromisoformat
    assert started["reason"] == "stale_bars"
    assert when(started["since"]) == from_epoch_ms(ticks[first])
    assert other["reason"].startswith("gap: ")  # in words: how many bars in a row it has
    assert other["since"] == started["since"]
    for line in (e for e in said if e["event"] == "symbol still skipped"):
        assert line["ticks"] % REMIND_EVERY == 0
        assert sum(line["reasons"].values()) == line["ticks"]
    (end,) = [e for e in said if e["event"] == "symbol no longer skipped"]
    assert end["log_level"] == "warning"  # a log kept to warnings still says both ends
    assert end["ticks"] == total
    assert end["reasons"] == dict(reasons)
    assert when(end["at"]) == from_epoch_ms(ticks[last + 1])
