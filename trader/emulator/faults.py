"""Faults the emulator injects into matching requests: latency, HTTP errors, malformed bodies,
dropped connections, answers held back until the faults are cleared. Each fault hits a number of
matching requests and is then used up."""

from __future__ import annotations

import asyncio
import fnmatch
import random
from dataclasses import dataclass, field
from typing import Any, Literal

FaultKind = Literal["delay", "status", "malformed", "drop", "hold"]


@dataclass
class Fault:
    kind: FaultKind
    path: str = "*"  # fnmatch pattern on the request path, e.g. "/api/v3/klines"
    method: str = "*"  # fnmatch pattern on the HTTP method: "POST" hits order creation only
    times: int = 1  # matching requests it hits; -1 for all of them
    skip: int = 0  # matching requests let through before it starts hitting
    probability: float = 1.0
    delay_s: float = 0.0  # "delay": wait this long before answering; "hold": at most this long
    # (0: no bound) until the faults are cleared, as a venue that hangs until it recovers
    status: int = 500  # "status": answer with this HTTP status
    retry_after_s: int | None = None  # "status": a Retry-After header
    body: str | None = None  # "status"/"malformed": the body sent instead
    after: bool = False  # apply after the request took effect (e.g. order accepted, then timeout)
    released: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        return cls(**data)


@dataclass
class FaultPlan:
    faults: list[Fault] = field(default_factory=list)
    rng: random.Random = field(default_factory=lambda: random.Random(0))  # noqa: S311 - test faults, not crypto

    def add(self, *faults: Fault) -> None:
        self.faults.extend(faults)

    def clear(self) -> None:
        """No more faults; the answers they hold back go out now."""
        for fault in self.faults:
            fault.released.set()
        self.faults.clear()

    def take(self, path: str, method: str = "GET") -> Fault | None:
        """The first live fault matching `path` and `method` (counting it as used), or None."""
        for fault in self.faults:
            if not fnmatch.fnmatchcase(path, fault.path):
                continue
            if not fnmatch.fnmatchcase(method, fault.method):
                continue
            if fault.skip > 0:
                fault.skip -= 1
                continue
            if fault.probability < 1.0 and self.rng.random() >= fault.probability:
                continue
            if fault.times > 0:
                fault.times -= 1
                if fault.times == 0:
                    self.faults.remove(fault)
            return fault
        return None
