"""Our Kronos against the reference package on the same random weights, in the published small
(Tokenizer-base) and mini (Tokenizer-2k) configurations, on recorded bars: the tokenizer's codes
agree exactly and greedy decoding gives the same bars, for windows that stay within max_context
and windows that slide past it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from tests.integration.kronos_reference import (
    MINI,
    SMALL,
    Published,
    bars,
    read_bars,
    reference,
    reference_predict,
    reference_predictor,
    write_random,
)
from tests.recorded import XSHG_600977_5MIN
from trader.forecast.kronos import inputs
from trader.forecast.kronos.loading import load_model, load_tokenizer
from trader.forecast.kronos.predictor import KronosForecaster
from trader.forecast.kronos.sampling import Sampling, filtered
from trader.forecast.protocol import ForecastRequest
from trader.training.kronos_objective import predictor_cross_entropies

pytestmark = pytest.mark.integration

# Same tokens give the same bars up to float32 rounding of a different (cached) computation
# order; one different token moves a bar by far more.
RTOL = 1e-5


class Pair:
    """Ours and the reference's predictor, loaded from the same checkpoint files."""

    def __init__(self, published: Published, directory: Any) -> None:
        self.published = published
        self.checkpoints = write_random(directory, published)
        self.model = load_model(self.checkpoints.model)
        self.tokenizer = load_tokenizer(self.checkpoints.tokenizer)
        self.reference = reference_predictor(self.checkpoints, published.max_context)

    def ours(self, sample_count: int = 1) -> KronosForecaster:
        return KronosForecaster(
            self.model,
            self.tokenizer,
            max_context=self.published.max_context,
            sample_count=sample_count,
            sampling=Sampling(top_k=1),
            seed=0,
            device=torch.device("cpu"),
        )


@pytest.fixture(scope="module", params=[SMALL, MINI], ids=lambda p: p.name)
def pair(request, tmp_path_factory):
    return Pair(request.param, tmp_path_factory.mktemp(request.param.name))


@pytest.fixture
def frame() -> pd.DataFrame:
    return read_bars(XSHG_600977_5MIN)


def our_bars(pair: Pair, frame: pd.DataFrame, horizon: int, **kw: Any) -> np.ndarray:
    request = ForecastRequest("600977/CNY", bars(frame, **kw), horizon, [0.5])
    [paths] = pair.ours().paths([request])
    return paths[0].numpy()


@pytest.mark.parametrize("context", [256, 512])
def test_the_tokenizer_codes_agree_exactly(pair, frame, context):
    window = inputs.window(bars(frame.iloc[:context]), 1)
    x = torch.from_numpy(np.ascontiguousarray(window.values))[None]
    ours = pair.tokenizer.encode(x)
    with torch.no_grad():
        theirs = pair.reference.tokenizer.encode(x, half=True)
    assert torch.equal(ours[0], theirs[0])
    assert torch.equal(ours[1], theirs[1])
    assert len(set(ours[0][0].tolist())) > 10  # a real mix of codes, not one repeated
    # Decoding: the whole window, and the same window as a shared prefix plus a tail.
    with torch.no_grad():
        expected = pair.reference.tokenizer.decode(list(theirs), half=True)
    torch.testing.assert_close(pair.tokenizer.decode(*ours), expected, rtol=1e-5, atol=1e-5)
    tail = pair.tokenizer.decode_paths(
        (ours[0][:, :-24], ours[1][:, :-24]), (ours[0][:, None, -24:], ours[1][:, None, -24:])
    )
    torch.testing.assert_close(tail[:, 0], expected[:, -24:], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("context", "horizon"),
    [(256, 8), (256, 64), (512, 8), (512, 64)],
)
def test_greedy_decoding_gives_the_same_bars(pair, frame, context, horizon):
    """With the small model's max_context of 512, a context of 512 slides from the second
    step on; mini's 2048 never slides here."""
    window = frame.iloc[:context]
    expected = reference_predict(pair.reference, window, horizon)
    np.testing.assert_allclose(our_bars(pair, window, horizon), expected, rtol=RTOL)


def test_greedy_sample_paths_all_give_the_reference_bars(pair, frame):
    window = frame.iloc[:256]
    expected = reference_predict(pair.reference, window, 8, sample_count=3)
    request = ForecastRequest("600977/CNY", bars(window), 8, [0.5])
    [paths] = pair.ours(sample_count=3).paths([request])
    for path in paths:
        np.testing.assert_allclose(path.numpy(), expected, rtol=RTOL)


def test_a_batch_of_unequal_contexts_gives_each_reference_forecast(pair, frame):
    windows = [frame.iloc[:256], frame.iloc[100:400], frame.iloc[700:950]]
    requests = [
        ForecastRequest(f"S{i}/CNY", bars(w, symbol=f"S{i}/CNY"), 8, [0.5])
        for i, w in enumerate(windows)
    ]
    for window, paths in zip(windows, pair.ours().paths(requests), strict=True):
        expected = reference_predict(pair.reference, window, 8)
        np.testing.assert_allclose(paths[0].numpy(), expected, rtol=RTOL)


