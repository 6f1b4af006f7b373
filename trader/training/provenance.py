"""What the weights of a run record of where they came from (`forecast.provenance` reads it
back for every command that loads them): the base (published name and revision, a random
start, or another run's weights with their own record), the data it saw (each file with its
span, rows and SHA-256, and one digest of them all), the steps, the objective and the verdict
against the base and the naive forecast (None until the run was judged)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trader import __version__
from trader.config.finetune_settings import FinetuneSettings
from trader.forecast.provenance import WEIGHTS_FILE, published, read_provenance, stamp
from trader.training.base import Base
from trader.training.data import Series
from trader.training.evaluation import Evaluation
from trader.training.loop import Record

FORMAT = 1


def data_record(series: Sequence[Series]) -> dict[str, Any]:
    """The files as the run read them: taken once, before training, so the digest is of the
    bytes it learnt from."""
    files, whole = [], hashlib.sha256()
    for s in series:
        digest = _sha256(s.path)
        whole.update(bytes.fromhex(digest))
        files.append({
            "file": str(s.path.resolve()), "symbol": s.symbol, "timeframe": s.timeframe.text,
            "first": s.bars[0].start.isoformat(), "last": s.bars[-1].start.isoformat(),
            "rows": len(s), "skipped_rows": sum(s.skipped_rows.values()), "sha256": digest,
        })  # fmt: skip
    return {"files": files, "rows": sum(len(s) for s in series), "sha256": whole.hexdigest()}


def base_record(base: Base) -> dict[str, Any]:
    try:
        recorded = read_provenance(base.path)
    except (OSError, ValueError):
        recorded = None
    if base.random:
        inner = (recorded or {}).get("base") or {}
        return {"name": inner.get("name", "random"), "random": True, "label": base.label,
                "seed": inner.get("seed")}  # fmt: skip
    record: dict[str, Any] = {"name": str(base.path), "random": False, "label": base.label}
    cached = published(base.path)
    if cached is not None:
        record |= {"name": cached[0], "revision": cached[1]}
    if recorded is not None:  # another run's weights: their own record, kept whole
        record |= {"provenance": recorded, "random": bool((recorded.get("base") or {}).get(
            "random") or recorded.get("kind") == "random")}  # fmt: skip
    return record


def provenance(
    *,
    argv: Sequence[str],
    model: str,
    what: str,
    base: dict[str, Any],
    data: dict[str, Any],
    record: Record,
    max_steps: int,
    settings: FinetuneSettings,
    evaluation: Evaluation | None,
) -> dict[str, Any]:
    verdict = None
    if evaluation is not None:
        verdict = {
            "helped": evaluation.helped, "beats_naive": evaluation.beats_naive,
            "text": evaluation.verdict(), "windows": evaluation.windows,
            "crps": {name: f.crps for name, f in evaluation.scores.items()},
        }  # fmt: skip
    return {
        "format": FORMAT,
        "kind": "finetuned",
        "written_by": f"trader {__version__} finetune",
        "command": list(argv),
        "base": base,
        "data": data,
        "steps": {
            "done": record.step,
            "max": max_steps,
            "stopped": record.stopped,
            "weights": record.best_step if record.best_step >= 0 else record.step,
        },
        "objective": {
            "model": model,
            "trained": what,
            "settings": settings.model_dump(mode="json"),
        },
        "verdict": verdict,
    }


def stamp_weights(weights: Path, record: dict[str, Any]) -> None:
    """`record` in every weights file of the run's weights folder (Kronos: both halves, the
    one it did not train too, since it is served as part of this run's pair)."""
    for folder in (weights, weights / "predictor", weights / "tokenizer"):
        if (folder / WEIGHTS_FILE).is_file():
            stamp(folder, record)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()
