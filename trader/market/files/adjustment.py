"""What was done with a file's adjusted close, for the file's report (no reading here: the
report and the adjusting both import it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Adjustment:
    """What was done with a file's adjusted close: `prices` traded ("adjusted" or "raw"), the
    range of the ratio adjusted close / close, and the rows whose ratio could not be taken
    (adjusted close or close missing, zero or negative: with adjusted prices, their values
    are NaN and hygiene drops them as bad rows)."""

    column: str
    prices: str
    lowest: float
    highest: float
    unusable: int

    def note(self) -> str:
        name = self.column
        if self.prices == "raw":
            return (
                f"raw prices traded as written: {name} not applied (--prices adjusted scales "
                "them by it, as a holder lived through splits and dividends)"
            )
        text = (
            f"adjusted prices traded: open, high, low and close x {name} / close of each row "
            f"(x{self.lowest:.4g} .. x{self.highest:.4g}), volume divided by it; --prices raw "
            "trades them as written"
        )
        if self.unusable:
            text += (
                f"; {self.unusable:,} row(s) without the ratio ({name} or close missing or not "
                "positive): dropped as bad rows"
            )
        return text