@pytest.mark.parametrize("missing", ["amount", "volume"])
def test_a_missing_amount_or_volume_is_filled_as_the_reference_fills_it(pair, frame, missing):
    """The reference fills a missing amount with volume x mean price, and a missing volume
    (and amount) with zeros: our bars without a quote volume, or with a zero volume."""
    window = frame.iloc[:256]
    columns = ["open", "high", "low", "close", "volume"][: 5 if missing == "amount" else 4]
    expected = reference_predict(pair.reference, window, 8, columns=columns)
    ours = our_bars(pair, window, 8, amount=False, volume=missing != "volume")
    np.testing.assert_allclose(ours, expected, rtol=RTOL, atol=1e-6)


def test_both_heads_give_the_reference_distributions(pair, frame):
    """Not only the argmax: the logits sampling draws from, s1 and then s2 given an s1."""
    window = inputs.window(bars(frame.iloc[:300]), 1)
    x = torch.from_numpy(np.ascontiguousarray(window.values))[None]
    s1, s2 = pair.tokenizer.encode(x)
    stamps = torch.from_numpy(window.stamps)[None]
    hidden, _ = pair.model.window(s1, s2, stamps)
    drawn = torch.tensor([[77]])
    dep = pair.model.dependency_kv(hidden[:, None])
    ours_s1 = pair.model.s1_logits(hidden[:, -1])
    ours_s2 = pair.model.s2_logits(hidden[:, None, -1], drawn, None, None, dep)[:, 0]
    with torch.no_grad():
        theirs_s1, context = pair.reference.model.decode_s1(s1, s2, stamps.float())
        theirs_s2 = pair.reference.model.decode_s2(context, drawn)
    torch.testing.assert_close(ours_s1, theirs_s1[:, -1], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours_s2, theirs_s2[:, -1], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"),
    [(1.0, 0, 0.9), (0.7, 0, 0.5), (1.5, 5, 1.0), (1.0, 5, 0.1), (1.0, 1, 0.9), (2.0, 0, 1.0)],
)
def test_sampling_filters_as_the_reference_does(temperature, top_k, top_p):
    ref = reference()
    logits = 3 * torch.randn(32, 1024, generator=torch.Generator().manual_seed(top_k))
    ours = filtered(logits, Sampling(temperature, top_k, top_p))
    theirs = logits / temperature
    if top_k > 0 or top_p < 1.0:
        theirs = ref.kronos.top_k_top_p_filtering(theirs, top_k=top_k, top_p=top_p)
    assert torch.equal(ours, theirs)


def test_a_predictor_step_in_train_mode_draws_the_references_dropout_masks(pair, frame):
    """Our predictor objective against the reference's teacher-forced `Kronos.forward` and
    `DualHead.compute_loss`, both in train mode with the published rates (small: 0.25 after
    the feed-forward and the attention projection, 0.1 on the attention weights and tokens;
    mini: 0.2, 0, 0.2, 0). Seeded alike, the two draw the same masks in the same order (token
    dropout, then per block the attention weights, the projection, the feed-forward), so the
    s1 cross-entropy and every gradient it gives agree. The s2 cross-entropy is not compared:
    its head differs by design in either mode (ours conditions it as generation does, its
    attention unrotated; the reference's training path rotates it), and it draws no mask
    (the dependency layer has no dropout in either), so it cannot hide a difference in them."""
    ref = reference()
    theirs_model = ref.Kronos.from_pretrained(pair.checkpoints.model).train()
    ours_model = load_model(pair.checkpoints.model).train().requires_grad_(True)
    windows = [inputs.window(bars(frame.iloc[i : i + 65]), 1) for i in (0, 300)]
    x = torch.from_numpy(np.stack([w.values for w in windows]))
    stamp = torch.from_numpy(np.stack([w.stamps for w in windows]))
    with torch.no_grad():
        s1, s2 = pair.reference.tokenizer.encode(x, half=True)

    def reference_ce1(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        logits = theirs_model(
            s1[:, :-1], s2[:, :-1], stamp[:, :-1].float(), use_teacher_forcing=True,
            s1_targets=s1[:, 1:],
        )  # fmt: skip
        _, ce1, _ = theirs_model.head.compute_loss(*logits, s1[:, 1:], s2[:, 1:])
        result: torch.Tensor = ce1
        return result

    torch.manual_seed(5)
    mine, _ = predictor_cross_entropies(ours_model, pair.tokenizer, x, stamp)
    mine.backward()
    expected = reference_ce1(5)
    expected.backward()
    torch.testing.assert_close(mine, expected, rtol=1e-5, atol=0)
    gradients = dict(theirs_model.named_parameters())
    compared = 0
    for name, parameter in ours_model.named_parameters():
        grad = gradients[name].grad
        if name.startswith(("dep_layer.", "head.proj_s2.")):
            continue  # the s2 head's: no part of the s1 cross-entropy
        assert parameter.grad is not None, name
        assert grad is not None, name
        scale = grad.abs().max().item()
        torch.testing.assert_close(parameter.grad, grad, rtol=1e-4, atol=1e-5 * scale, msg=name)
        compared += 1
    assert compared > 8 * len(ours_model.transformer)
    with torch.no_grad():
        assert abs(reference_ce1(6).item() - expected.item()) > 1e-5
        theirs_model.eval()
        assert abs(reference_ce1(5).item() - expected.item()) > 1e-5
