"""Our Toto 2.0 against the reference `toto-2==2.0.0` (in its own Python 3.12 virtualenv, one
subprocess for the whole module): random weights written by the reference's save_pretrained
in the published 4m configuration, the 22m one and a small one, loaded by both; the same
quantiles to 1e-4 relative for contexts of several lengths (whole patches or not, with
missing values), horizons inside one decode block and across several, a batch of symbols,
one and three variates; and the forecaster, from bars, against the reference on the same
windows."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.integration.toto2_reference import reference_python, run
from trader.domain import Timeframe
from trader.forecast.protocol import ForecastRequest
from trader.forecast.random_weights import TOTO2_SMALL, random_walk_bars
from trader.forecast.toto2 import Toto2Forecaster, load_toto2
from trader.forecast.toto2.config import KNOTS
from trader.forecast.toto2.decode import Inputs, forecast_knots
from trader.forecast.toto2.presets import preset_config

pytestmark = pytest.mark.integration

CONFIGS = {"small": TOTO2_SMALL, "4m": preset_config("4m"), "22m": preset_config("22m")}
VARIATES = ("close", "high", "low")


@dataclass(frozen=True)
class Case:
    """B series of V variates, `length` steps of context (`pad` of them unobserved on the
    left, `holes` unobserved inside), a horizon and a decode block (steps, None: one pass)."""

    batch: int
    variates: int
    length: int
    pad: int
    holes: int
    horizon: int
    block: int | None

    def key(self, config: str) -> str:
        return (
            f"{config}-b{self.batch}v{self.variates}-t{self.length}p{self.pad}h{self.holes}"
            f"-H{self.horizon}-blk{self.block}"
        )


def cases(patch: int, full: bool) -> list[Case]:
    """Contexts of whole patches and not (left padding), with missing values (holes, and a
    whole unobserved patch); horizons inside one block and across several."""
    common = [
        Case(3, 3, 8 * patch, 0, 0, 2 * patch, None),  # batch, one pass
        Case(2, 3, 8 * patch, patch - 7, 0, 5 * patch - 3, 2 * patch),  # across blocks
        Case(2, 1, 6 * patch, 0, 0, patch // 2, 2 * patch),  # univariate, inside a block
    ]
    if not full:
        return common
    return [
        *common,
        Case(2, 3, 10 * patch, patch + 5, 9, 3 * patch, patch),  # a whole unobserved patch
        Case(1, 3, 4 * patch, 3, 6, 4 * patch + 1, None),
    ]


def inputs(case: Case, patch: int, seed: int) -> Inputs:
    generator = torch.Generator().manual_seed(seed)
    shape = (case.batch, case.variates, case.length)
    target = torch.randn(shape, generator=generator).cumsum(-1) * 2 + 50
    observed = torch.ones(shape, dtype=torch.bool)
    observed[..., : case.pad] = False
    if case.holes:  # scattered inside the context, clear of the last patch
        spots = torch.randperm(case.length - case.pad - 2 * patch, generator=generator)
        observed[..., case.pad + spots[: case.holes]] = False
    target = torch.where(observed, target, torch.zeros_like(target))
    missing = bool((~torch.unflatten(observed, -1, (-1, patch)).any(-1)).any())
    return Inputs(target, observed, torch.zeros(shape[:2], dtype=torch.long), missing)


@dataclass(frozen=True)
class Reference:
    directories: dict[str, Path]
    inputs: dict[str, Inputs]
    cases: dict[str, tuple[str, Case]]
    knots: dict[str, torch.Tensor]


def _python() -> Path:
    python = reference_python()
    if python is None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("CI must build the reference Toto 2.0 (make venv: .venv/toto2-reference)")
        pytest.skip("the reference Toto 2.0 is not installed here (make venv builds it)")
    return python


WINDOW = 300  # bars per symbol in the forecaster case: not a whole number of patches


def bar_windows(count: int) -> list[list[Any]]:
    end = datetime(2025, 3, 1, tzinfo=UTC)
    return [
        random_walk_bars(f"S{i}/USDT", WINDOW - 37 * i, timeframe=Timeframe("1h"), end=end, seed=i)
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    python = _python()
    scratch = tmp_path_factory.mktemp("toto2-conformance")
    directories, all_inputs, all_cases, jobs = {}, {}, {}, []
    for name, config in CONFIGS.items():
        directories[name] = scratch / name
        patch = config["patch_size"]
        for index, case in enumerate(cases(patch, full=name != "22m")):
            key = case.key(name)
            all_inputs[key] = inputs(case, patch, seed=index)
            all_cases[key] = (name, case)
            path = scratch / f"{key}.pt"
            batch = all_inputs[key]
            torch.save(
                {"target": batch.target, "observed": batch.observed, "series": batch.series}, path
            )
            jobs.append(_job(key, directories[name], path, case.horizon, case.block, batch.missing))
    # The forecaster's case: bars of three symbols, as the forecaster lays them out.
    for i, window in enumerate(bar_windows(3)):
        key = f"bars-{i}"
        values = torch.tensor([[getattr(b, v) for b in window] for v in VARIATES])
        padded = math.ceil(len(window) / 8) * 8  # the small config's patch
        target = torch.zeros(1, 3, padded)
        target[..., padded - len(window) :] = values
        observed = target != 0
        path = scratch / f"{key}.pt"
        torch.save(
            {"target": target, "observed": observed, "series": torch.zeros(1, 3).long()}, path
        )
        jobs.append(_job(key, directories["small"], path, 20, None, False))
    job = {
        "checkpoints": [
            {"directory": str(d), "config": CONFIGS[n], "seed": 0, "label": "random"}
            for n, d in directories.items()
        ],
        "cases": jobs,
        "out": str(scratch / "knots.pt"),
    }
    run(job, python)
    return Reference(directories, all_inputs, all_cases, torch.load(scratch / "knots.pt"))


def _job(
    key: str, checkpoint: Path, path: Path, horizon: int, block: int | None, missing: bool
) -> dict[str, Any]:
    return {
        "key": key, "checkpoint": str(checkpoint), "inputs": str(path),
        "horizon": horizon, "decode_block": block, "missing": missing,
    }  # fmt: skip


def assert_same(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    assert ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-6 * float(theirs.abs().max()))


def test_every_case_has_the_reference_quantiles(reference: Reference) -> None:
    models = {name: load_toto2(d).model for name, d in reference.directories.items()}
    for key, (name, case) in reference.cases.items():
        with torch.inference_mode():
            ours = forecast_knots(models[name], reference.inputs[key], case.horizon, case.block)
        assert ours.shape == (len(KNOTS), case.batch, case.variates, case.horizon), key
        assert_same(ours, reference.knots[key])


def test_block_decoding_differs_from_one_pass(reference: Reference) -> None:
    """The cases across blocks exercise the cache: feeding medians back changes the answer."""
    model = load_toto2(reference.directories["small"]).model
    key, (_, case) = next((k, c) for k, c in reference.cases.items() if "small-b2v3" in k)
    with torch.inference_mode():
        blocked = forecast_knots(model, reference.inputs[key], case.horizon, case.block)
        single = forecast_knots(model, reference.inputs[key], case.horizon, None)
    assert not torch.allclose(blocked[..., case.block :], single[..., case.block :], rtol=1e-3)
    torch.testing.assert_close(blocked[..., : case.block], single[..., : case.block])


def test_the_forecaster_matches_the_reference_from_bars(reference: Reference) -> None:
    loaded = load_toto2(reference.directories["small"])
    forecaster = Toto2Forecaster(loaded.model, variates=VARIATES, random=loaded.random)
    windows = bar_windows(3)
    levels = (0.1, 0.25, 0.5, 0.9)
    forecasts = forecaster.forecast([ForecastRequest(w[-1].symbol, w, 20, levels) for w in windows])
    for i, forecast in enumerate(forecasts):
        knots = reference.knots[f"bars-{i}"][:, 0]  # [9, V, H]
        for f, field in enumerate(VARIATES):
            for level in (0.1, 0.5, 0.9):
                ours = torch.tensor(forecast.quantiles[field][level], dtype=torch.float32)
                assert_same(ours, knots[KNOTS.index(level), f])
            between = torch.lerp(knots[1, f], knots[2, f], 0.5)  # 0.25: halfway 0.2 to 0.3
            assert_same(torch.tensor(forecast.quantiles[field][0.25]), between)
            assert_same(torch.tensor(forecast.mean[field]), knots[:, f].mean(0))
    assert loaded.random == "random"
