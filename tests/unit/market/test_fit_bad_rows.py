"""A bad row (hygiene drops it) is a bar the data step will miss: the calendar's count of
expected bars missing includes it, and says so. Real bars: MSFT's trading days 2002-2004
(tests/data, bokeh-sampledata's Quandl WIKI prices), two of them made bad."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.recorded import MSFT_1D
from trader.domain import Timeframe
from trader.market.calendars.fit import fit_calendar, infer_calendar
from trader.market.hygiene import bad_rows
from trader.market.replay import read_recording

DAY = Timeframe("1d")


def msft_with_two_bad_rows() -> tuple[np.ndarray, list[bool]]:
    recording = read_recording(MSFT_1D, "MSFT/USD")
    rows = list(recording.rows)
    rows[300] = (*rows[300][:4], math.nan, *rows[300][5:])  # a NaN close
    low = rows[400][3]
    rows[400] = (rows[400][0], rows[400][1], low - 1, *rows[400][3:])  # high under its low
    return np.array(recording.starts, dtype=np.int64), bad_rows(rows, "MSFT/USD", DAY)


@pytest.mark.parametrize("named", [True, False])
def test_bad_rows_count_among_the_expected_bars_missing(named):
    starts, bad = msft_with_two_bad_rows()
    assert bad.count(True) == 2
    if named:
        fit = fit_calendar("XNYS", starts, DAY, naive=False, bad=bad)
        clean = fit_calendar("XNYS", starts, DAY, naive=False)
    else:
        fit = infer_calendar(starts, DAY, naive=False, bad=bad)
        clean = infer_calendar(starts, DAY, naive=False)
    assert fit.calendar.name == clean.calendar.name == "XNYS"  # the times still tell it
    assert (clean.missing, clean.dropped) == (0, 0)
    assert (fit.missing, fit.dropped, fit.expected) == (2, 2, 756)
    assert "2 of 756 expected bars missing (2 of them bad rows, dropped)" in fit.explanation


def test_flags_that_do_not_match_the_bars_are_refused():
    starts, bad = msft_with_two_bad_rows()
    with pytest.raises(ValueError, match="755 bad-row flags for 756 bars"):
        infer_calendar(starts, DAY, naive=False, bad=bad[1:])
