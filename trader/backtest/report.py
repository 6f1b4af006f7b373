"""The backtest's report: the comparison table for the terminal, and a folder with report.md,
a self-contained report.html, stats.json and the PNG plots."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trader.backtest.document import (
    Block,
    Bullets,
    Code,
    Heading,
    Image,
    Paragraph,
    Table,
    text_table,
    write_pages,
)
from trader.backtest.findings import findings, run_failed
from trader.backtest.funding_report import funding_blocks, funding_json, terminal_lines
from trader.backtest.funding_report import write_records as write_funding_records
from trader.backtest.run import BUY_AND_HOLD, PORTFOLIO, Backtest, Line
from trader.backtest.stats import __doc__ as FORMULAS
from trader.private_files import write_file
from trader.skill import naive_reference

_COLUMNS = (
    ("strategy", False), ("symbol", False), ("return", True), ("annual", True),
    ("volatility", True), ("Sharpe", True), ("Sortino", True), ("max DD", True),
    ("DD days", True), ("trades", True), ("win rate", True), ("avg win", True),
    ("avg loss", True), ("exposure", True), ("turnover/yr", True), ("fees", True),
    ("spread+slip", True),
)  # fmt: skip


def _pct(value: float | None, signed: bool = False, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:+.{digits}f}%" if signed else f"{value * 100:.{digits}f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def _label(strategy: str) -> str:
    return "buy & hold" if strategy == BUY_AND_HOLD else strategy


def _days(result: Backtest, start: int, bars: int) -> float:
    """Calendar days between points `start` and `start + bars` of an equity curve (point i > 0
    is the tick i - 1; point 0, the start, is taken at the first tick)."""
    ticks = result.ticks_ms
    end = start + bars
    return float(ticks[max(end - 1, 0)] - ticks[max(start - 1, 0)]) / 86_400_000


def comparison(result: Backtest) -> Table:
    rows = []
    for line in _ordered(result.lines):
        p, t, c, e = line.performance, line.trades, line.costs, line.exposure
        days = f"{_days(result, p.max_drawdown_peak, p.max_drawdown_bars):.0f}"
        rows.append([
            _label(line.strategy), line.symbol, _pct(p.total_return, True),
            _pct(p.annual_return, True), _pct(p.volatility), _num(p.sharpe), _num(p.sortino),
            _pct(p.max_drawdown), days if p.max_drawdown_recovered else f"{days}*",
            str(t.trades) if t else "-", _pct(t.win_rate) if t else "-",
            _num(t.average_win) if t else "-", _num(t.average_loss) if t else "-",
            _pct(e.average), f"{e.turnover:,.1f}", _num(c.fees), _num(c.spread + c.slippage),
        ])  # fmt: skip
    return Table([name for name, _ in _COLUMNS], rows, [n for _, n in _COLUMNS])


def _ordered(lines: Sequence[Line]) -> list[Line]:
    """By symbol (the portfolio last), strategies in their order, buy-and-hold after them."""
    symbols = list(dict.fromkeys(line.symbol for line in lines if line.symbol != PORTFOLIO))
    order = {s: i for i, s in enumerate([*symbols, PORTFOLIO])}
    return sorted(lines, key=lambda line: (order[line.symbol], line.strategy == BUY_AND_HOLD))


def terminal_summary(result: Backtest, *, accepted: bool = False) -> str:
    """The table, after what must be read first (skips, failures, halts) and the data's
    calendars: a reader who stops after a few lines still knows what went wrong. `accepted`:
    the user took a failed run as it is (--allow-skips)."""
    first, last = int(result.ticks_ms[0]), int(result.ticks_ms[-1])
    ann = result.annualisation
    found = findings(result)
    lines = []
    if found:
        verdict = ""
        if run_failed(found):
            verdict = " (the run did not do what was asked: " + (
                "accepted with --allow-skips)" if accepted else "exit 1 unless --allow-skips)"
            )
        lines.append("READ THIS FIRST" + verdict)
        lines += [f"  {'!' if f.fails else '-'} {f.text}" for f in found]
    if result.costs is not None:
        lines.append(result.costs.headline())
    lines.append(
        f"backtest {', '.join(result.symbols)} {result.settings.market.timeframe} "
        f"{_when(first)} .. {_when(last)} ({len(result.ticks_ms):,} ticks), "
        f"model {_models(result)}; Sharpe/Sortino annualised with {ann.periods_per_year:,.1f} "
        f"bars a year ({ann.calendar})"
    )
    lines += [f"  {note}" for note in result.notes]
    return (
        "\n".join(lines)
        + "\n"
        + text_table(comparison(result))
        + "* drawdown not recovered by the end\n"
        + "".join(f"{line}\n" for line in terminal_lines(result))
    )


def _models(result: Backtest) -> str:
    return ", ".join(use.model for use in result.cache) or "none (buy-and-hold only)"


def _parameters(result: Backtest) -> str:
    s = result.settings
    sections: dict[str, Mapping[str, Any]] = {
        "market": s.market.model_dump(
            mode="json",
            include={
                "timeframe",
                "context_bars",
                "calendar",
                "calendars",
                "gap_policy",
                "min_contiguous_bars",
                "replay_spread",
                "replay_spread_bps",
                "replay_amount_step",
                "replay_min_notional",
            },
        ),
        "forecast": s.forecast.model_dump(
            mode="json",
            exclude={"hf_token", "weights_dir", "download"}
            | ({"toto", "toto2", "kronos"} - {use.model for use in result.cache}),
        ),
        "strategy": s.strategy.model_dump(mode="json", exclude={"name", "per_symbol"}),
        "risk": s.risk.model_dump(mode="json"),
        "broker": s.broker.model_dump(
            mode="json",
            include={
                "currency",
                "starting_cash",
                "maker_fee_bps",
                "taker_fee_bps",
                "slippage_bps",
                "max_volume_share",
            },
        ),
        "backtest": s.backtest.model_dump(mode="json", exclude={"cache_dir"}),
    }
    lines = []
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
        lines.append("")
    return "\n".join(lines).rstrip()


def _measured_parameters(result: Backtest) -> list[Block]:
    if result.costs is None:
        return []
    return [
        Paragraph(
            f"Except the costs measured from `{result.costs.source.path}` (--costs-from), "
            "which replace the settings' values, whatever their layer:"
        ),
        Bullets(result.costs.lines()),
    ]


def _record(result: Backtest) -> Table:
    rows = []
    for strategy, run in result.runs.items():
        bars_per_s = len(result.ticks_ms) / run.seconds if run.seconds else None
        refusals = ", ".join(f"{k} {v:,}" for k, v in sorted(run.refusals.items())) or "none"
        rows.append([
            strategy,
            ", ".join(f"{k} {v:,}" for k, v in sorted(run.outcomes.items())),
            ", ".join(f"{k} {v:,}" for k, v in sorted(run.decisions.items())) or "none",
            ", ".join(f"{k} {v:,}" for k, v in sorted(run.orders.items())) or "none",
            refusals,
            ", ".join(f"{k} {v:,}" for k, v in sorted(run.skipped.items())) or "none",
            str(len(run.states)),
            f"{run.seconds:,.1f} s ({_num(bars_per_s, 0)} bars/s)",
        ])  # fmt: skip
    return Table(
        ["strategy", "ticks", "decisions", "orders", "refused (rule)", "skipped", "state changes",
         "simulation"],
        rows, [False] * 6 + [True, True],
    )  # fmt: skip


def _quality_table(result: Backtest) -> Table:
    rows = []
    widths = sorted({i.nominal for q in result.quality for i in q.intervals}, reverse=True)
    for q in result.quality:
        inside = {round(i.nominal, 6): i.observed for i in q.intervals}
        rows.append([
            q.model, q.symbol, f"{q.forecasts:,}", str(q.horizon), _pct(q.mae_by_step[0], digits=3),
            _pct(q.mae, digits=3), _pct(q.mae_naive, digits=3), _num(q.skill, 3),
            _pct(q.crps, digits=3), _num(q.crps_skill, 3), _num(q.crps_skill_no_change, 3),
            *[_pct(inside.get(round(w, 6))) for w in widths],
        ])  # fmt: skip
    header = ["model", "symbol", "forecasts", "horizon", "MAE step 1", "MAE at horizon",
              "no-change MAE", "MAE skill vs no change", "CRPS", "CRPS skill",
              "CRPS skill vs no-change point",
              *[f"inside {w:.0%}" for w in widths]]  # fmt: skip
    return Table(header, rows, [False, False, *[True] * (len(header) - 2)])


def _blocks(result: Backtest, images: Mapping[str, list[Image]]) -> list[Block]:
    s = result.settings
    first, last = int(result.ticks_ms[0]), int(result.ticks_ms[-1])
    ann = result.annualisation
    blocks: list[Block] = [
        Heading(
            1,
            f"Backtest: {', '.join(result.symbols)} {s.market.timeframe}, model {_models(result)}",
        ),
        Paragraph(
            f"{len(result.ticks_ms):,} bars from {_when(first)} to {_when(last)} UTC "
            f"(each a tick of the engine), data: {', '.join(f'`{p.name}`' for p in result.files)}. "
            f"Strategies: {', '.join(result.strategies)}, each on a paper account of "
            f"{s.broker.starting_cash} {s.broker.currency}; written "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC."
        ),
        Paragraph(
            "Every strategy ran through the daemon's own engine (data step, forecaster, "
            "strategy, risk checks, paper broker, ledger) tick by tick, walk-forward: the "
            "decision at a bar's close saw the bars closed by then and nothing later. Orders "
            f"paid the taker fee ({s.broker.taker_fee_bps} bps) or maker fee "
            f"({s.broker.maker_fee_bps} bps), crossed a modelled spread "
            f"({s.market.replay_spread}, {s.market.replay_spread_bps} bps) with "
            f"{s.broker.slippage_bps} bps slippage; resting limits filled only when a later bar "
            f"traded through them, at most {s.broker.max_volume_share:.0%} of its volume."
        ),
        Heading(2, "Comparison"),
        comparison(result),
        Paragraph(
            "Returns, drawdowns and ratios are after every cost, with positions still open at "
            "the end closed at the last bid or ask (slippage and taker fee included), as "
            "buy-and-hold is. A symbol's line is the account as if it had traded that symbol "
            "alone. DD days: from the peak before the deepest drawdown to the first bar back "
            "at that peak; * not recovered by the end. Exposure: the mean of |position value| "
            "/ equity; turnover: traded value / mean equity, per year. Spread+slip: paid "
            "against the mid by orders that crossed the spread."
        ),
    ]
    if result.costs is not None:
        blocks.insert(3, Bullets(result.costs.lines()))
        blocks.insert(3, Paragraph(f"Costs calibrated (--costs-from): {result.costs.headline()}."))
    found = findings(result)
    if found or result.costs is not None:
        costs = [result.costs.headline()] if result.costs is not None else []
        blocks.insert(1, Bullets([*costs, *(f.text for f in found)]))
        blocks.insert(1, Heading(2, "Read this first"))
    blocks += funding_blocks(result)  # a perpetual's: none for spot
    blocks += [Heading(2, "The data"), Bullets(result.notes or ["nothing to say"])]
    blocks += [Heading(2, "Equity and drawdown"), *images.get("equity", [])]
    naive = naive_reference(s.forecast.naive_window, s.market.context_bars, s.forecast.horizon)
    blocks += [Heading(2, "The forecaster"), Paragraph(
        "Its accuracy apart from any strategy, over the same ticks. CRPS: of the predicted "
        "return's whole distribution (its quantiles), every step; CRPS skill = 1 - CRPS / "
        "CRPS of the naive reference from the same origins, above 0 when the model beats "
        f"it, the naive reference being {naive}: the "
        "baseline at that lookback scores 0. CRPS skill vs no-change point: the same against "
        "the no-change point forecast, which any forecast with a spread beats without "
        "knowing anything (shown, not the headline). MAE of the predicted return (median "
        "close / last close - 1) against the realised one, beside the no-change forecast's "
        "(predicted return 0); MAE skill = 1 - MAE / no-change MAE. Inside: how "
        "often the realised close fell inside each central interval of the forecast (a "
        "calibrated 80% interval holds it 80% of the time)."
    ), _quality_table(result), *images.get("forecast", [])]  # fmt: skip
    blocks += [
        Heading(2, "How the statistics are computed"),
        Code((FORMULAS or "").strip()),
        Paragraph(
            f"Annualisation: {ann.explanation}. Risk-free rate: "
            f"{s.backtest.risk_free_rate:.2%} a year."
        ),
        Heading(2, "Parameters"),
        Paragraph(
            "No parameter was selected on this period: every value comes from the settings "
            "(defaults < config file < environment), fixed before the first bar. There is no "
            "optimisation, so nothing here was tuned on the days reported."
        ),
        *_measured_parameters(result),
        Code(_parameters(result)),
        Heading(2, "What the engine did"),
        _record(result),
        Paragraph(
            "Every order, fill, decision (with its reason) and equity point is in each "
            "strategy's ledger (`ledgers/ledger-<strategy>.sqlite3`), the record these "
            "statistics were computed from."
        ),
        Heading(2, "Forecasts"),
        Bullets(
            [
                f"{use.model}: {use.windows:,} windows; {use.computed:,} forecast now in "
                f"{use.batches:,} batches of {s.backtest.batch_windows} (+{use.placeholders:,} "
                f"placeholders), {use.reused:,} from the cache, {use.live:,} during the run; "
                f"weights `{use.description.get('weights') or 'none'}`"
                for use in result.cache
            ]
            + [f"forecasting took {result.forecast_seconds:,.1f} s"]
        ),
    ]
    return blocks


def _plots(result: Backtest, folder: Path, forecast: list[Image] | None) -> dict[str, list[Image]]:
    # matplotlib loads only for a report written to files (a second or so).
    from trader.backtest.plots import equity_plot  # noqa: PLC0415

    images: dict[str, list[Image]] = {"equity": [], "forecast": []}
    for symbol in [*result.symbols, *([PORTFOLIO] if len(result.symbols) > 1 else [])]:
        curves = {line.strategy: line.equity for line in result.lines if line.symbol == symbol}
        hold = curves.pop(BUY_AND_HOLD, None)
        name = f"equity_{_slug(symbol)}.png"
        title = f"{symbol}: equity after costs, and drawdown"
        equity_plot(folder / name, title, result.ticks_ms, curves, hold)
        images["equity"].append(Image(name, title))
    images["forecast"] = forecast if forecast is not None else forecast_plots(result, folder)
    return images


def forecast_plots(result: Backtest, folder: Path) -> list[Image]:
    """The forecasts' plots (band and calibration) in `folder`: they need no strategy's run,
    so a backtest can draw them while its strategies run (`run_backtest`'s `meanwhile`)."""
    from trader.backtest.plots import band_plot, calibration_plot  # noqa: PLC0415

    images = []
    for quality in result.quality:
        model, symbol = quality.model, quality.symbol
        forecasts = result.bands.get((model, symbol), [])
        if forecasts:
            name = f"forecast_{model}_{_slug(symbol)}.png"
            ahead = f"{forecasts[0].steps} bar{'s' if forecasts[0].steps > 1 else ''} ahead"
            title = f"{symbol}: {model} forecast of the close {ahead}, last {len(forecasts)} bars"
            band_plot(folder / name, title, forecasts, result.closes[symbol])
            images.append(Image(name, title))
        name = f"calibration_{model}_{_slug(symbol)}.png"
        title = f"{symbol}: {model} calibration over {quality.forecasts:,} forecasts"
        calibration_plot(folder / name, title, quality)
        images.append(Image(name, title))
    return images


def _slug(symbol: str) -> str:
    return symbol.replace("/", "")


def statistics_json(result: Backtest) -> dict[str, Any]:
    def plain(value: object) -> Any:
        return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value  # type: ignore[arg-type]

    return {
        "symbols": result.symbols,
        "timeframe": result.settings.market.timeframe,
        "files": [str(p) for p in result.files],
        "first_tick": _when(int(result.ticks_ms[0])),
        "last_tick": _when(int(result.ticks_ms[-1])),
        "bars": len(result.ticks_ms),
        "annualisation": plain(result.annualisation),
        "findings": [plain(f) for f in findings(result)],
        "data_notes": result.notes,
        "costs_from": None if result.costs is None else result.costs.as_dict(),
        **({"funding": funding} if (funding := funding_json(result)) else {}),  # perpetuals
        "buy_and_hold_from": {s: _when(ms) for s, ms in result.held_from.items()},
        "risk_free_rate": result.settings.backtest.risk_free_rate,
        "lines": [
            {
                "strategy": line.strategy,
                "symbol": line.symbol,
                "performance": plain(line.performance),
                "trades": plain(line.trades),
                "costs": plain(line.costs),
                "exposure": plain(line.exposure),
            }
            for line in _ordered(result.lines)
        ],
        "forecast_quality": [plain(q) for q in result.quality],
        "runs": {
            strategy: {
                "outcomes": dict(run.outcomes),
                "skipped": dict(run.skipped),
                "decisions": dict(run.decisions),
                "orders": dict(run.orders),
                "refusals": dict(run.refusals),
                "fills": len(run.fills),
                "state_changes": [
                    {"at": c.at.isoformat(), "state": c.state, "reason": c.reason}
                    for c in run.states
                ],
                "simulation_seconds": run.seconds,
            }
            for strategy, run in result.runs.items()
        },
        "forecasts": [plain(use) for use in result.cache],
        "forecast_seconds": result.forecast_seconds,
    }


def write_report(
    result: Backtest, folder: Path, forecast_images: list[Image] | None = None
) -> list[Path]:
    """report.md, report.html, stats.json and the plots in `folder`; the files written.
    `forecast_images`: the forecasts' plots, if already drawn there (`forecast_plots`).
    Each file is written whole and private; UnsafePath for a link planted at any of them."""
    images = _plots(result, folder, forecast_images)
    blocks = _blocks(result, images)
    title = f"Backtest {', '.join(result.symbols)} {result.settings.market.timeframe}"
    written = [folder / image.file for group in images.values() for image in group]
    stats = json.dumps(statistics_json(result), indent=2) + "\n"
    written += write_pages(folder, "report", title, blocks) + write_funding_records(result, folder)
    return [*written, write_file(folder / "stats.json", stats, what="the report folder")]
