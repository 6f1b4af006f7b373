"""Our fine-tuning steps against the reference implementations' own forward + backward, side by
side in one run, on the same batch and the same random weights. Prints JSON lines: the setup,
one per model (a case: `--case toto`) the moment it ends, a summary (bench/harness.py).

- Toto, the Toto-Open-Base-1.0 configuration (151M parameters, weights written by toto-ts's
  classes in Datadog's format): our step (`TotoTraining`: the causal scaler, `prefill` over every
  patch, Datadog's combined loss) against toto-ts's backbone forward, the same loss
  (`CombinedLoss` on the targets scaled by its loc and scale) and backward;
- Kronos, Kronos-small with Kronos-Tokenizer-base (written by kronos-model-arch's classes):
  our predictor step (`KronosTraining`, part "predictor") against the reference's
  `Kronos.forward` (teacher-forced) + `DualHead.compute_loss` + backward, both encoding the
  window with the frozen tokenizer first.

Per model and implementation, in a fresh worker process: the median step time over `--repeats`
steps after `--warmup`, windows/s, and peak memory (CUDA: `max_memory_allocated`; CPU: the
peak RSS while training, weights and imports included, beside the RSS once loaded). Both train
the same way: train mode, the config's dropout, seeded alike (same masks), bfloat16 autocast on GPUs
with native bfloat16, float32 elsewhere. `first_loss` is each side's loss on the first batch:
for Toto they must agree; for Kronos the s1 cross-entropy agrees and the s2 one differs by
design (ours conditions the s2 head as generation does, causal and unrotated; the reference's
training path rotates it), by a few parts in ten thousand on random weights.

    .venv/bin/python bench/finetune.py [--device cpu|cuda] [--batch N] [--repeats N] [--quick]
        [--case toto|kronos]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # this file's name would hide nothing, but keep the benches alike

from bench.harness import (  # noqa: E402
    add_case_option,
    environment,
    peak_rss_mb,
    reset_peak_rss,
    rss_mb,
    run_cases,
    run_worker,
)
from tests.integration import kronos_reference, toto_reference  # noqa: E402
from tests.recorded import SOLUSDT_1H  # noqa: E402
from trader.config.market_settings import MarketSettings  # noqa: E402
from trader.forecast.kronos.loading import load_model, load_tokenizer  # noqa: E402
from trader.forecast.toto.loading import load_toto  # noqa: E402
from trader.market.files.options import AS_WRITTEN  # noqa: E402
from trader.training.data import read_series, windows  # noqa: E402
from trader.training.kronos_objective import (  # noqa: E402
    KronosBatches,
    KronosTraining,
    QuantizerWeights,
)
from trader.training.toto_objective import TotoBatches, TotoTraining  # noqa: E402


def _batch(args: argparse.Namespace, length: int) -> Any:
    [series] = read_series([args.data], MarketSettings(), AS_WRITTEN, ["SOL/USDT"])
    refs = windows([series], length, 0, 2**62).refs
    step = max(1, len(refs) // args.batch)
    return series, refs[::step][: args.batch]


def _precision(device: torch.device) -> Any:
    if device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast(device.type, enabled=False)


def toto_step(args: argparse.Namespace, device: torch.device) -> tuple[Any, Any]:
    patch = toto_reference.PUBLISHED["patch_size"] if not args.quick else 16
    series, refs = _batch(args, args.context + patch)
    (batch,) = TotoBatches([series], ("close", "high", "low"), args.context + patch).make(
        refs, device
    )
    if args.implementation == "ours":
        model = load_toto(args.checkpoint).train().requires_grad_(True)
        objective = TotoTraining(model, 0.575).to(device)
        return objective, lambda: objective(batch)
    from toto.model.losses import CombinedLoss  # noqa: PLC0415 - the reference

    reference = toto_reference.load_reference(args.checkpoint).model.to(device).train()
    reference.requires_grad_()
    loss_fn = CombinedLoss()

    def step() -> torch.Tensor:
        inputs, targets = batch[..., :-patch], batch[..., patch:]
        valid = torch.ones_like(inputs, dtype=torch.bool)
        out = reference(
            inputs=inputs, input_padding_mask=valid, id_mask=torch.zeros_like(inputs),
            kv_cache=None, scaling_prefix_length=None,
        )  # fmt: skip
        eps = torch.finfo(batch.dtype).eps
        scaled = (targets - out.loc) / (out.scale + eps)
        return loss_fn(out.distribution, scaled).mean()

    return reference, step


def kronos_step(args: argparse.Namespace, device: torch.device) -> tuple[Any, Any]:
    length = args.context + args.horizon
    series, refs = _batch(args, length)
    x, stamp = KronosBatches([series], args.context, length).make(refs, device)
    if args.implementation == "ours":
        tokenizer = load_tokenizer(args.checkpoint / "tokenizer")
        config = tokenizer.config
        objective = KronosTraining(
            load_model(args.checkpoint / "predictor").train(), tokenizer,
            torch.nn.Linear(config.s1_bits, config.d_model),
            QuantizerWeights.from_config({}), "predictor",
        ).to(device)  # fmt: skip
        return objective, lambda: objective(x, stamp)
    ref = kronos_reference.reference()
    model = ref.Kronos.from_pretrained(args.checkpoint / "predictor").to(device).train()
    tokenizer = ref.KronosTokenizer.from_pretrained(args.checkpoint / "tokenizer").to(device)
    tokenizer.eval().requires_grad_(False)

    def step() -> torch.Tensor:
        with torch.no_grad():
            s1, s2 = tokenizer.encode(x, half=True)
        logits = model(
            s1[:, :-1], s2[:, :-1], stamp[:, :-1].float(), use_teacher_forcing=True,
            s1_targets=s1[:, 1:],
        )  # fmt: skip
        loss, _, _ = model.head.compute_loss(logits[0], logits[1], s1[:, 1:], s2[:, 1:])
        return loss

    return model, step


def worker(args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device(args.device)
    torch.manual_seed(0)
    module, step = (toto_step if args.model == "toto" else kronos_step)(args, device)
    params = [p for p in module.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    loaded = rss_mb()
    torch.manual_seed(0)  # the dropout masks: drawn alike by both sides from here
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    else:
        reset_peak_rss()
    times, first = [], None
    for i in range(args.warmup + args.repeats):
        began = time.perf_counter()
        with _precision(device):
            loss = step()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if first is None:
            first = float(loss.detach())
        if i >= args.warmup:
            times.append(time.perf_counter() - began)
    median = sorted(times)[len(times) // 2]
    gpu = device.type == "cuda"
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if gpu else peak_rss_mb()
    return {
        "ms_median": round(median * 1000, 1),
        "windows_per_s": round(args.batch / median, 2),
        "peak_memory_mb": round(peak, 1),
        "memory": "max_memory_allocated while training"
        if gpu
        else "peak RSS while training (weights and imports included)",
        "loaded_rss_mb": round(loaded, 1),
        "first_loss": first,
        "parameters": sum(p.numel() for p in params),
    }


def write(args: argparse.Namespace, folder: Path) -> None:
    """The random checkpoints both sides load: folder/toto, folder/kronos/{predictor,tokenizer}."""
    toto_reference.write_checkpoint(
        folder / "toto", toto_reference.SMALL if args.quick else toto_reference.PUBLISHED, seed=0
    )
    kronos = kronos_reference.write_random(
        folder, kronos_reference.MINI if args.quick else kronos_reference.SMALL
    )
    pair = folder / "kronos"
    pair.mkdir()
    kronos.model.rename(pair / "predictor")
    kronos.tokenizer.rename(pair / "tokenizer")


def side_by_side(args: argparse.Namespace, model: str, checkpoint: Path) -> dict[str, Any]:
    """One model's training step, ours and the reference's, each in a fresh worker."""
    results = {}
    for implementation in ("ours", "reference"):
        results[implementation] = run_worker(
            __file__, "--worker", implementation, model=model, checkpoint=checkpoint,
            device=args.device, data=args.data, batch=args.batch,
            context=args.context, horizon=args.horizon, repeats=args.repeats,
            warmup=args.warmup, quick=args.quick,
        )  # fmt: skip
    ours, theirs = results["ours"], results["reference"]
    return {
        **results,
        "speedup": round(theirs["ms_median"] / ours["ms_median"], 3),
        "memory_ratio": round(ours["peak_memory_mb"] / theirs["peak_memory_mb"], 3),
        "first_loss_relative_difference": abs(ours["first_loss"] - theirs["first_loss"])
        / abs(theirs["first_loss"]),
    }


def speedups(done: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A summary: each finished model's speedup (reference step time over ours)."""
    return {f"{model}_speedup": figures["speedup"] for model, figures in done.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--data", type=Path, default=SOLUSDT_1H, help="a file of bars")
    parser.add_argument("--batch", type=int, default=None, help="windows per step")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--horizon", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="small configurations: a smoke test")
    parser.add_argument("--worker", dest="implementation", choices=["ours", "reference"])
    parser.add_argument("--model", choices=["toto", "kronos"])
    parser.add_argument("--checkpoint", type=Path)
    add_case_option(parser)
    args = parser.parse_args()
    gpu = args.device.startswith("cuda")
    args.batch = args.batch or (32 if gpu else 4)
    args.repeats = args.repeats or (10 if gpu else 3)
    if args.quick:
        args.context, args.horizon, args.repeats, args.warmup = 64, 8, 2, 1
    if args.implementation:
        sys.stdout.write("\n" + json.dumps(worker(args)) + "\n")
        return 0
    setup = environment(args.device) | {
        "batch": args.batch,
        "context": args.context,
        "horizon_kronos": args.horizon,
        "repeats": args.repeats,
        "precision": "bfloat16 autocast"
        if gpu and torch.cuda.is_bf16_supported(including_emulation=False)
        else "float32",
        "configurations": "small (--quick)"
        if args.quick
        else "Toto-Open-Base-1.0; Kronos-small + Kronos-Tokenizer-base",
    }
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        cases = {"toto": folder / "toto", "kronos": folder / "kronos"}
        named = {model: partial(side_by_side, args, model, path) for model, path in cases.items()}
        prepare = partial(write, args, folder)
        return run_cases("finetune", setup, named, args.case, speedups, prepare)


if __name__ == "__main__":
    sys.exit(main())
