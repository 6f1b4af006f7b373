"""Where training switches dropout off: validation scores in eval mode, and the predictor's
targets come from the tokenizer in eval mode (as the reference's `train_predictor.py` keeps
it), whatever mode the objective is in."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from tests.unit.forecast.kronos import builders
from trader.forecast.kronos.config import DropoutRates
from trader.forecast.kronos.model import KronosModel
from trader.forecast.kronos.tokenizer import KronosTokenizer
from trader.training.distributed import SINGLE
from trader.training.kronos_objective import QUANTIZER_DEFAULTS, KronosTraining, QuantizerWeights
from trader.training.loop import validation_loss
from trader.training.modes import evaluating


def _objective(model_rates: DropoutRates, tokenizer_rates: DropoutRates) -> KronosTraining:
    model = KronosModel(builders.MODEL, model_rates)
    model.load_state_dict(builders.model().state_dict())
    tokenizer = KronosTokenizer(builders.TOKENIZER, tokenizer_rates)
    tokenizer.load_state_dict(builders.tokenizer().state_dict())
    pre = nn.Linear(builders.TOKENIZER.s1_bits, builders.TOKENIZER.d_model)
    weights = QuantizerWeights(**QUANTIZER_DEFAULTS)
    return KronosTraining(model.train(), tokenizer.train(), pre, weights, "predictor")


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(4, 40, 6, generator=generator)
    return x, torch.randint(0, 7, (4, 40, 5), generator=generator)


def _loss(objective: nn.Module, seed: int) -> float:
    torch.manual_seed(seed)
    with torch.no_grad():
        return float(objective(*_batch()))


def test_the_predictor_reads_the_tokens_of_the_tokenizer_in_eval_mode():
    """A tokenizer with heavy dropout, left in training mode: the targets must not move with
    the seed (the model itself has no dropout here), and the tokenizer stays in its mode."""
    objective = _objective(DropoutRates(), DropoutRates(ffn=0.5, resid=0.5))
    losses = {_loss(objective, seed) for seed in range(4)}
    assert len(losses) == 1
    with evaluating(objective):
        assert _loss(objective, 9) in losses
    assert objective.tokenizer.training
    assert objective.model.training


def test_validation_scores_in_eval_mode_and_training_mode_is_kept():
    rates = DropoutRates(ffn=0.3, attn=0.2, resid=0.3, token=0.2)
    objective = _objective(rates, DropoutRates())
    objective.tokenizer.eval()  # a frozen part, already in eval mode: it must stay so
    training = {_loss(objective, seed) for seed in range(3)}
    assert len(training) == 3  # dropout is on while training

    x, stamp = _batch()
    trainee = SimpleNamespace(
        objective=objective,
        batches=SimpleNamespace(make=lambda refs, device: (x[refs[:, 1]], stamp[refs[:, 1]])),
    )
    settings = SimpleNamespace(batch_size=2)
    refs = np.array([[0, i] for i in range(4)], dtype=np.int64)
    setup = SimpleNamespace(
        trainee=trainee, world=SINGLE, validation=refs, settings=settings,
        precision=nullcontext, device=torch.device("cpu"),
    )  # fmt: skip
    scores = set()
    for seed in range(3):
        torch.manual_seed(seed)
        scores.add(validation_loss(setup))  # type: ignore[arg-type]
    assert len(scores) == 1
    objective.eval()
    # Two batches of two against one of four: the same windows, summed in another order.
    assert scores.pop() == pytest.approx(_loss(objective, 5), rel=1e-6)
    objective.train()
    objective.tokenizer.eval()
    torch.manual_seed(0)
    validation_loss(setup)  # type: ignore[arg-type]
    assert objective.model.training
    assert not objective.tokenizer.training
    assert all(m.training for m in objective.model.modules())


def test_evaluating_puts_back_each_modules_own_mode():
    outer = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5), nn.Sequential(nn.Dropout(0.5)))
    outer.train()
    outer[2].eval()
    before = [m.training for m in outer.modules()]
    with evaluating(outer):
        assert not any(m.training for m in outer.modules())
    assert [m.training for m in outer.modules()] == before
