"""bench/broker.py keeps working (its figures are read by people, not asserted here)."""

from __future__ import annotations

import pytest

from tests.integration.test_bench import bench
from tests.recorded import SOLUSDT_1H

pytestmark = pytest.mark.integration


def test_the_broker_bench_prints_its_figures_as_json():
    report = bench("broker.py", "--data", str(SOLUSDT_1H))
    assert report["orders"] == 20
    for key in ("live_market_order_ms", "paper_market_order_ms", "live_place_and_cancel_ms",
                "live_lost_answer_settled_ms", "reconcile_ms_20_open_orders"):  # fmt: skip
        assert report[key]["median"] > 0
    assert report["live_over_paper_market_order"] > 0
