"""`trader promote --paper LEDGER`: judge a paper record by the `[promote]` thresholds and,
when it clears every one, write the live settings and the promotion record. Exit 0 written;
1 refused (the reasons first, one a line); 65 a ledger that cannot be judged; 73 the live
settings cannot be written there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from trader.config.schema import Settings
from trader.domain.capital_ramp import RampStep
from trader.exit_codes import EX_CANTCREAT, EX_DATAERR, EX_FAILED, EX_OK
from trader.private_files import UnsafePath
from trader.promote.measure import NotMeasurable, measure
from trader.promote.verdict import judge
from trader.promote.write import write_promotion


@dataclass(frozen=True)
class PromoteRequest:
    paper: Path
    settings: Settings  # the thresholds are its `[promote]`
    out: Path  # the live settings file
    live_ledger: Path
    fraction: Decimal
    ramp: tuple[RampStep, ...]
    at: datetime
    overrides: Mapping[str, Any] = field(default_factory=dict)  # replayed with these instead


@dataclass(frozen=True)
class PromoteOutcome:
    code: int
    lines: list[str]  # the first says what happened (a refusal: its reasons, one a line)


def run_promote(request: PromoteRequest) -> PromoteOutcome:
    if request.live_ledger.resolve() == request.paper.resolve():
        return PromoteOutcome(
            EX_DATAERR, ["trader promote: the live ledger must not be the paper ledger"]
        )
    try:
        evidence = measure(
            request.paper, request.settings, dict(request.overrides), request.settings.promote
        )
    except (NotMeasurable, ValueError) as error:
        return PromoteOutcome(EX_DATAERR, [f"trader promote: cannot judge the record: {error}"])
    verdict = judge(evidence.measures, request.settings.promote)
    unit = "sessions" if evidence.span.sessions else "days"
    about = [
        f"paper record: {request.paper} (calendar {evidence.span.calendar}, counted in {unit})",
        *verdict.lines,
        "the replay (`trader shortfall`):",
        *(f"  {line}" for line in evidence.shortfall_lines),
    ]
    if not verdict.passed:
        refused = [f"refused: {reason}" for reason in verdict.reasons]
        return PromoteOutcome(EX_FAILED, [*refused, "", *about])
    try:
        settings, record = write_promotion(
            evidence, verdict, request.settings.promote, paper_ledger=request.paper.resolve(),
            out=request.out.resolve(), live_ledger=request.live_ledger.resolve(),
            fraction=request.fraction, ramp=request.ramp, at=request.at,
        )  # fmt: skip
    except (OSError, UnsafePath) as error:
        return PromoteOutcome(
            EX_CANTCREAT, [f"trader promote: passed, but cannot write {request.out}: {error}"]
        )
    first = (
        f"promoted: live settings written to {settings} (start with `trader run --config "
        f"{settings}`, after opting in to live trading), the record to {record}"
    )
    return PromoteOutcome(EX_OK, [first, "", *about])
