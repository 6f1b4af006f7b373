"""The verdict on a paper record: each measure against its threshold (`[promote]`), every
failure a reason of its own line. Pure: the measures come in, lines come out."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_DOWN, Decimal

from trader.config.promote_settings import PromoteSettings


@dataclass(frozen=True)
class Skill:
    """The primary model's skill against the naive forecast over the paper record."""

    model: str
    forecasts: int  # scored forecasts (origins x symbols)
    estimate: float | None  # 1 - CRPS / CRPS of the naive
    low: float | None  # the interval's ends (None: too few to resample)
    high: float | None
    confidence: float


@dataclass(frozen=True)
class Measures:
    """What the paper record shows, each measured from the ledger (or its replay)."""

    days: int  # calendar days with ticks (24/7), or trading sessions
    sessions: bool  # True: `days` counts a market's trading sessions
    expected_ticks: int  # bar closes the calendar has over the record
    skipped_ticks: int  # of those: not run, failed, or run halted
    currency: str
    starting_equity: Decimal
    paper_pnl: Decimal | None  # None: the replay could not be compared
    replay_pnl: Decimal | None
    paper_drawdown: float | None  # deepest fall from a running peak, a share of it
    replay_drawdown: float | None
    skill: Skill | None
    problems: tuple[str, ...] = field(default=())  # what could not be measured, and why

    @property
    def shortfall(self) -> Decimal | None:
        """How much less paper made than its backtest replay (negative: more)."""
        if self.paper_pnl is None or self.replay_pnl is None:
            return None
        return self.replay_pnl - self.paper_pnl


@dataclass(frozen=True)
class Verdict:
    reasons: list[str]  # one per failed threshold; empty: promoted
    lines: list[str]  # every measure against its threshold, passed or not

    @property
    def passed(self) -> bool:
        return not self.reasons


def _pct(x: float) -> str:
    return f"{x:.2%}"


def shortfall_allowed(m: Measures, t: PromoteSettings) -> Decimal:
    """The most paper may trail its replay: a share of the starting equity or of the replay's
    profit, whichever is more; to the cent below (the rounding named: ccxt sets the thread's
    decimal context to round half up)."""
    by_equity = m.starting_equity * Decimal(repr(t.max_shortfall_equity_share))
    profit = m.replay_pnl if m.replay_pnl is not None and m.replay_pnl > 0 else Decimal(0)
    by_pnl = profit * Decimal(repr(t.max_shortfall_pnl_share))
    return max(by_equity, by_pnl).quantize(Decimal("0.01"), ROUND_DOWN)


def _days(m: Measures, t: PromoteSettings) -> tuple[bool, str]:
    need, unit = (t.min_sessions, "trading sessions") if m.sessions else (t.min_days, "days")
    return m.days >= need, f"{unit} traded: {m.days} (at least {need})"


def _skipped(m: Measures, t: PromoteSettings) -> tuple[bool, str]:
    share = m.skipped_ticks / m.expected_ticks if m.expected_ticks else 1.0
    return share <= t.max_skipped_share, (
        f"ticks skipped: {m.skipped_ticks} of {m.expected_ticks} ({_pct(share)}; at most "
        f"{_pct(t.max_skipped_share)})"
    )


def _shortfall(m: Measures, t: PromoteSettings) -> tuple[bool, str]:
    short = m.shortfall
    if short is None or m.replay_pnl is None or m.paper_pnl is None:
        return False, "shortfall against the backtest: not measured (the replay failed)"
    allowed = shortfall_allowed(m, t)
    return short <= allowed, (
        f"shortfall against the backtest: {short:f} {m.currency} (paper {m.paper_pnl:f}, "
        f"replay {m.replay_pnl:f}; at most {allowed:f}: {_pct(t.max_shortfall_equity_share)} "
        f"of the starting {m.starting_equity:f} or {_pct(t.max_shortfall_pnl_share)} of the "
        f"replay's profit)"
    )


def _skill(m: Measures, t: PromoteSettings) -> tuple[bool, str]:
    s = m.skill
    if s is None or s.estimate is None:
        return False, "forecast skill against the naive: not measured (no scored forecasts)"
    interval = (
        f"{s.confidence:.0%} interval {s.low:+.4f} .. {s.high:+.4f}"
        if s.low is not None and s.high is not None
        else "no interval"
    )
    said = (
        f"forecast skill against the naive ({s.model}): {s.estimate:+.4f}, {interval}, over "
        f"{s.forecasts} forecasts (its low end above {t.min_skill:+.4f}, at least "
        f"{t.min_scored_forecasts} forecasts)"
    )
    ok = s.forecasts >= t.min_scored_forecasts and s.low is not None and s.low > t.min_skill
    return ok, said


def _drawdown(m: Measures, t: PromoteSettings) -> tuple[bool, str]:
    paper, replay = m.paper_drawdown, m.replay_drawdown
    if paper is None or replay is None:
        return False, "drawdown against the backtest: not measured (no equity curve)"
    allowed = max(replay * t.max_drawdown_ratio, replay + t.drawdown_allowance)
    return paper <= allowed, (
        f"drawdown: paper {_pct(paper)}, replay {_pct(replay)} (at most {_pct(allowed)}: "
        f"{t.max_drawdown_ratio:g}x the replay's, or it plus {_pct(t.drawdown_allowance)})"
    )


CHECKS = (_days, _skipped, _shortfall, _skill, _drawdown)


def judge(m: Measures, t: PromoteSettings) -> Verdict:
    """Every threshold checked; a measure that could not be made fails, with its reason."""
    reasons, lines = [], []
    for check in CHECKS:
        ok, said = check(m, t)
        lines.append(f"{'pass' if ok else 'FAIL'}: {said}")
        if not ok:
            reasons.append(said)
    reasons += [f"not measured: {p}" for p in m.problems]
    return Verdict(reasons, lines)
