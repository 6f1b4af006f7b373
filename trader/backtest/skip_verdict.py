"""Whether a replay skipped too many ticks, said as `trader backtest` says it: per symbol, its
skipped ticks by reason, and more than `backtest.max_skipped_share` of them fails the run
(exit 1 unless accepted). `trader run --replay` and `trader demo` end with it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SETTING = "backtest.max_skipped_share"
ACCEPT = "--allow-skips"  # the option that accepts a run over it


def by_count(counts: Mapping[str, int]) -> str:
    """`gap 1,200, stale_bars 3`: the largest first."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} {n:,}" for name, n in ordered)


@dataclass(frozen=True)
class SkipVerdict:
    ticks: int  # the ticks the ledger booked
    by_symbol: Mapping[str, Mapping[str, int]]  # each symbol's skipped ticks, by reason
    limit: float  # the largest share of a symbol's ticks it may skip

    def share(self, symbol: str) -> float:
        return sum(self.by_symbol[symbol].values()) / self.ticks if self.ticks else 0.0

    @property
    def over(self) -> list[str]:
        """The symbols that skipped more than the limit."""
        return [s for s in self.by_symbol if self.share(s) > self.limit]

    @property
    def fails(self) -> bool:
        return bool(self.over)

    def lines(self) -> list[str]:
        """One line a symbol: how many ticks it skipped, why, and whether that is too many."""
        said = []
        for symbol, reasons in self.by_symbol.items():
            skipped, share = sum(reasons.values()), self.share(symbol)
            line = f"{symbol}: {skipped:,} of {self.ticks:,} ticks skipped ({share:.1%})"
            if skipped:
                line += f": {by_count(reasons)}"
            if symbol in self.over:
                line += f" - more than {SETTING} ({self.limit:.0%})"
            said.append(line)
        return said

    def text(self, command: str, option: str, accepted: bool) -> str:
        """The heading and a line a symbol, as a command's output says them."""
        lines = [self.heading(command, option, accepted), *(f"  {x}" for x in self.lines())]
        return "\n".join(lines) + "\n"

    def heading(self, command: str, option: str, accepted: bool) -> str:
        """The verdict before the lines: what the run's exit says, and how to accept it."""
        limit = f"{SETTING} ({self.limit:.0%})"
        if not self.fails:
            return f"{command}: skipped ticks of {self.ticks:,}, within {limit}:"
        too_many = f"a symbol skipped more than {limit} of its {self.ticks:,} ticks"
        if accepted:
            return f"{command}: {too_many} (accepted with {option}):"
        return f"{command} did not do what was asked: {too_many} (exit 1 unless {option}):"
