"""The primary model's forecast skill over a paper record, from the scores the daemon kept
(`ledger/scores.py`): 1 - CRPS / CRPS of the naive forecast, pooled over symbols, with a
moving-block bootstrap interval (`skill/inference.py`), since neighbouring forecasts share
part of their horizons."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from trader.ledger.database import reading
from trader.promote.verdict import Skill
from trader.skill.inference import block_length, block_weights, overlap_lag
from trader.skill.live import SCORED

REPLICATES = 2000
FIGURE = "skill"  # sums: (CRPS of the model, CRPS of the naive) per forecast


def forecast_skill(ledger: Path, model: str, confidence: float) -> Skill:
    """Skill of `model`'s scored forecasts in the ledger (read only)."""
    with reading(ledger) as c:
        rows = c.execute(
            "SELECT steps, sums FROM forecast_scores WHERE model = ? AND outcome = ? "
            "ORDER BY as_of, symbol",
            (model, SCORED),
        ).fetchall()
    pairs = [json.loads(sums).get(FIGURE) for _, sums in rows]
    kept = [(float(p[0]), float(p[1])) for p in pairs if p and float(p[1]) > 0]
    steps = max((s for s, _ in rows), default=1)
    return skill_of(model, kept, steps, confidence)


def skill_of(model: str, pairs: list[tuple[float, float]], steps: int, confidence: float) -> Skill:
    """`pairs`: per forecast, oldest first, the model's and the naive's CRPS sums."""
    if not pairs:
        return Skill(model, 0, None, None, None, confidence)
    model_crps = np.array([p[0] for p in pairs])
    naive_crps = np.array([p[1] for p in pairs])
    estimate = 1.0 - float(model_crps.sum() / naive_crps.sum())
    n = len(pairs)
    if n < 2:
        return Skill(model, n, estimate, None, None, confidence)
    block = block_length(n, overlap_lag(steps, 1))
    weights = block_weights(n, block, REPLICATES, seed=0)
    values = 1.0 - (weights @ model_crps) / (weights @ naive_crps)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return Skill(model, n, estimate, float(low), float(high), confidence)
