"""The fine-tuning objectives against the reference packages' own training code, on the same
tensors: Toto's CombinedLoss (toto-ts), Kronos's BSQ quantizer loss (kronos-model-arch), and
our teacher-forced s2 head against what generation computes at each step."""

from __future__ import annotations

import warnings

import pytest
import torch

from tests.unit.forecast.kronos.builders import model
from trader.forecast.kronos.model import KronosModel
from trader.forecast.toto.model import Head
from trader.training.kronos_objective import QUANTIZER_DEFAULTS, QuantizerWeights, bsq_loss
from trader.training.toto_objective import combined_loss


def _head(shape: tuple[int, ...], k: int, seed: int) -> Head:
    generator = torch.Generator().manual_seed(seed)

    def draw() -> torch.Tensor:
        return torch.randn(*shape, k, generator=generator)

    return Head(
        df=2.0 + torch.nn.functional.softplus(draw()),
        loc=draw(),
        scale=torch.nn.functional.softplus(draw()) + 0.05,
        logits=draw(),
    )


def test_toto_loss_is_datadogs_combined_loss():
    pytest.importorskip("toto", reason="the reference toto-ts is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from gluonts.torch.distributions.studentT import StudentT  # noqa: PLC0415
        from toto.model.losses import CombinedLoss  # noqa: PLC0415

    head = _head((2, 3, 40), 5, seed=0)
    target = torch.randn(2, 3, 40, generator=torch.Generator().manual_seed(1)) * 2
    reference = torch.distributions.MixtureSameFamily(
        torch.distributions.Categorical(probs=torch.softmax(head.logits, -1)),
        StudentT(head.df, head.loc, head.scale),
    )
    theirs = CombinedLoss()(reference, target)
    ours = combined_loss(head, target, nll_weight=0.575)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    nll_only = combined_loss(head, target, nll_weight=1.0)
    torch.testing.assert_close(nll_only, -reference.log_prob(target), rtol=1e-5, atol=1e-5)


def test_kronos_quantizer_loss_is_the_references():
    module = pytest.importorskip("model.module", reason="kronos-model-arch is not installed")
    dim, group = 12, 4
    weights = QuantizerWeights(**QUANTIZER_DEFAULTS)
    reference = module.BSQuantizer(6, 6, group_size=group, **QUANTIZER_DEFAULTS).train()
    z = torch.randn(3, 17, dim, generator=torch.Generator().manual_seed(2))
    theirs, quantized, _ = reference(z)
    normalised = torch.nn.functional.normalize(z, dim=-1)
    signs = torch.where(normalised > 0, 1.0, -1.0)
    zq = (normalised + (signs - normalised).detach()) / dim**0.5
    torch.testing.assert_close(zq, quantized)
    torch.testing.assert_close(bsq_loss(normalised, zq, group, weights), theirs)


def test_the_teacher_forced_s2_head_is_what_generation_computes_at_each_step():
    net: KronosModel = model(seed=3)
    generator = torch.Generator().manual_seed(4)
    vocab = 2**net.config.s1_bits
    s1 = torch.randint(vocab, (2, 9), generator=generator)
    s2 = torch.randint(vocab, (2, 9), generator=generator)
    stamp = torch.randint(0, 7, (2, 9, 5), generator=generator)
    next_s1 = torch.randint(vocab, (2, 9), generator=generator)
    with torch.no_grad():
        hidden, _ = net.window(s1, s2, stamp)
        every = net.s2_logits_every_step(hidden, next_s1)
        for t in (0, 4, 8):
            window, _ = net.window(s1[:, : t + 1], s2[:, : t + 1], stamp[:, : t + 1])
            keys = net.dependency_kv(window)
            step = net.s2_logits(window[:, None, -1], next_s1[:, None, t], keys, None, None)
            torch.testing.assert_close(every[:, t], step[:, 0], rtol=1e-5, atol=1e-5)
