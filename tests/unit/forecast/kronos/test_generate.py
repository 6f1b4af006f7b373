"""The KV-cached generation gives what recomputing every window gives (the reference's way),
before and after the window slides past max_context, for batches of unequal contexts."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.unit.forecast.kronos import builders
from trader.forecast.kronos.generate import Contexts, generate
from trader.forecast.kronos.model import KronosModel
from trader.forecast.kronos.sampling import Sampling, draw

VOCAB = 2**builders.MODEL.s1_bits


def random_contexts(lengths: list[int], horizon: int, seed: int = 0) -> Contexts:
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.randint(0, VOCAB, (2, len(lengths), width), generator=generator)
    stamps = torch.stack(
        [torch.randint(0, size, (len(lengths), width + horizon), generator=generator)
         for size in (60, 24, 7, 32, 13)],
        dim=-1,
    )  # fmt: skip
    for b, n in enumerate(lengths):  # padding must not matter: make it garbage
        ids[:, b, n:] = VOCAB - 1
    return Contexts(ids[0], ids[1], lengths, stamps[:, :width], stamps[:, width:])


def recomputed(
    model: KronosModel,
    contexts: Contexts,
    *,
    paths: int,
    max_context: int,
    sampling: Sampling,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference's algorithm, one row at a time: each step runs the whole window (the last
    max_context tokens, positions from 0) and the dependency layer over all of it."""
    horizon = contexts.future.shape[1]
    rows = [(b, s) for b in range(len(contexts.lengths)) for s in range(paths)]
    seq = {
        row: (
            contexts.s1[row[0], : contexts.lengths[row[0]]].tolist(),
            contexts.s2[row[0], : contexts.lengths[row[0]]].tolist(),
        )
        for row in rows
    }
    attn = model.dep_layer.cross_attn
    for _ in range(horizon):
        hidden = {}
        for b, s in rows:
            s1, s2 = seq[b, s]
            stamps = torch.cat([contexts.stamps[b, : contexts.lengths[b]], contexts.future[b]])
            start = max(0, len(s1) - max_context)
            window = torch.tensor(s1[start:])[None], torch.tensor(s2[start:])[None]
            hidden[b, s], _ = model.window(*window, stamps[start : len(s1)][None])
        last = torch.stack([hidden[row][0, -1] for row in rows])
        s1_new = draw(model.s1_logits(last), sampling, generator)
        logits = []
        for n, row in enumerate(rows):
            h = hidden[row]  # [1, W, d]
            q = attn.heads(attn.q_proj, model.embedding.emb_s1(s1_new[n : n + 1])[None])
            k, v = attn.heads(attn.k_proj, h), attn.heads(attn.v_proj, h)
            y = attn.merge(F.scaled_dot_product_attention(q, k, v))
            logits.append(model.head.proj_s2(model.dep_layer.norm(h + y))[0, -1])
        s2_new = draw(torch.stack(logits), sampling, generator)
        for n, row in enumerate(rows):
            seq[row][0].append(int(s1_new[n]))
            seq[row][1].append(int(s2_new[n]))
    out = torch.tensor([[seq[row][i][-horizon:] for row in rows] for i in (0, 1)])
    return out[0].view(-1, paths, horizon), out[1].view(-1, paths, horizon)


def both(lengths, horizon, max_context, paths=1, sampling=None, seed=0):
    sampling = sampling or Sampling(top_k=1)
    model = builders.model()
    contexts = random_contexts(lengths, horizon, seed)
    results = []
    for run in (generate, recomputed):
        generator = torch.Generator().manual_seed(11)
        results.append(
            run(model, contexts, paths=paths, max_context=max_context, sampling=sampling,
                generator=generator)
        )  # fmt: skip
    return results


@pytest.mark.parametrize(
    ("lengths", "horizon", "max_context"),
    [
        ([20], 10, 64),  # the window never slides: all cached
        ([20], 12, 24),  # slides from step 5 on
        ([24], 6, 24),  # the context fills the window: slides from step 1 on
        ([20, 13, 24, 20], 9, 24),  # unequal: symbols slide at different steps, or never
        ([5, 3], 16, 16),  # the longest horizon: the window ends all but one generated
    ],
)
def test_greedy_paths_are_those_of_recomputing_every_window(lengths, horizon, max_context):
    (ours_s1, ours_s2), (ref_s1, ref_s2) = both(lengths, horizon, max_context)
    assert torch.equal(ours_s1, ref_s1)
    assert torch.equal(ours_s2, ref_s2)


@pytest.mark.parametrize("max_context", [64, 22])
def test_sampled_paths_are_those_of_recomputing_every_window(max_context):
    """Same generator, same draws in the same order: identical paths, for every sample path."""
    sampling = Sampling(temperature=1.3, top_p=0.9)
    (ours_s1, ours_s2), (ref_s1, ref_s2) = both(
        [18, 18], 8, max_context, paths=3, sampling=sampling
    )
    assert torch.equal(ours_s1, ref_s1)
    assert torch.equal(ours_s2, ref_s2)
    assert len({tuple(p) for p in ours_s1.flatten(0, 1).tolist()}) > 1  # paths do differ


def test_cached_hidden_states_equal_a_full_recompute():
    model = builders.model()
    generator = torch.Generator().manual_seed(5)
    s1, s2 = torch.randint(0, VOCAB, (2, 2, 16), generator=generator)
    stamps = torch.randint(0, 7, (2, 16, 5), generator=generator)
    full, _ = model.window(s1, s2, stamps)
    # The first 10 tokens as a shared prefix, the next 6 one at a time through the caches.
    hidden, kvs = model.window(s1[:, :10], s2[:, :10], stamps[:, :10])
    own = [(k.new_zeros(2, 1, *k.shape[1:2], 6, k.shape[-1]),) * 2 for k, _ in kvs]
    own = [(a.clone(), b.clone()) for a, b in own]
    steps = []
    for i in range(10, 16):
        steps.append(
            model.extend(
                s1[:, None, i : i + 1], s2[:, None, i : i + 1], stamps[:, i : i + 1],
                torch.tensor([[i], [i]]), kvs, None, own, i - 10,
            )[:, 0, 0]
        )  # fmt: skip
    assert torch.allclose(hidden, full[:, :10], atol=1e-5)
    assert torch.allclose(torch.stack(steps, dim=1), full[:, 10:], atol=1e-5)


def test_a_shorter_context_is_unaffected_by_a_longer_one_beside_it():
    model = builders.model()
    contexts = random_contexts([12, 20], 6)
    alone = Contexts(
        contexts.s1[:1, :12], contexts.s2[:1, :12], [12], contexts.stamps[:1, :12],
        contexts.future[:1],
    )  # fmt: skip
    kwargs = {"paths": 2, "max_context": 24, "sampling": Sampling(top_k=1)}
    batch = generate(model, contexts, generator=torch.Generator(), **kwargs)
    single = generate(model, alone, generator=torch.Generator(), **kwargs)
    assert torch.equal(batch[0][:1], single[0])
    assert torch.equal(batch[1][:1], single[1])


@pytest.mark.parametrize(
    ("length", "horizon", "message"),
    [(9, 2, "a context of 9 tokens exceeds"), (4, 9, "a horizon of 9 tokens exceeds")],
)
def test_more_than_max_context_is_refused(length, horizon, message):
    with pytest.raises(ValueError, match=message):
        generate(
            builders.model(), random_contexts([length], horizon), paths=1, max_context=8,
            sampling=Sampling(), generator=torch.Generator(),
        )  # fmt: skip
