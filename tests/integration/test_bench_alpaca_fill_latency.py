"""bench/alpaca_fill_latency.py keeps working: both paths book every order's fill, the stream's
updates all arrive (its figures are read by people, not asserted here)."""

from __future__ import annotations

import pytest

from tests.integration.test_bench import bench
from tests.recorded import SOLUSDT_1H

pytestmark = pytest.mark.integration


def test_the_fill_latency_bench_measures_both_paths_for_every_order():
    report = bench("alpaca_fill_latency.py", "--data", str(SOLUSDT_1H))
    assert report["orders"] == 10
    for path in ("fill_to_booked_ms_stream", "fill_to_booked_ms_poll"):
        assert 0 < report[path]["median"] <= report[path]["p90"] <= report[path]["max"]
    assert report["stream_drops"] == 0
    assert report["updates_sent"] == 2 * report["orders"]  # new and fill, for each order
