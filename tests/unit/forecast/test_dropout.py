"""Dropout where the model authors have it, read from the checkpoint's config: active in
training mode at the configured rate, absent (not even called) in eval mode, where the
computation is the one without dropout, bit for bit."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import nn

from tests.unit.forecast.kronos import builders as kronos_builders
from tests.unit.forecast.toto import builders as toto_builders
from trader.forecast.dropout import without_dropout
from trader.forecast.kronos.config import DropoutRates
from trader.forecast.kronos.loading import load_model, load_tokenizer
from trader.forecast.kronos.model import KronosModel
from trader.forecast.toto.config import TotoConfig
from trader.forecast.toto.loading import load_toto
from trader.forecast.toto.model import TotoModel
from trader.forecast.weights import CheckpointMismatch


class Seen:
    """Per named dropout module: the elements it zeroed and the elements it saw."""

    def __init__(self) -> None:
        self.zeroed: dict[str, int] = {}
        self.total: dict[str, int] = {}

    def share(self, suffix: str) -> tuple[float, int]:
        names = [n for n in self.total if n.endswith(suffix)]
        assert names, f"no dropout module named *{suffix} ran"
        total = sum(self.total[n] for n in names)
        return sum(self.zeroed[n] for n in names) / total, total


@contextmanager
def watching(module: nn.Module) -> Iterator[Seen]:
    """Hooks every nn.Dropout of `module`; checks that what it kept is scaled by 1 / (1 - p)."""
    seen = Seen()

    def hook(name: str, p: float):  # type: ignore[no-untyped-def]
        def record(_: nn.Module, args: tuple[torch.Tensor], out: torch.Tensor) -> None:
            (x,) = args
            kept = out != 0
            seen.zeroed[name] = seen.zeroed.get(name, 0) + int((x != 0).sum() - kept.sum())
            seen.total[name] = seen.total.get(name, 0) + int((x != 0).sum())
            torch.testing.assert_close(out[kept], x[kept] / (1 - p))

        return record

    handles = [
        m.register_forward_hook(hook(name, m.p))
        for name, m in module.named_modules()
        if isinstance(m, nn.Dropout)
    ]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def within_binomial(share: float, p: float, n: int) -> bool:
    """Five standard errors of a binomial share: fails by chance about once in 3.5 million."""
    return abs(share - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


def _toto(rate: float, seed: int = 0) -> TotoModel:
    model = TotoModel(TotoConfig.from_json(toto_builders.CONFIG | {"dropout": rate}, "test"))
    model.load_state_dict(toto_builders.published(seed))
    return model


def _toto_head(model: TotoModel, seed: int) -> torch.Tensor:
    scaled = torch.randn(
        3, 2, 6 * model.config.patch_size, generator=torch.Generator().manual_seed(9)
    )
    torch.manual_seed(seed)
    with torch.no_grad():
        head, _, _ = model.prefill(scaled, every_patch=True)
    return head.loc


def test_toto_reads_its_rate_from_the_checkpoint_with_the_published_default(tmp_path):
    toto_builders.write(
        tmp_path / "a", toto_builders.published(), toto_builders.CONFIG | {"dropout": 0.3}
    )
    assert load_toto(tmp_path / "a").config.dropout == 0.3
    without = {k: v for k, v in toto_builders.CONFIG.items() if k != "dropout"}
    toto_builders.write(tmp_path / "b", toto_builders.published(), without)
    assert load_toto(tmp_path / "b").config.dropout == 0.1  # Toto-Open-Base-1.0's config.json
    for bad in (1.0, -0.1, "x"):
        toto_builders.write(
            tmp_path / "c", toto_builders.published(), toto_builders.CONFIG | {"dropout": bad}
        )
        with pytest.raises(CheckpointMismatch, match="dropout"):
            load_toto(tmp_path / "c")


def test_toto_drops_the_configured_share_after_the_feed_forward_in_training_only():
    rate = 0.3
    model = _toto(rate).train()
    with watching(model) as seen:
        _toto_head(model, seed=1)
    share, n = seen.share("mlp.1")
    assert len(seen.total) == model.config.num_layers  # one per layer, as the reference has it
    assert within_binomial(share, rate, n), (share, n)
    model.eval()
    with watching(model) as seen:
        evaluated = _toto_head(model, seed=1)
    assert not seen.total  # not even called in eval mode
    assert torch.equal(evaluated, _toto_head(_toto(0.0).eval(), seed=2))


def test_toto_attention_dropout_is_seeded_and_off_in_eval_mode():
    """The attention weights' dropout runs inside scaled_dot_product_attention, where no hook
    sees it: with the feed-forward's out of the way, train-mode outputs still depend on the
    seed (and only on it), and eval mode is the dropout-free computation."""
    model = _toto(0.3).train()
    for layer in model.model.transformer.blocks:
        layer.mlp[1].p = 0.0
    assert {layer.attention.attn_dropout.p for layer in model.model.transformer.blocks} == {0.3}
    first, again, other = (_toto_head(model, seed) for seed in (1, 1, 2))
    assert torch.equal(first, again)
    assert not torch.allclose(first, other)
    plain = _toto_head(_toto(0.0).train(), seed=1)
    assert not torch.allclose(first, plain)
    assert torch.equal(_toto_head(model.eval(), 1), _toto_head(_toto(0.0).eval(), 3))


RATES = {
    "ffn_dropout_p": 0.25,
    "attn_dropout_p": 0.1,
    "resid_dropout_p": 0.15,
    "token_dropout_p": 0.05,
}


def _kronos_checkpoint(directory, rates):  # type: ignore[no-untyped-def]
    tensors = kronos_builders.published_tensors(kronos_builders.model())
    path = kronos_builders.write_checkpoint(directory, kronos_builders.MODEL, tensors)
    raw = json.loads((path / "config.json").read_text())
    raw = {k: v for k, v in raw.items() if not k.endswith("_dropout_p")} | rates
    (path / "config.json").write_text(json.dumps(raw))
    return path


def _kronos_hidden(model: KronosModel, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(5)
    vocab = 2**model.config.s1_bits
    s1, s2 = (torch.randint(vocab, (4, 48), generator=generator) for _ in range(2))
    stamp = torch.randint(0, 7, (4, 48, 5), generator=generator)
    torch.manual_seed(seed)
    with torch.no_grad():
        hidden, _ = model.window(s1, s2, stamp)
    return hidden


def test_kronos_drops_each_path_at_its_configured_rate_in_training_only(tmp_path):
    model = load_model(_kronos_checkpoint(tmp_path, RATES)).train()
    assert model.dropout == DropoutRates(ffn=0.25, attn=0.1, resid=0.15, token=0.05)
    with watching(model) as seen:
        _kronos_hidden(model, seed=1)
    for suffix, key in (
        ("ffn_dropout", "ffn"),
        ("resid_dropout", "resid"),
        ("token_drop", "token"),
    ):
        share, n = seen.share(suffix)
        assert within_binomial(share, RATES[f"{key}_dropout_p"], n), (suffix, share, n)
    # The dependency layer has none: the reference builds it with its defaults of zero.
    assert not [name for name in seen.total if name.startswith("dep_layer")]
    model.eval()
    with watching(model) as seen:
        evaluated = _kronos_hidden(model, seed=1)
    assert not seen.total
    assert torch.equal(evaluated, _kronos_hidden(kronos_builders.model(), seed=2))


def test_kronos_attention_dropout_alone_changes_training_outputs_by_the_seed(tmp_path):
    only_attention = {
        "ffn_dropout_p": 0.0,
        "attn_dropout_p": 0.3,
        "resid_dropout_p": 0.0,
        "token_dropout_p": 0.0,
    }
    model = load_model(_kronos_checkpoint(tmp_path, only_attention)).train()
    first, again, other = (_kronos_hidden(model, seed) for seed in (1, 1, 2))
    assert torch.equal(first, again)
    assert not torch.allclose(first, other)
    assert torch.equal(_kronos_hidden(model.eval(), 1), _kronos_hidden(kronos_builders.model(), 2))


def test_kronos_rates_default_to_the_published_and_bad_ones_are_refused(tmp_path):
    # NeoQuasar/Kronos-small's config.json
    published = DropoutRates(ffn=0.25, attn=0.1, resid=0.25, token=0.1)
    assert load_model(_kronos_checkpoint(tmp_path / "a", {})).dropout == published
    tensors = kronos_builders.published_tensors(kronos_builders.tokenizer())
    path = kronos_builders.write_checkpoint(tmp_path / "t", kronos_builders.TOKENIZER, tensors)
    assert load_tokenizer(path).dropout == DropoutRates(ffn=0.1)  # as the builder writes it
    for bad in (1.0, -0.5, "0.1", True):
        with pytest.raises(CheckpointMismatch, match="attn_dropout_p"):
            load_model(_kronos_checkpoint(tmp_path / "b", RATES | {"attn_dropout_p": bad}))


def test_without_dropout_training_mode_computes_eval_mode_with_no_random_draw(tmp_path):
    toto = without_dropout(_toto(0.3).train())
    kronos = without_dropout(load_model(_kronos_checkpoint(tmp_path, RATES)).train())
    for model, run in ((toto, _toto_head), (kronos, _kronos_hidden)):
        assert model.training
        torch.manual_seed(0)
        state = torch.get_rng_state()
        trained = run(model, seed=0)
        assert torch.equal(torch.get_rng_state(), state)
        assert torch.equal(trained, run(model.eval(), seed=1))
