"""Whether the daemon is ready to trade, check by check, each with its reason.

`/healthz` says the process answers; `/readyz` says it can trade: started, model loaded,
broker reconciled, exchange reachable, data fresh, trading state not HALTED. Each check is a
function evaluated when asked, so a condition that decays with time (data going stale) is
judged now, not when it was last touched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Check = Callable[[], tuple[bool, str]]


@dataclass(frozen=True)
class Verdict:
    ready: bool
    checks: dict[str, tuple[bool, str]]

    def reasons(self) -> list[str]:
        return [f"{name}: {why}" for name, (ok, why) in self.checks.items() if not ok]

    def as_json(self) -> dict[str, object]:
        return {
            "ready": self.ready,
            "checks": {name: {"ok": ok, "detail": why} for name, (ok, why) in self.checks.items()},
        }


class Readiness:
    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}
        self._flags: dict[str, tuple[bool, str]] = {}

    def add(self, name: str, check: Check) -> None:
        self._checks[name] = check

    def mark(self, name: str, ok: bool, detail: str) -> None:
        """A check whose state changes at known moments (start-up steps)."""
        self._flags[name] = (ok, detail)
        self._checks.setdefault(name, lambda: self._flags[name])

    def evaluate(self) -> Verdict:
        checks = {}
        for name, check in self._checks.items():
            try:
                checks[name] = check()
            except Exception as error:  # a check must never take the endpoint down
                checks[name] = (False, f"check failed: {type(error).__name__}")
        return Verdict(bool(checks) and all(ok for ok, _ in checks.values()), checks)
