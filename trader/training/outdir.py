"""A run's output folder, and what makes a run the same run.

    DIR/run.json        what the run is (model, base, data, settings): --resume checks it
    DIR/base/           the random base (--base random:small)
    DIR/checkpoints/    last.pt (every N steps and at the end), best.pt (best validation)
    DIR/weights/        the fine-tuned weights, in the published format
    DIR/evidence/       the evidence folder
    DIR/eval.json       base, fine-tuned and naive scored on the held-out test tail

A folder that holds anything is refused unless --resume, and --resume is refused for a
folder holding another run: nothing of an earlier run is overwritten by accident. Every folder
is 0700 and every file 0600 (`trader.private_files`): a run's weights and figures are its owner's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trader.private_files import write_file
from trader.training.checkpoint import LAST

# Settings that may differ when a run resumes: they change how long it runs and what it
# reports, not what it computes on the way.
MAY_CHANGE = frozenset({
    "max_steps", "log_interval", "validation_interval", "checkpoint_interval", "patience",
    "evaluation_windows", "evaluation_samples",
})  # fmt: skip


class OutputRefused(Exception):
    """The output folder cannot take this run; the message says why and what to do."""


@dataclass(frozen=True)
class RunFolder:
    root: Path

    @property
    def identity_file(self) -> Path:
        return self.root / "run.json"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def weights(self) -> Path:
        return self.root / "weights"

    @property
    def evidence(self) -> Path:
        return self.root / "evidence"

    @property
    def eval_file(self) -> Path:
        return self.root / "eval.json"

    @property
    def last(self) -> Path:
        return self.checkpoints / LAST

    def holds_anything(self) -> bool:
        return self.root.exists() and any(self.root.iterdir())

    def claim(self, identity: dict[str, Any], resume: bool) -> bool:
        """Check the folder may take this run; True when there is a checkpoint to resume."""
        held = self.holds_anything()
        if not resume:
            if held:
                raise OutputRefused(
                    f"{self.root} already holds files"
                    + (" of a run" if self.identity_file.exists() else "")
                    + ": pass --resume to continue the run it holds, or choose another --out"
                )
            return False
        if not held:
            return False
        if not self.identity_file.exists():
            raise OutputRefused(f"{self.root} holds files but no run (no run.json) to resume")
        differences = _differences(json.loads(self.identity_file.read_text()), identity)
        if differences:
            raise OutputRefused(
                f"{self.root} holds another run; --resume refused because "
                + "; ".join(differences)
                + ". Choose another --out for this one"
            )
        return self.last.exists()

    def write_identity(self, identity: dict[str, Any]) -> None:
        write_file(self.identity_file, json.dumps(identity, indent=2) + "\n", what="--out")


def _differences(held: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    out = []
    for key in sorted(set(held) | set(wanted)):
        if key == "settings":
            continue
        if held.get(key) != wanted.get(key):
            out.append(f"{key} was {held.get(key)!r}, now {wanted.get(key)!r}")
    settings_held, settings_wanted = held.get("settings", {}), wanted.get("settings", {})
    for key in sorted(set(settings_held) | set(settings_wanted)):
        if key not in MAY_CHANGE and settings_held.get(key) != settings_wanted.get(key):
            out.append(
                f"finetune.{key} was {settings_held.get(key)!r}, now {settings_wanted.get(key)!r}"
            )
    return out
