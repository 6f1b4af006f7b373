"""`trader shortfall --out DIR`'s report, on small hand-made runs attributed by the real
`attribute` (`tests/unit/domain/shortfall_cases.py`): "Read this first" states the verdict in
one line, the attribution table shows every part and its amounts add up exactly to the stated
difference, the costs file reads back as `--costs-from` takes it (figures worked out by hand),
the plots are PNGs, and every file is written private and never through a planted link."""

from __future__ import annotations

import html
import json
import os
import stat
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from tests.markdown import section, table
from tests.unit.domain.shortfall_cases import SOL, order, period, record, tick
from trader.backtest.measured_costs import SLIPPAGE, SPREAD, TAKER, read_costs_file
from trader.config.schema import Settings
from trader.domain import Side
from trader.domain.shortfall import Part, attribute
from trader.domain.shortfall_records import OrderRecord, Period
from trader.domain.shortfall_verdict import verdict
from trader.exit_codes import EX_CANTCREAT, EX_DATAERR, EX_OK
from trader.ledger.runs import DaemonRun, LateTick
from trader.private_files import UnsafePath
from trader.shortfall.command import ShortfallOutcome
from trader.shortfall.compare import Comparison, DecisionDifference, Filled, OrderComparison
from trader.shortfall.read import DecisionRow, LedgerRecord, StateEvent, TickRow
from trader.shortfall.replay import ReplayResult, Stretch
from trader.shortfall.report import (
    NothingToReport,
    with_report,
    write_shortfall_report,
)
from trader.shortfall.report_facts import amount

D = Decimal
BUY = Side.BUY
PNG = b"\x89PNG\r\n\x1a\n"
FIRST_LINE = "trader shortfall: the replay reproduced every decision (2 compared over 2 ticks)"


def costly() -> Period:
    """The daemon paid a wider real spread (99.8/100.2 against the model's 99.9/100.1), a
    fill 0.1 beyond its ask, and a higher fee; and the venue never filled a second buy the
    model filled."""
    model = [
        record(order(0, BUY, "1"), "99.9", "100.1", [("100.1", "1", "0.05")]),
        record(order(1, BUY, "1"), "104.9", "105.1", [("105.1", "1", "0.05")]),
    ]
    actual = [
        record(order(0, BUY, "1"), "99.8", "100.2", [("100.3", "1", "0.10")]),
        record(order(1, BUY, "1"), "104.9", "105.1"),
    ]
    return period(model, actual, end={SOL: "110"})


def ledger(path: Path, records: tuple[OrderRecord, ...], start: D, end: D) -> LedgerRecord:
    run = DaemonRun(1, "start", tick(0), tick(0), tick(1), "d" * 64, "0.1.0", "paper", "replay")
    return LedgerRecord(
        path, 10, "USDT", start, [run], {}, {}, {}, [TickRow(tick(n), "ok", 1, {}) for n in (0, 1)],
        [], [], {(r.order.created_at, r.order.symbol): r.quote for r in records},
        [r.order for r in records], [f for r in records for f in r.fills], [],
        [(tick(0), start), (tick(1), end)],
    )  # fmt: skip


def comparison(p: Period) -> Comparison:
    modelled = {r.order.client_order_id: r for r in p.modelled.orders}
    actual = {r.order.client_order_id: r for r in p.actual.orders}
    orders = []
    for cid in sorted(modelled.keys() | actual.keys()):
        a, m = actual.get(cid), modelled.get(cid)
        first = a or m
        assert first is not None
        orders.append(
            OrderComparison(
                cid, first.order.symbol, first.order.side, first.order.type,
                first.order.created_at, a.order if a else None, m.order if m else None,
                Filled(a.fills if a else ()), Filled(m.fills if m else ()),
                a.quote if a else None, m.quote if m else None,
            )
        )  # fmt: skip
    return Comparison(2, [], [], 2, [], orders)


