"""What a promotion writes (the record, then the live settings naming it with its digest),
loaded back by the daemon's own loader, and what a live start says of it: a warning when no
promotion can be shown, the capital share in force when one can."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from trader.config.loader import load_settings
from trader.config.promote_settings import PromoteSettings
from trader.config.schema import Settings
from trader.domain.capital_ramp import parse_ramp
from trader.promote.days import Span
from trader.promote.measure import Evidence
from trader.promote.verdict import Measures, Skill, judge
from trader.promote.write import write_promotion
from trader.service.promotion import promotion_problem

AT = datetime(2026, 1, 5, 14, 30, tzinfo=UTC)
MEASURES = Measures(
    days=20, sessions=False, expected_ticks=480, skipped_ticks=0, currency="USDT",
    starting_equity=Decimal(10000), paper_pnl=Decimal("1.5"), replay_pnl=Decimal("1.5"),
    paper_drawdown=0.01, replay_drawdown=0.01, skill=Skill("toto", 400, 0.05, 0.02, 0.08, 0.9),
)  # fmt: skip
PAPER = Settings(strategy={"name": "maxdiff", "position_fraction": 0.05},
                 risk={"max_drawdown": 0.07}, ledger={"path": "/var/paper.sqlite3"},
                 promote={"min_days": 99})  # fmt: skip


def promote(tmp_path: Path) -> tuple[Path, Path]:
    evidence = Evidence(MEASURES, PAPER, "ab" * 32, Span(20, False, 480, "continuous"), ["x"])
    thresholds = PromoteSettings(min_days=7)
    verdict = judge(MEASURES, thresholds)
    return write_promotion(
        evidence, verdict, thresholds, paper_ledger=tmp_path / "paper.sqlite3",
        out=tmp_path / "live" / "live.toml", live_ledger=tmp_path / "live" / "live.sqlite3",
        fraction=Decimal("0.1"), ramp=parse_ramp("0.1:7d,0.25:14d,1"), at=AT,
    )  # fmt: skip


def loaded(path: Path) -> Settings:
    return load_settings(path, environ={}, dotenv_file=None, secrets_dir=None).settings


def test_the_live_settings_are_papers_with_the_live_broker_share_ramp_and_promotion(tmp_path):
    settings_file, record = promote(tmp_path)
    assert record == tmp_path / "live" / "live.promotion.json"
    live = loaded(settings_file)
    assert live.strategy == PAPER.strategy
    assert live.risk == PAPER.risk
    assert live.broker.mode == "live"
    assert live.broker.live_confirmation is False  # the user's own opt-in, never written
    assert live.broker.live_capital_fraction == 0.1
    assert live.broker.live_ramp == "0.1:7d,0.25:14d,1"
    assert live.ledger.path == tmp_path / "live" / "live.sqlite3"
    assert live.promote == PromoteSettings()  # paper's thresholds are not passed on
    assert live.promotion.at == AT
    assert live.promotion.paper_ledger_sha256 == "ab" * 32
    assert live.promotion.record == record
    assert live.promotion.record_sha256 == hashlib.sha256(record.read_bytes()).hexdigest()
    assert promotion_problem(live) is None
    document = json.loads(record.read_text())
    assert document["passed"] is True
    assert document["thresholds"]["min_days"] == 7  # the thresholds it was judged by
    assert document["measures"]["shortfall"] == "0.0"
    assert document["paper_ledger_sha256"] == "ab" * 32
    assert document["live_ramp"] == "0.1:7d,0.25:14d,1"
    assert len(document["verdict"]) == 5
    lines = settings_file.read_text().splitlines()
    assert not [line for line in lines if line.startswith("live_confirmation")]


def test_a_live_start_without_a_promotion_it_can_show_is_warned_of(tmp_path):
    assert promotion_problem(Settings(broker={"mode": "live"})) == (
        "no promotion record: promotion.at is not set"
    )
    settings_file, record = promote(tmp_path)
    record.write_text(record.read_text().replace('"passed": true', '"passed": false'))
    problem = promotion_problem(loaded(settings_file))
    assert problem is not None
    assert "changed since it was written" in problem
    record.unlink()
    problem = promotion_problem(loaded(settings_file))
    assert problem is not None
    assert "cannot be read" in problem
