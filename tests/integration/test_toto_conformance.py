"""Our Toto against the reference `toto-ts==0.2.0`, on random weights saved in the published
format and loaded by both: backbone outputs, the KV-cached decode path, sampled quantiles,
and compiled mode's recompiles."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.integration.toto_reference import (
    PUBLISHED,
    SMALL,
    load_reference,
    quantile_z,
    reference_samples,
    write_checkpoint,
)
from trader.forecast.protocol import CompileStats
from trader.forecast.runtime import RecompileCounter
from trader.forecast.toto.forecaster import TotoForecaster
from trader.forecast.toto.loading import load_toto
from trader.forecast.toto.model import Head, TotoModel
from trader.forecast.toto.scaler import scale_context, scale_patch
from trader.training.toto_objective import TotoTraining

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["small", "published"])
def checkpoint(request, tmp_path_factory) -> tuple[dict[str, Any], Path]:
    config = SMALL if request.param == "small" else PUBLISHED
    directory = tmp_path_factory.mktemp(f"toto-{request.param}")
    write_checkpoint(directory, config, seed=0)
    return config, directory


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("toto-small-only")
    write_checkpoint(directory, SMALL, seed=1)
    return directory


def series(batch: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 3, length, generator=generator).cumsum(-1) * 3 + 100
    return x, torch.ones_like(x, dtype=torch.bool)


def assert_head(reference: Any, ours: Head, positions: slice) -> None:
    """Within 1e-4 of each tensor's typical magnitude (element-wise relative error is
    meaningless for values that cross zero)."""
    components = reference.component_distribution
    for name, theirs, mine in (
        ("df", components.df[:, :, positions], ours.df),
        ("loc", components.loc[:, :, positions], ours.loc),
        ("scale", components.scale[:, :, positions], ours.scale),
        ("weights", reference.mixture_distribution.probs[:, :, positions], ours.logits.softmax(-1)),
    ):
        typical = theirs.abs().mean().item()
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-4 * typical, msg=name)


def test_the_backbone_matches_the_reference(checkpoint):
    config, directory = checkpoint
    reference, ours = load_reference(directory), load_toto(directory)
    patch = config["patch_size"]
    x, valid = series(2, patch * 6, seed=1)
    valid[1, :, : patch + 5] = False  # left padding inside the first patch of one series
    x[1, :, : patch + 5] = 0.0
    with torch.no_grad():
        theirs = reference.model(
            inputs=x, input_padding_mask=valid, id_mask=torch.zeros_like(x), kv_cache=None,
            scaling_prefix_length=x.shape[-1],
        )  # fmt: skip
        scaled, loc, scale, _ = scale_context(x, valid, patch, stabilize=True, exponent=10.0)
        head, _, _ = ours.prefill(scaled, every_patch=True)
    assert torch.equal(theirs.loc, loc.repeat_interleave(patch, -1))
    assert torch.equal(theirs.scale, scale.repeat_interleave(patch, -1))
    assert_head(theirs.distribution, head, slice(None))


def test_the_kv_cached_decode_path_matches_the_reference(checkpoint):
    config, directory = checkpoint
    reference, ours = load_reference(directory), load_toto(directory)
    patch, steps = config["patch_size"], 4
    x, valid = series(2, patch * 5, seed=2)
    b, v, t = x.shape
    future = [x[..., -patch:] + torch.randn(b, v, patch) * (i + 1) for i in range(steps - 1)]
    with torch.no_grad():
        cache = reference.model.allocate_kv_cache(
            batch_size=b, num_variates=v, max_time_steps=t + steps * patch, device=x.device,
            dtype=x.dtype,
        )  # fmt: skip
        inputs, mask, theirs = x, valid, []
        for new in [None, *future]:
            if new is not None:
                inputs = torch.cat([inputs, new], -1)
                mask = torch.cat([mask, torch.ones_like(new, dtype=torch.bool)], -1)
            theirs.append(
                reference.model(
                    inputs=inputs,
                    input_padding_mask=mask,
                    id_mask=torch.zeros_like(inputs),
                    kv_cache=cache,
                    scaling_prefix_length=t,
                )
            )
        scaled, loc, scale, state = scale_context(x, valid, patch, stabilize=True, exponent=10.0)
        head, keys, values = ours.prefill(scaled)
        assert_head(theirs[0].distribution, head, slice(-patch, None))
        layers, _, heads, context, dim = keys.shape
        shared = (
            keys.view(layers, b, v, heads, context, dim),
            values.view(layers, b, v, heads, context, dim),
        )
        decoded = [keys.new_zeros((layers, b, 1, v, heads, steps - 1, dim)) for _ in range(2)]
        for step, new in enumerate(future):
            scaled_new, loc, scale, state = scale_patch(new, state, patch)
            assert torch.equal(theirs[step + 1].loc[..., -1], loc[..., -1])
            assert torch.equal(theirs[step + 1].scale[..., -1], scale[..., -1])
            head, new_k, new_v = ours.decode(
                scaled_new.view(b, 1, v, patch), *shared, *decoded, torch.tensor(step)
            )
            decoded[0][..., step, :] = new_k[..., 0, :]
            decoded[1][..., step, :] = new_v[..., 0, :]
            squeezed = Head(*(t.squeeze(1) for t in (head.df, head.loc, head.scale, head.logits)))
            assert_head(theirs[step + 1].distribution, squeezed, slice(-patch, None))


def test_sampled_quantiles_agree_with_the_reference_within_sampling_error(checkpoint):
    config, directory = checkpoint
    reference, ours = load_reference(directory), load_toto(directory)
    patch = ours.config.patch_size
    # Patches sampled from the context's head and decoded ones. The published model is
    # costly on a CPU: a context of one patch and two patches ahead (one decode step).
    context, horizon = (5 * patch, 40) if config is SMALL else (patch, 2 * patch)
    x, valid = series(1, context, seed=3)
    n = 2000
    torch.manual_seed(7)
    theirs = reference_samples(reference.model, x, valid, horizon, n, per_batch=100)
    with torch.inference_mode():
        mine = (
            TotoForecaster(ours)
            .sample_paths(x, valid, horizon, n, torch.Generator().manual_seed(11))
            .permute(0, 2, 3, 1)
        )

    def agrees(samples: torch.Tensor, q: float) -> bool:
        z = quantile_z(samples, theirs, q)
        return bool(z.max() < 5.0 and 0.55 < z.mean() < 1.1)  # |N(0, 1)| averages 0.80

    for q in (0.1, 0.4, 0.5, 0.6, 0.9):
        assert agrees(mine, q), (q, quantile_z(mine, theirs, q).mean())
    # The check can fail: the same samples spread 10% wider around their median are caught.
    median = mine.median(dim=-1, keepdim=True).values
    assert not agrees(median + (mine - median) * 1.10, 0.9)


@pytest.mark.timeout(900)  # inductor compiles: 3 minutes alone, more beside other work
def test_compiled_mode_does_not_recompile_as_shapes_change_and_the_reference_does(small):
    # Cold: no graphs from earlier tests and no on-disk caches, whose profile (dynamo's PGO)
    # would mark the sizes dynamic from the start and hide a specialisation.
    torch._dynamo.reset()
    counter = RecompileCounter().install()
    try:
        with torch.compiler.config.patch(force_disable_caches=True):
            forecaster = TotoForecaster(load_toto(small), num_samples=16, compiled=True)

            def run(batch: int, patches: int, horizon: int) -> None:
                x, valid = series(batch, 16 * patches, seed=batch * 100 + patches)
                # A forecast call, as the daemon's: the model's own counters see it.
                with forecaster.runtime.call(), torch.inference_mode():
                    generator = torch.Generator().manual_seed(0)
                    forecaster.sample_paths(x, valid, horizon, 16, generator)

            for shape in [(2, 4, 40), (3, 6, 60)]:  # warm-up: two shapes, so sizes go symbolic
                run(*shape)
            warm = counter.count
            # One symbol after more than one: a batch size of 1 must not get a graph of its own.
            for shape in [(1, 3, 17), (2, 8, 48), (4, 5, 64), (1, 10, 33), (3, 7, 16), (2, 12, 80)]:
                run(*shape)
            ours_after_warmup = counter.count - warm

            compiled = torch.compile(load_reference(small).model)
            before = counter.count
            x, valid = series(2, 16 * 4, seed=5)
            reference_samples(compiled, x, valid, 48, 16, per_batch=16)
            theirs = counter.count - before
    finally:
        counter.uninstall()
        torch._dynamo.reset()
    assert ours_after_warmup == 0, counter.reasons[warm:]
    assert warm == 0, counter.reasons
    # The model's own account agrees, and it did not count the reference's recompiles.
    assert forecaster.mode == "compile"
    assert forecaster.compile_stats == CompileStats()
    assert theirs >= 3  # its KV cache reads positions back with .item(): a graph per step


def test_a_model_with_every_tensor_in_place_loads_strictly(checkpoint):
    _, directory = checkpoint
    model = load_toto(directory)
    assert isinstance(model, TotoModel)


def test_a_training_step_in_train_mode_is_the_references_with_the_same_dropout_masks(small):
    """Our fine-tuning step (`TotoTraining`) against toto-ts's backbone and `CombinedLoss`, both
    in train mode with the config's dropout (0.1): seeded alike, the two draw the same masks in
    the same order (scaled_dot_product_attention's on the attention weights, then the
    feed-forward's, layer by layer, on tensors of the same shapes), so the loss and every
    gradient agree. Another seed gives another loss: the masks matter, and are the same."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from toto.model.losses import CombinedLoss  # noqa: PLC0415

    reference = load_reference(small).model.train().requires_grad_(True)
    ours = TotoTraining(load_toto(small).train().requires_grad_(True), nll_weight=0.575)
    patch = SMALL["patch_size"]
    windows, _ = series(2, patch * 6, seed=4)

    def theirs(seed: int) -> torch.Tensor:
        inputs, targets = windows[..., :-patch], windows[..., patch:]
        torch.manual_seed(seed)
        out = reference(
            inputs=inputs, input_padding_mask=torch.ones_like(inputs, dtype=torch.bool),
            id_mask=torch.zeros_like(inputs), kv_cache=None, scaling_prefix_length=None,
        )  # fmt: skip
        scaled = (targets - out.loc) / (out.scale + torch.finfo(windows.dtype).eps)
        loss: torch.Tensor = CombinedLoss()(out.distribution, scaled).mean()
        return loss

    torch.manual_seed(11)
    mine = ours(windows)
    mine.backward()
    expected = theirs(11)
    expected.backward()
    torch.testing.assert_close(mine, expected, rtol=1e-6, atol=0)
    gradients = dict(reference.named_parameters())
    for name, parameter in ours.model.model.named_parameters():
        theirs_name = name.replace(".mlp.0.w12.", ".mlp.0.").replace(".mlp.0.w3.", ".mlp.2.")
        grad = gradients[theirs_name].grad
        assert parameter.grad is not None, name
        assert grad is not None, name
        torch.testing.assert_close(
            parameter.grad, grad, rtol=1e-4, atol=1e-5 * grad.abs().max().item(), msg=name
        )
    with torch.no_grad():
        assert abs(theirs(12).item() - expected.item()) > 1e-4
        reference.eval()
        assert abs(theirs(11).item() - expected.item()) > 1e-4