def outcome(tmp: Path, p: Period, **changes: object) -> ShortfallOutcome:
    """The command's outcome for `p`, the daemon's ledger a file in `tmp` (costs.json takes
    its digest)."""
    path = tmp / "ledger.sqlite3"
    path.write_bytes(b"the daemon's ledger")
    actual = ledger(path, p.actual.orders, p.actual.start_equity, p.actual.end_equity)
    modelled = ledger(
        tmp / "replay.sqlite3", p.modelled.orders, p.modelled.start_equity, p.modelled.end_equity
    )
    stretch = Stretch(tick(0), tick(1), Settings(), "d" * 64,
                      [("broker.taker_fee_bps", "5", 0)])  # fmt: skip
    result = ReplayResult(tmp / "replay.sqlite3", [stretch], ticks=2, served=2)
    made = ShortfallOutcome(
        code=EX_OK, lines=[FIRST_LINE], record=actual, result=result, comparison=comparison(p),
        attribution=attribute(p), modelled=modelled, period=p,
    )  # fmt: skip
    return replace(made, **changes)  # type: ignore[arg-type]


def test_read_this_first_states_the_verdict_in_one_line_and_whether_decisions_were_reproduced(
    tmp_path: Path,
) -> None:
    done = outcome(tmp_path, costly())
    write_shortfall_report(done, tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    first = section(markdown, "Read this first").strip().splitlines()
    assert done.attribution is not None
    line = verdict(done.attribution, actual="paper", modelled="its backtest replay")
    assert line.startswith("paper made ")
    assert " less than its backtest replay: " in line
    assert first[0] == f"- {line}"
    assert first[1] == "- " + FIRST_LINE.removeprefix("trader shortfall: ")
    assert first[2].startswith("- period compared: 2024-01-01 00:00:00 .. 2024-01-01 01:00:00 UTC")
    assert "everything in the period was compared" in first[3]
    page = (tmp_path / "report.html").read_text()
    assert f"<li>{html.escape(line, quote=False)}</li>" in page


def test_the_attribution_table_shows_every_part_and_adds_up_exactly_to_the_difference(
    tmp_path: Path,
) -> None:
    done = outcome(tmp_path, costly())
    write_shortfall_report(done, tmp_path)
    rows = table(section((tmp_path / "report.md").read_text(), "Attribution"))
    a = done.attribution
    assert a is not None
    parts, total = rows[:-1], rows[-1]
    assert [r[0] for r in parts] == [p.label for p in Part]
    assert {r[0]: D(r[1]) for r in parts} == {p.label: v for p, v in a.parts.items()}
    assert total[0] == "difference (paper less replay)"
    assert sum((D(r[1]) for r in parts), D(0)) == D(total[1]) == a.difference
    assert a.difference == a.actual_pnl - a.modelled_pnl != 0
    # Several parts moved: spread, slippage, fees and the missed fill, each on its own row.
    moved = {r[0] for r in parts if D(r[1])}
    assert {"spread", "slippage", "fees", "missed fills"} <= moved
    assert "remainder: zero" in (tmp_path / "report.md").read_text()
    document = json.loads((tmp_path / "shortfall.json").read_text())
    assert document["comparison"]["attribution"]["difference"] == str(a.difference)


def test_costs_json_reads_back_as_costs_from_takes_it_and_the_report_says_what_is_measured(
    tmp_path: Path,
) -> None:
    done = outcome(tmp_path, costly())
    write_shortfall_report(done, tmp_path)
    costs = read_costs_file(tmp_path / "costs.json")
    # The daemon's one fill: a buy at 100.3 against the ask 100.2 it decided on, 0.1 / 100.2
    # = 9.98 bps beyond the touch; its quote's spread 0.4 over the mid 100 = 40 bps.
    assert costs.fills == 1
    assert costs.figures[SLIPPAGE].bps == pytest.approx(1000 / 100.2)
    assert costs.figures[SPREAD].bps == pytest.approx(40)
    # Fee 0.10 on a notional of 100.3: 9.97 bps.
    assert costs.figures[TAKER].bps == pytest.approx(1000 / 100.3)
    costs_section = section((tmp_path / "report.md").read_text(), "Costs: measured and modelled")
    rows = {r[0]: r for r in table(costs_section)}
    # Setting, replayed with, measured or modelled, the daemon's bps, fills, the replay's bps.
    assert rows[f"`{SLIPPAGE}`"][2:] == ["measured", "9.98", "1", "0.00"]
    # The replay's two fills: spreads of 0.2 over the mids 100 and 105, 20 and 19.05 bps.
    assert rows[f"`{SPREAD}`"][2:] == ["measured", "40.00", "1", f"{(20 + 2000 / 105) / 2:.2f}"]
    assert rows["`broker.maker_fee_bps`"][2] == "modelled"
    assert rows["`broker.max_volume_share`"][2] == "modelled"


def test_the_files_are_written_private_the_plots_are_pngs_and_the_html_stands_alone(
    tmp_path: Path,
) -> None:
    done = outcome(tmp_path, costly())
    written = write_shortfall_report(done, tmp_path)
    names = {p.name for p in written}
    assert names == {"report.md", "report.html", "shortfall.json", "costs.json", "equity.png",
                     "attribution.png", "slippage.png"}  # fmt: skip
    for path in written:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    for name in ("equity.png", "attribution.png", "slippage.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
        assert f"]({name})" in (tmp_path / "report.md").read_text()
    page = (tmp_path / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3
    assert 'src="equity.png"' not in page


def test_a_link_planted_at_a_report_file_is_refused_and_its_target_left_alone(
    tmp_path: Path,
) -> None:
    done = outcome(tmp_path, costly())
    target = tmp_path / "elsewhere.txt"
    target.write_text("not the report's")
    (tmp_path / "report.md").symlink_to(target)
    with pytest.raises(UnsafePath):
        write_shortfall_report(done, tmp_path)
    assert target.read_text() == "not the report's"


def test_a_report_that_cannot_be_written_exits_73_saying_so_first(tmp_path: Path) -> None:
    done = outcome(tmp_path, costly())
    (tmp_path / "shortfall.json").symlink_to(tmp_path / "nowhere")
    said = with_report(done, tmp_path)
    assert said.code == EX_CANTCREAT
    assert said.lines[0].startswith(f"trader shortfall: cannot write the report in {tmp_path}: ")
    assert said.lines[1:] == done.lines


def test_a_written_report_is_named_in_the_last_line(tmp_path: Path) -> None:
    done = outcome(tmp_path, costly())
    said = with_report(done, tmp_path)
    assert said.code == EX_OK
    assert said.lines[:-1] == done.lines
    assert said.lines[-1].startswith(f"report: {tmp_path / 'report.html'} (")
    assert {p.name for p in said.written} >= {"report.md", "report.html", "shortfall.json"}
    first = section((tmp_path / "report.md").read_text(), "Read this first")
    assert "the replay's ledger was not kept" not in first


def test_without_the_replays_ledger_the_report_says_so_and_draws_the_daemons_curve(
    tmp_path: Path,
) -> None:
    done = outcome(tmp_path, costly(), modelled=None)  # nor at result.ledger
    with_report(done, tmp_path)
    first = section((tmp_path / "report.md").read_text(), "Read this first")
    assert "the replay's ledger was not kept: no replay equity curve" in first
    assert (tmp_path / "equity.png").read_bytes()[:8] == PNG


def test_without_the_attributions_period_the_costs_come_from_the_compared_orders(
    tmp_path: Path,
) -> None:
    with_period = tmp_path / "period"
    without = tmp_path / "orders"
    for folder, period_given in ((with_period, True), (without, False)):
        folder.mkdir()
        done = outcome(folder, costly())
        write_shortfall_report(done if period_given else replace(done, period=None), folder)
    a = json.loads((with_period / "costs.json").read_text())
    b = json.loads((without / "costs.json").read_text())
    assert a["actual"] == b["actual"]
    assert a["modelled"] == b["modelled"]
    assert a["fills"] == 1


def test_without_fills_nothing_is_measured_and_no_costs_file_is_written(tmp_path: Path) -> None:
    model = [record(order(0, BUY, "1"), "99.9", "100.1")]
    actual = [record(order(0, BUY, "1"), "99.9", "100.1")]
    done = outcome(tmp_path, period(model, actual, end={SOL: "110"}))
    written = write_shortfall_report(done, tmp_path)
    assert "costs.json" not in {p.name for p in written}
    assert not (tmp_path / "costs.json").exists()
    markdown = (tmp_path / "report.md").read_text()
    assert "- costs: none measured (the paper filled nothing): all modelled" in markdown
    assert "- paper made exactly what its backtest replay made" in markdown
    assert json.loads((tmp_path / "shortfall.json").read_text())["costs"] is None


def test_a_refused_attribution_and_a_decision_not_reproduced_are_said_first(
    tmp_path: Path,
) -> None:
    row = DecisionRow(tick(1), SOL, "simple", "long", "buy", "{}")
    other = DecisionRow(tick(1), SOL, "simple", "flat", "hold", "{}")
    bug = DecisionDifference(tick(1), SOL, "simple", row, other, True, True, True, True)
    p = costly()
    first = (
        "trader shortfall: the replay did not reproduce the daemon's decisions: first at "
        + bug.describe()
    )
    done = outcome(
        tmp_path, p, attribution=None, code=1,
        lines=[first, "attribution not possible: no mark for SOL/USDT"],
        comparison=replace(comparison(p), decision_differences=[bug]),
    )  # fmt: skip
    done = replace(done, refused="attribution not possible: no mark for SOL/USDT")
    write_shortfall_report(done, tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    items = section(markdown, "Read this first").strip().splitlines()
    assert items[0] == "- no attribution: attribution not possible: no mark for SOL/USDT"
    assert items[1] == "- " + first.removeprefix("trader shortfall: ")
    decisions = section(markdown, "Decisions")
    assert f"The first decision not reproduced: {bug.describe()}." in decisions
    assert table(decisions)[0][-1] == "yes"
    assert not (tmp_path / "attribution.png").exists()


def test_orders_the_attribution_took_otherwise_than_recorded_are_said_first(
    tmp_path: Path,
) -> None:
    borrowed = (
        "orders priced with the replay's quote (the ledger kept none for their decision): 2: "
        "their spread and quote show as slippage"
    )
    done = outcome(tmp_path, costly())
    write_shortfall_report(
        replace(done, lines=[*done.lines, borrowed], caveats=(borrowed,)), tmp_path
    )
    items = section((tmp_path / "report.md").read_text(), "Read this first").strip()
    assert f"- not compared: {borrowed}" in items.splitlines()


def test_late_ticks_halts_restarts_and_overrides_are_listed(tmp_path: Path) -> None:
    done = outcome(tmp_path, costly())
    assert done.record is not None
    late = [LateTick(tick(0), 42.5, False), LateTick(tick(1), 900.0, True)]
    events = [StateEvent(tick(1), "halted", "drawdown 12% beyond 10%")]
    runs = [*done.record.runs, replace(done.record.runs[0], id=2, stopped_at=None)]
    record = replace(done.record, late=late, events=events, runs=runs)
    write_shortfall_report(replace(done, record=record), tmp_path)
    ticks = section((tmp_path / "report.md").read_text(), "Ticks, halts and restarts")
    assert "- ticks run late: 1 (the latest 42.5 s)" in ticks
    assert "- ticks missed (later than the grace, not run): 1" in ticks
    assert "| 2024-01-01 01:00:00 | halted | drawdown 12% beyond 10% |" in ticks
    assert "no stop recorded (killed)" in ticks
    replayed = section((tmp_path / "report.md").read_text(), "The settings replayed")
    assert "- overridden: `broker.taker_fee_bps` = 0 (the daemon ran with '5')" in replayed
    document = json.loads((tmp_path / "shortfall.json").read_text())
    assert [t["missed"] for t in document["late_ticks"]] == [False, True]
    assert document["state_events"][0]["state"] == "halted"


def test_an_outcome_that_compared_nothing_has_no_report(tmp_path: Path) -> None:
    nothing = ShortfallOutcome(EX_DATAERR, ["trader shortfall: /x has no ticks"])
    with pytest.raises(NothingToReport, match="has no ticks"):
        write_shortfall_report(nothing, tmp_path)
    assert with_report(nothing, tmp_path) == nothing
    assert list(tmp_path.iterdir()) == []


def test_an_amount_is_shown_exactly() -> None:
    assert amount(D("-4.073523675395569620")) == "-4.07352367539556962"
    assert amount(D("100.000")) == "100"
    assert amount(D("0E-18")) == "0"
    assert amount(D("1E+3")) == "1000"
