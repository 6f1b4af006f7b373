"""--costs-from: a measured-costs file read back and mapped onto the backtest's cost settings,
each cost measured (from which fills, replacing what) or modelled (why); the figures here are
worked out by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from trader.backtest.measured_costs import (
    FORMAT,
    CostsFileError,
    calibrate,
    grid_conflicts,
    read_costs_file,
)
from trader.config.loader import Origin
from trader.config.schema import Settings


def _group(side: str, type_: str, fills: int, spread: float | None, slip: float | None) -> dict:
    def dist(mean: float | None) -> dict | None:
        return None if mean is None else {"count": fills, "mean": mean}

    return {"side": side, "type": type_, "fills": fills, "unknown_spread": 0,
            "spread_bps": dist(spread), "slippage_bps": dist(slip), "delay_bps": None}  # fmt: skip


def _file(tmp_path: Path, groups: list[dict], fees: dict, ratio: float | None = None) -> Path:
    document = {
        "format": FORMAT, "venue": "alpaca", "mode": "live", "currency": "USD",
        "period": {"from": "2026-11-02T14:30:00+00:00", "to": "2026-11-06T21:00:00+00:00"},
        "ledger": {"path": "/var/lib/trader/ledger.sqlite3", "sha256": "0" * 64},
        "fills": sum(g["fills"] for g in groups),
        "actual": {"groups": groups, "limit_orders": 0, "limit_orders_filled": 0,
                   "limit_fill_ratio": ratio, "fee_bps": fees},
        "modelled": None,
    }  # fmt: skip
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(document))
    return path


def test_means_weigh_every_fill_once_across_sides_and_only_market_orders_slip(tmp_path):
    # Market buys: 3 fills slipping 4 bps on a 10 bps spread; market sells: 1 fill slipping
    # 8 bps on 6; limit buys: 4 fills on 2 bps, whose -50 bps "slippage" is no market order's.
    path = _file(tmp_path, [
        _group("buy", "market", 3, 10, 4), _group("sell", "market", 1, 6, 8),
        _group("buy", "limit", 4, 2, -50),
    ], {"taker": 5.004, "maker": 1.996})  # fmt: skip
    costs = read_costs_file(path)
    calibration = calibrate(costs, Settings(), {})
    values = {m.key: m.value for m in calibration.measured}
    assert values == {
        "market.replay_spread_bps": Decimal("5.50"),  # (3 * 10 + 6 + 4 * 2) / 8
        "broker.slippage_bps": Decimal("5.00"),  # (12 + 8) / 4
        "broker.taker_fee_bps": Decimal("5.00"),
        "broker.maker_fee_bps": Decimal("2.00"),
    }
    applied = calibration.apply(Settings(market={"replay_spread": "high_low"}))
    assert applied.broker.slippage_bps == Decimal("5.00")
    assert applied.market.replay_spread_bps == 5.5
    assert applied.market.replay_spread == "fixed"  # the spread measured, not estimated
    assert costs.period == "2026-11-02 14:30 .. 2026-11-06 21:00 UTC"


def test_what_was_not_measured_stays_modelled_and_says_why(tmp_path):
    path = _file(tmp_path, [_group("buy", "limit", 2, None, -3)], {"maker": 1.0}, ratio=0.5)
    calibration = calibrate(read_costs_file(path), Settings(), {})
    assert [m.key for m in calibration.measured] == ["broker.maker_fee_bps"]
    lines = calibration.lines()
    assert "modelled: broker.slippage_bps = 2 (no market-order fills measured)" in lines
    assert "modelled: market.replay_spread_bps = 5.0 (no fill priced on a real quote)" in lines
    assert "modelled: broker.taker_fee_bps = 10 (no taker fills measured)" in lines
    assert any("measured fill ratio 50.0%, which no backtest setting takes" in x for x in lines)


def test_a_negative_figure_is_taken_as_zero_and_said(tmp_path):
    path = _file(tmp_path, [_group("buy", "market", 2, 4, -1.5)], {"taker": -0.5})
    calibration = calibrate(read_costs_file(path), Settings(), {})
    measured = {m.key: m for m in calibration.measured}
    assert measured["broker.slippage_bps"].value == 0
    assert (
        "measured -1.50 bps, which the settings cannot take: 0"
        in measured["broker.slippage_bps"].note
    )
    assert measured["broker.taker_fee_bps"].value == 0


def test_the_value_each_measured_cost_replaced_is_named_with_where_it_came_from(tmp_path):
    path = _file(tmp_path, [_group("buy", "market", 1, 4, 1)], {"taker": 3})
    origins = {"broker.slippage_bps": Origin("env", "TRADER_BROKER__SLIPPAGE_BPS")}
    settings = Settings(broker={"slippage_bps": Decimal(7)})
    calibration = calibrate(read_costs_file(path), settings, origins)
    line = next(x for x in calibration.lines() if "broker.slippage_bps" in x)
    assert line == (
        "measured: broker.slippage_bps = 1.00 (mean of 1 fills; replaces 7 "
        "(environment (TRADER_BROKER__SLIPPAGE_BPS)))"
    )
    assert calibration.as_dict()["measured"]["broker.slippage_bps"]["value"] == "1.00"


def test_a_grid_may_not_vary_what_the_file_measured(tmp_path):
    path = _file(tmp_path, [_group("buy", "market", 1, 4, 1)], {"taker": 3})
    costs = read_costs_file(path)
    grid = ["broker.slippage_bps=1,2", "strategy.position_fraction=0.1,0.2",
            "market.replay_spread=fixed,high_low", "broker.maker_fee_bps=1,2"]  # fmt: skip
    assert grid_conflicts(costs, grid) == ["broker.slippage_bps", "market.replay_spread"]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda d: d.pop("venue"), "venue is missing or not text"),
        (lambda d: d["actual"].update(groups={}), "actual.groups is not a list"),
        (lambda d: d["actual"]["groups"][0].update(fills=-1), "is not a count: -1"),
        (lambda d: d["actual"]["groups"][0].update(side="long"), "side and type must be"),
        (lambda d: d["period"].update(to="2026-11-01T00:00:00+00:00"), "period.to is before"),
        (lambda d: d["actual"]["groups"][0]["slippage_bps"].update(mean=float("nan")),
         "is not a finite number"),
    ],
)  # fmt: skip
def test_a_broken_file_is_refused_naming_what_is_wrong(tmp_path, change, reason):
    path = _file(tmp_path, [_group("buy", "market", 1, 4, 1)], {"taker": 3})
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))
    with pytest.raises(CostsFileError, match=reason):
        read_costs_file(path)


def test_the_file_a_shortfall_writes_reads_back(tmp_path):
    from tests.unit.domain.shortfall_cases import order, record  # noqa: PLC0415
    from trader.backtest.measured_costs import costs_document  # noqa: PLC0415
    from trader.domain import Side  # noqa: PLC0415
    from trader.domain.shortfall_costs import measure_costs  # noqa: PLC0415
    from trader.domain.shortfall_records import Run  # noqa: PLC0415

    run = Run(Decimal(1), Decimal(1), (
        record(order(0, Side.BUY, "1"), "99", "101", [("101.101", "1", "0.101101")]),
    ))  # fmt: skip
    ledger = tmp_path / "ledger.sqlite3"
    ledger.write_bytes(b"x")
    begin = datetime(2026, 11, 2, tzinfo=UTC)
    document = costs_document(measure_costs(run), venue="binance", mode="paper",
                              currency="USDT", begin=begin, end=begin, ledger=ledger)  # fmt: skip
    assert document["ledger"] == {  # sha256 of b"x"
        "path": str(ledger),
        "sha256": "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
    }
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(document))
    costs = read_costs_file(path)
    assert costs.fills == 1
    assert costs.figures["broker.slippage_bps"].bps == pytest.approx(10)
    assert costs.figures["market.replay_spread_bps"].bps == pytest.approx(200)
    assert costs.figures["broker.taker_fee_bps"].bps == pytest.approx(10)
