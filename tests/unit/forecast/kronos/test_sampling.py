"""Temperature, top-k and top-p as the reference applies them."""

from __future__ import annotations

import math

import pytest
import torch

from trader.forecast.kronos.sampling import Sampling, draw, filtered

# Probabilities 0.5, 0.3, 0.15, 0.05 (in a shuffled order, so sorting matters).
PROBS = torch.tensor([0.15, 0.5, 0.05, 0.3])
LOGITS = PROBS.log().unsqueeze(0)


def kept(sampling: Sampling, logits: torch.Tensor = LOGITS) -> list[int]:
    return torch.isfinite(filtered(logits, sampling))[0].nonzero().flatten().tolist()


def frequencies(sampling: Sampling, draws: int = 20_000) -> torch.Tensor:
    generator = torch.Generator().manual_seed(7)
    ids = draw(LOGITS.expand(draws, -1), sampling, generator)
    return torch.bincount(ids, minlength=4).double() / draws


def test_top_k_keeps_the_k_likeliest_and_ignores_top_p():
    assert kept(Sampling(top_k=2)) == [1, 3]
    # top_p alone would keep only the likeliest token; with top_k set it is ignored.
    assert kept(Sampling(top_k=2, top_p=0.1)) == [1, 3]
    assert kept(Sampling(top_k=99)) == [0, 1, 2, 3]


def test_top_k_keeps_ties_with_the_kth():
    logits = torch.tensor([[1.0, 3.0, 2.0, 2.0]])
    assert kept(Sampling(top_k=2), logits) == [1, 2, 3]


def test_top_p_keeps_the_token_that_crosses_the_mass():
    # A token stays while the mass of the likelier ones is within top_p.
    assert kept(Sampling(top_p=0.4)) == [1]  # the likeliest always stays
    assert kept(Sampling(top_p=0.6)) == [1, 3]  # 0.5 <= 0.6: the 0.3 token crosses it
    assert kept(Sampling(top_p=0.85)) == [0, 1, 3]
    assert kept(Sampling(top_p=1.0)) == [0, 1, 2, 3]


def test_draws_follow_the_filtered_distribution():
    freq = frequencies(Sampling(top_p=0.85))
    expected = torch.tensor([0.15, 0.5, 0.0, 0.3], dtype=torch.float64) / 0.95
    assert torch.allclose(freq, expected, atol=0.015)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_temperature_divides_the_logits(temperature):
    freq = frequencies(Sampling(temperature=temperature))
    expected = torch.softmax(LOGITS[0].double() / temperature, dim=-1)
    assert torch.allclose(freq, expected, atol=0.015)
    # A temperature below 1 sharpens the distribution, above 1 flattens it.
    assert (freq[1] > 0.5 + 0.1) == (temperature < 1)
    assert (freq[1] < 0.5 - 0.1) == (temperature > 1)


def test_greedy_is_the_argmax_whatever_the_temperature():
    logits = torch.randn(64, 1024, generator=torch.Generator().manual_seed(3))
    generator = torch.Generator().manual_seed(0)
    for temperature in (0.1, 1.0, 10.0):
        ids = draw(logits, Sampling(temperature=temperature, top_k=1), generator)
        assert torch.equal(ids, logits.argmax(-1))


def test_draw_keeps_the_leading_shape():
    generator = torch.Generator().manual_seed(0)
    assert draw(torch.zeros(2, 3, 16), Sampling(), generator).shape == (2, 3)


@pytest.mark.parametrize(
    "kwargs",
    [{"temperature": 0.0}, {"temperature": -1.0}, {"top_k": -1}, {"top_p": 0.0}, {"top_p": 1.5}],
)
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        Sampling(**kwargs)


def test_filtered_tokens_are_minus_infinity():
    out = filtered(LOGITS, Sampling(top_k=1))
    assert out[0, 1] == LOGITS[0, 1]
    assert all(out[0, i] == -math.inf for i in (0, 2, 3))
