"""`trader reconcile` shows a perpetual account's positions: side, size, leverage, margin mode and
margin, liquidation price and its distance from the mark, unrealised P&L and funding, from the
figures a venue's reconcile reports (Binance positionRisk's fields) or from the paper account.

The report is built here, as a live broker's reconcile would fill it; the distance is worked by
hand: (mark - LP) / mark for a long, (LP - mark) / mark for a short.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

from tests.unit.domain.perp.tables import BTCUSDT_NOW
from trader.cli import main
from trader.domain.perp import LeverageBrackets, MarginMode, PerpAccount, PerpPosition
from trader.domain.perp.position_risk import PositionRisk, position_risks
from trader.domain.reconciliation import ReconcileReport, ReportBuilder

AT = datetime(2026, 11, 29, 8, tzinfo=UTC)
D = Decimal
# A cross short as positionRisk reports one: positionAmt -0.5, entryPrice 30000, markPrice 31000,
# 20x, initialMargin 775 (15,500 / 20), unRealizedProfit -500, and liquidationPrice 31872.51:
# a 1,000 wallet, 1000 - 0.5 (P - 30000) = 0.5 P x 0.004, P = 16000 / 0.502.
SHORT = PositionRisk.from_figures(
    "BTC/USDT", size=D("-0.5"), entry_price=D(30000), mark=D(31000), leverage=20,
    margin_mode="cross", margin=D(775), liquidation_price=D("31872.51"),
    unrealised_pnl=D(-500), funding_paid=D("-3.25"),
)  # fmt: skip
# A long covered down to zero (1x): the venue's liquidationPrice 0, read as none.
LONG = PositionRisk.from_figures(
    "ETH/USDT", size=D(2), entry_price=D(2000), mark=D(2100), leverage=1,
    margin_mode="cross", margin=D(4200), liquidation_price=None, unrealised_pnl=D(200),
)  # fmt: skip


def report() -> ReconcileReport:
    builder = ReportBuilder(AT, "binanceusdm")
    builder.checked.append("positions of 2 symbol(s)")
    builder.positions += [SHORT, LONG]
    return builder.build()


def test_each_position_is_a_line_of_the_report():
    lines = report().lines()
    assert (
        "position BTC/USDT: short 0.5 @ entry 30000 (mark 31000), 20x cross, margin 775.00, "
        "liquidation 31872.51 (2.81% from the mark), unrealised -500.00, funding received 3.25"
    ) in lines
    # (31872.51 - 31000) / 31000 = 2.8145%
    assert SHORT.distance is not None
    assert abs(SHORT.distance - D("872.51") / D(31000)) < D("1e-20")
    assert (
        "position ETH/USDT: long 2 @ entry 2000 (mark 2100), 1x cross, margin 4200.00, "
        "liquidation -- (covered to a zero price), unrealised 200.00"
    ) in lines
    assert lines.index(SHORT.describe()) < lines.index(LONG.describe())


def test_the_paper_account_gives_the_same_lines():
    brackets = {"BTC/USDT": LeverageBrackets.from_binance("BTC/USDT", BTCUSDT_NOW)}
    position = PerpPosition("BTC/USDT", D("-0.5"), D(30000), 10, MarginMode.ISOLATED, D(1500))
    account = PerpAccount.with_positions(D(10_000), brackets, [position])
    [risk] = position_risks(account, {"BTC/USDT": D(31000)}, {"BTC/USDT": D("-3.25")})
    # Isolated short, one bracket: LP = (1500 + 15000) / (0.5 x 0.004 + 0.5) = 32868.53,
    # (32868.53 - 31000) / 31000 = 6.03% from the mark.
    assert risk.liquidation_price is not None
    assert abs(risk.liquidation_price - D("32868.53")) < D("0.01")
    assert risk.describe().startswith(
        "position BTC/USDT: short 0.5 @ entry 30000 (mark 31000), 10x isolated, margin 1500.00, "
        "liquidation 32868.526 (6.03% from the mark)"  # 8 significant digits
    )
    assert risk.describe().endswith("unrealised -500.00, funding received 3.25")


def test_reconcile_prints_the_positions_and_json_carries_them(tmp_path, monkeypatch, capsys):
    async def fake(settings, dry_run):
        return report()

    ledger = tmp_path / "ledger.sqlite3"
    ledger.write_bytes(b"")
    monkeypatch.setenv("TRADER_LEDGER__PATH", str(ledger))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("trader.engine.reconcile_now.reconcile_now", fake)
    assert main(["reconcile"]) == 0
    out = capsys.readouterr().out
    assert SHORT.describe() in out.splitlines()
    assert main(["reconcile", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    short, long = data["positions"]
    assert short == {
        "symbol": "BTC/USDT", "side": "short", "size": "-0.5", "entry_price": "30000",
        "mark": "31000", "leverage": 20, "margin_mode": "cross", "margin": "775",
        "liquidation_price": "31872.51", "distance": str(SHORT.distance),
        "unrealised_pnl": "-500", "funding_paid": "-3.25",
    }  # fmt: skip
    assert (long["liquidation_price"], long["distance"], long["funding_paid"]) == (
        None,
        None,
        None,
    )


def test_a_spot_report_has_no_position_lines():
    lines = ReconcileReport(AT, "paper").lines()
    assert not [line for line in lines if line.startswith("position ")]
