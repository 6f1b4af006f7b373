"""The evidence folder's README.md: what the run was, where it ran, what it learnt from, how
it ended and, when it was judged, whether fine-tuning helped, said plainly first."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from trader import __version__
from trader.training.evaluation import Evaluation
from trader.training.evidence import DESCRIPTIONS
from trader.training.loop import Record


@dataclass(frozen=True)
class Summary:
    argv: Sequence[str]
    model: str  # e.g. "kronos predictor, LoRA rank 8 merged"
    base: str
    device: str  # the start line
    fallback: str | None
    data: Sequence[str]  # one line per file: bars, skipped rows, missing bars
    windows: Sequence[str]  # per split: windows found and skipped across a hole
    split: Sequence[str]
    steps: str
    weights: str
    record: Record
    evaluation: Evaluation | None
    outcome: str  # the first line when there is no evaluation

    def headline(self) -> str:
        if self.evaluation is not None:
            return self.evaluation.verdict()
        return self.outcome

    def markdown(self, files: Sequence[str]) -> str:
        r = self.record
        validation = (
            "none run"
            if r.first_validation is None
            else f"first {r.first_validation:.5f}, best {r.best_loss:.5f} at step "
            f"{r.best_step}, last {r.last_validation:.5f}"
            + (" (fell)" if r.best_loss < r.first_validation else " (did NOT fall)")
        )
        rows = [
            ("model", self.model),
            ("base", self.base),
            ("device", self.device),
            ("fallback", self.fallback or "none"),
            ("steps", self.steps),
            ("validation loss", validation),
            ("weights", self.weights),
        ]
        table = "\n".join(f"| {k} | {_cell(v)} |" for k, v in rows)
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        parts = [
            f"# trader finetune evidence\n\nWritten {stamp} by trader {__version__}: "
            f"`{shlex.join(self.argv)}`\n\n**{self.headline()}**\n",
            f"| | |\n|---|---|\n{table}\n",
            "## Data\n\n" + "\n".join(f"- {line}" for line in self.data),
            "## Windows\n\n" + "\n".join(f"- {line}" for line in self.windows),
            "## Split by time\n\n```\n" + "\n".join(self.split) + "\n```",
        ]
        if self.evaluation is not None:
            parts.append(_evaluation(self.evaluation))
        listing = "\n".join(f"- `{n}`: {DESCRIPTIONS[n]}" for n in files if n in DESCRIPTIONS)
        missing = "" if "nvidia_smi.txt" in files else "\n(no `nvidia_smi.txt`: no GPU snapshot)"
        parts.append(f"## Files\n\n{listing}{missing}\n")
        return "\n\n".join(parts)


def _evaluation(evaluation: Evaluation) -> str:
    header = (
        "| | CRPS | skill vs naive | MAE of the median | MASE | 80% coverage | hit rate |\n"
        "|---|---|---|---|---|---|---|"
    )
    rows = [
        f"| {name} | {number(f.crps)} | {number(f.skill)} | {number(f.mae)} | "
        f"{number(f.mase)} | {share(f.coverage.get('80'))} | {share(f.hit_rate)} |"
        for name, f in evaluation.scores.items()
    ]
    return (
        f"## Held-out test tail\n\n{evaluation.windows} windows, {evaluation.context} bars of "
        f"context, {evaluation.horizon} bars ahead, returns of the close (eval.json has every "
        "figure and how it is computed). Nothing was copied over the serving weights.\n\n"
        + header
        + "\n"
        + "\n".join(rows)
    )


def number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
