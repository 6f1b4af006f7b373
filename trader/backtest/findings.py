"""What a reader must know before trusting a backtest's table, and whether the run did what
was asked: symbols that skipped ticks (how many, why), ticks a stage failed in, halts and
what they meant for the rest of the run, strategies that never traded, forecasts the cache
lacked. Too many skipped ticks, or any failed tick, fails the run (exit 1 unless the user
accepts it): a table of figures over a period the engine mostly did not trade says nothing.
A strategy that never traded is said next, every one with why (`no_trade`), but does not
fail the run by itself: not trading may be right.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from trader.backtest.corporate_actions import split_findings
from trader.backtest.no_trade import Activity, why_no_trade
from trader.backtest.run import Backtest
from trader.backtest.skip_verdict import by_count
from trader.risk.engine import DAILY_LOSS, DRAWDOWN

_HALT_MEANING = {
    "stop": "no order for the rest of the run: what it held, it held to the end",
    "resume_next_day": "no order until the next day, then trading resumed",
    "reduce_only": "only orders that shrink a position until the next day, then trading resumed",
}


@dataclass(frozen=True)
class Finding:
    text: str
    fails: bool = False  # the run did not do what was asked: exit 1 unless accepted


def findings(result: Backtest) -> list[Finding]:
    # What fails the run first (it decides the exit), then every strategy that never traded.
    said = _skips(result) + _failures(result) + _halts(result)
    found = [f for f in said if f.fails] + _never_traded(result) + [f for f in said if not f.fails]
    first = int(result.ticks_ms[0])
    for symbol, held_from in result.held_from.items():
        if held_from != first:
            found.append(Finding(
                f"buy & hold on {symbol} bought at {_when(held_from)}, the first tick the "
                "strategies could trade it (it was flat before, as they were)"
            ))  # fmt: skip
    for use in result.cache:
        if use.live:
            found.append(Finding(
                f"{use.model}: {use.live} forecasts were not in the cache and were made "
                "during the run (the engine saw bars the recording's windows do not match)"
            ))  # fmt: skip
    found += [Finding(text) for text in split_findings(result)]
    found += [Finding(warning) for warning in result.warnings]
    return found


def _never_traded(result: Backtest) -> list[Finding]:
    """Every strategy that made no trade, and why, said first: a row of 0 trades reads as a
    result. Not failing the run by itself: not trading may be what the strategy should do."""
    symbols = len(result.symbols)
    found = []
    for strategy, run in result.runs.items():
        if run.fills:
            continue
        activity = Activity(
            ticks=len(result.ticks_ms) * symbols, symbols=symbols, flat=run.flat_reasons,
            wanted=sum(n for d, n in run.decisions.items() if d != "flat"), orders=run.orders,
            refusals=run.refusals, skipped=run.skipped,
        )  # fmt: skip
        found.append(Finding(f"{strategy}: 0 trades: {why_no_trade(activity)}"))
    return found


def _skips(result: Backtest) -> list[Finding]:
    """Skipped ticks per symbol: once for all strategies when they skipped alike."""
    limit = result.settings.backtest.max_skipped_share
    ticks = len(result.ticks_ms)
    found = []
    for symbol in result.symbols:
        per_run = {s: dict(r.skipped_by_symbol.get(symbol, {})) for s, r in result.runs.items()}
        groups: dict[str, list[str]] = {}
        for strategy, reasons in per_run.items():
            groups.setdefault(by_count(reasons), []).append(strategy)
        for strategy, reasons in per_run.items():
            skipped = sum(reasons.values())
            members = groups.get(by_count(reasons), [])
            if not skipped or members[0] != strategy:
                continue  # nothing skipped, or said already for its group
            who = "every strategy" if len(members) == len(per_run) else ", ".join(members)
            share = skipped / ticks
            over = share > limit
            found.append(Finding(
                f"{symbol}: {skipped:,} of {ticks:,} ticks skipped ({share:.1%}) in {who}: "
                f"{by_count(reasons)}"
                + (f" - more than backtest.max_skipped_share ({limit:.0%})" if over else ""),
                fails=over,
            ))  # fmt: skip
    return found


def _failures(result: Backtest) -> list[Finding]:
    found = []
    for strategy, run in result.runs.items():
        failed, degraded = run.outcomes.get("failed", 0), run.outcomes.get("degraded", 0)
        if failed or degraded:
            found.append(Finding(
                f"{strategy}: {failed:,} ticks failed and {degraded:,} degraded (a stage "
                "raised: the log says which; failed ticks booked nothing)",
                fails=True,
            ))  # fmt: skip
    return found


def _halts(result: Backtest) -> list[Finding]:
    policy = result.settings.backtest.on_halt
    found = []
    for strategy, run in result.runs.items():
        stops = [c for c in run.states if c.state in {"halted", "reducing"}]
        if not stops:
            continue
        first = stops[0]
        loss_limit = [c for c in stops if c.reason.startswith(DAILY_LOSS)]
        meaning = (
            _HALT_MEANING[policy]
            if first.reason.startswith(DAILY_LOSS)
            else _state_meaning(first.state, first.reason, policy)
        )
        found.append(Finding(
            f"{strategy}: {first.state.upper()} at {first.at:%Y-%m-%d %H:%M} ({first.reason}): "
            f"{meaning}; {len(stops)} such change(s) in the run, {len(loss_limit)} by the daily "
            f"loss limit (backtest.on_halt = {policy})"
        ))  # fmt: skip
    return found


def _state_meaning(state: str, reason: str, policy: str) -> str:
    if reason.startswith(DRAWDOWN) and policy == "stop":
        return "only orders that shrink a position for the rest of the run"
    if reason.startswith(DRAWDOWN):
        return (
            "only orders that shrink a position until the next day, then trading resumed with "
            "the drawdown measured from that day's start"
        )
    if state == "reducing":
        return "only orders that shrink a position for the rest of the run"
    return (
        "no order for the rest of the run (a halt that is not the loss limit's waits for a person)"
    )


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M")


def run_failed(found: list[Finding]) -> bool:
    return any(f.fails for f in found)
