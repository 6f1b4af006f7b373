"""What a fine-tuning run learns from: windows never bridge a hole (a dropped candle, a NaN
row) and count the ones skipped, a session break or a weekend is not a hole, the split is by
time with purged gaps, and test origins' future lies wholly in the held-out tail."""

from __future__ import annotations

from pathlib import Path

import backtesting
import numpy as np
import pytest

from tests.recorded import SOLUSDT_1H, SOLUSDT_1H_2022, XSHG_600977_5MIN, lines
from trader.config.finetune_settings import FinetuneSettings
from trader.config.market_settings import MarketSettings
from trader.market.files.options import AS_WRITTEN
from trader.training.data import origins, read_series, windows
from trader.training.plan import NotEnoughData, plan
from trader.training.split import split_by_time

HOUR_MS = 3_600_000
BACKTESTING = Path(backtesting.__file__).parent / "test"


def write(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(rows) + "\n")
    return path


def holed(tmp_path: Path) -> Path:
    """600 hours of SOL/USDT with the candle of row 100 missing and row 300's close a NaN,
    written newest first (a reversed export)."""
    header, *rows = lines(SOLUSDT_1H, 600)
    fields = rows[299].split(",")
    fields[4] = "nan"
    rows[299] = ",".join(fields)
    del rows[99]
    return write(tmp_path / "SOLUSDT_1h.csv", [header, *reversed(rows)])


def test_windows_skip_holes_and_count_them(tmp_path):
    [series] = read_series([holed(tmp_path)], MarketSettings(), AS_WRITTEN)
    assert len(series) == 598
    assert sum(series.skipped_rows.values()) == 1
    assert series.missing_bars == 2
    cut = windows([series], 20, 0, 2**62)
    assert cut.skipped == 2 * 19  # every window of 20 that holds either hole
    assert len(cut.refs) == 598 - 19 - cut.skipped
    for _, first in cut.refs.tolist():
        steps = np.diff(series.starts_ms[first : first + 20])
        assert (steps == HOUR_MS).all()


@pytest.mark.parametrize(
    ("path", "symbol", "length"),
    [
        (XSHG_600977_5MIN, "600977/CNY", 60),  # lunch and overnight breaks
        (BACKTESTING / "EURUSD.csv", "EUR/USD", 100),  # weekends
        (BACKTESTING / "GOOG.csv", "GOOG/USD", 30),  # trading days, plain dates
    ],
)
def test_session_breaks_weekends_and_holidays_are_not_holes(path, symbol, length):
    [series] = read_series([path], MarketSettings(), AS_WRITTEN, [symbol])
    cut = windows([series], length, 0, 2**62)
    assert cut.skipped == 0
    assert len(cut.refs) == len(series) - length + 1
    spans = [
        series.starts_ms[first + length - 1] - series.starts_ms[first]
        for _, first in cut.refs.tolist()
    ]
    assert max(spans) > (length - 1) * series.timeframe.seconds * 1000  # across a break


def test_the_split_is_by_time_with_purged_gaps_shared_by_every_file(tmp_path):
    early = write(tmp_path / "early.csv", lines(SOLUSDT_1H, 1500))
    late = write(tmp_path / "late.csv", lines(SOLUSDT_1H_2022))
    series = read_series([early, late], MarketSettings(), AS_WRITTEN, ["SOL/USDT", "SOL2/USDT"])
    settings = FinetuneSettings(context=48, horizon=6, gap_bars=3)
    chosen = plan(series, settings, window=54, min_gap=6)
    split = chosen.split
    assert split.gap_bars == 6  # at least the horizon, whatever gap_bars says
    assert split.validation_start_ms - split.train_end_ms == 6 * HOUR_MS
    assert split.test_start_ms - split.validation_end_ms == 6 * HOUR_MS
    starts = [s.starts_ms for s in series]
    for s, first in chosen.train.refs.tolist():
        assert starts[s][first + 53] < split.train_end_ms
    for s, first in chosen.validation.refs.tolist():
        assert starts[s][first] >= split.validation_start_ms
        assert starts[s][first + 53] < split.validation_end_ms
    reaches_back = False
    for s, first in chosen.test.refs.tolist():
        assert starts[s][first + 48] >= split.test_start_ms  # the future is held out
        reaches_back |= bool(starts[s][first] < split.test_start_ms)
    assert reaches_back  # contexts may lie before the tail: they are only input
    # Both files train; only the later one reaches the validation and test spans.
    assert set(chosen.train.refs[:, 0].tolist()) == {0, 1}
    assert set(chosen.validation.refs[:, 0].tolist()) == {1}
    assert set(chosen.test.refs[:, 0].tolist()) == {1}


def test_origins_are_exact_per_timeframe():
    [series] = read_series([XSHG_600977_5MIN], MarketSettings(), AS_WRITTEN, ["600977/CNY"])
    begin = int(series.starts_ms[1000])
    cut = origins([series], 40, 5, begin)
    firsts = cut.refs[:, 1]
    assert int(firsts.min()) + 40 == 1000


def test_too_few_bars_for_a_window_after_the_split_is_refused(tmp_path):
    path = write(tmp_path / "SOLUSDT_1h.csv", lines(SOLUSDT_1H, 300))
    series = read_series([path], MarketSettings(), AS_WRITTEN)
    settings = FinetuneSettings(context=64, horizon=8)
    with pytest.raises(NotEnoughData, match="validation part of the split holds no window"):
        plan(series, settings, window=72, min_gap=8)


def test_split_boundaries_follow_the_shares_of_bar_times(tmp_path):
    path = write(tmp_path / "SOLUSDT_1h.csv", lines(SOLUSDT_1H, 1000))
    series = read_series([path], MarketSettings(), AS_WRITTEN)
    settings = FinetuneSettings(validation_fraction=0.2, test_fraction=0.1)
    split = split_by_time(series, settings, gap_bars=5)
    assert split.validation_start_ms == series[0].starts_ms[700]
    assert split.test_start_ms == series[0].starts_ms[900]
    assert split.train_end_ms == series[0].starts_ms[695]


def test_a_context_too_short_for_the_naive_reference_is_refused_before_training():
    # The evaluation scores against the baseline's quantiles of past moves: horizon + 8 bars.
    with pytest.raises(ValueError, match=r"context \(20\) must hold the horizon \(16\) and 8"):
        FinetuneSettings(context=20, horizon=16)
    assert FinetuneSettings(context=24, horizon=16).context == 24
