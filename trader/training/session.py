"""One fine-tuning run on a decided device, in a claimed folder: prepared, trained, then on
rank 0 the weights in the published format, the evaluation on the held-out tail and the
evidence summary. A run stopped by a signal keeps its checkpoint and says how to resume."""

from __future__ import annotations

import json
import math
import shutil
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from trader.config.finetune_settings import FinetuneSettings
from trader.private_files import write_file
from trader.training import checkpoint
from trader.training.distributed import barrier, wrap
from trader.training.evaluation import Evaluation, evaluate
from trader.training.evidence import Evidence
from trader.training.loop import Record, Setup, run_loop
from trader.training.lora import load_checkpoint_state, merged_state
from trader.training.order import Order
from trader.training.outdir import OutputRefused
from trader.training.plan import data_lines
from trader.training.prepare import Prepared, Session, prepare
from trader.training.progress import Progress
from trader.training.provenance import base_record, data_record, provenance, stamp_weights
from trader.training.signals import StopRequest, stop_on_signals
from trader.training.summary import Summary, number, share

BETAS = (0.9, 0.95)  # AdamW's, as the published Kronos fine-tuning scripts use


def run_session(s: Session) -> int:
    request, world, finetune = s.request, s.world, s.settings.finetune
    p = prepare(s)
    order = Order(len(p.plan.train.refs), finetune.batch_size, finetune.seed)
    max_steps = request.max_steps or (
        request.epochs * order.steps_per_epoch if request.epochs else finetune.max_steps
    )
    optimizer = torch.optim.AdamW(
        p.trainee.trainable(), lr=finetune.learning_rate, betas=BETAS,
        weight_decay=finetune.weight_decay,
    )  # fmt: skip
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, partial(learning_rate_factor, finetune, max_steps)
    )
    # Dropout masks: a stream per process from the seed; a resumed run restores the state
    # its checkpoint saved, so it draws what the uninterrupted run would have.
    torch.manual_seed(finetune.seed * 65_537 + world.rank)
    record = _resume(s, p, optimizer, scheduler) if p.resuming else Record()
    seen = data_record(p.series) if world.main else {}  # the bytes it learns from
    evidence = Evidence(s.folder.evidence) if world.main else None
    if evidence is not None:
        evidence.start(s.settings.forecast, s.device.findings, _config(s, p, max_steps), p.lines)
    if p.resuming:
        _note(s, evidence, f"resumed from {s.folder.last} at step {record.step}")
    progress = Progress(max_steps, record.step, speak=world.main)
    with stop_on_signals(StopRequest()) as stop:
        setup = Setup(
            p.trainee, wrap(p.trainee.objective, world, s.device.device), optimizer, scheduler,
            order, p.plan.train.refs, p.plan.validation_refs(finetune), world, s.device.device,
            s.device.autocast, finetune, max_steps, s.folder, evidence, progress, stop,
            p.plan.split.as_dict(), p.identity, p.adapters,
        )  # fmt: skip
        record = run_loop(setup, record)
    progress.close()
    summary = partial(
        Summary, request.argv, p.what, p.base.label, p.start[0], s.device.choice.fallback,
        data_lines(p.series), p.plan.window_lines(finetune),
        p.plan.split.lines(p.plan.first_ms, p.plan.last_ms),
    )  # fmt: skip
    steps = f"{record.step} of {max_steps}" + (f"; {record.stopped}" if record.stopped else "")
    if record.stopped and record.stopped.startswith("stopped by"):
        outcome = (
            f"{record.stopped} at step {record.step}: checkpoint {s.folder.last} written; "
            "continue with the same command and --resume"
        )
        if evidence is not None:
            evidence.finish(summary(steps, "not written (stopped)", record, None, outcome).markdown)
        s.say(outcome)
        return 0
    if world.main and evidence is not None:
        evaluation = _judge(s, p, partial(
            provenance, argv=request.argv, model=request.model, what=p.what,
            base=base_record(p.base), data=seen, record=record, max_steps=max_steps,
            settings=finetune,
        ))  # fmt: skip
        weights = f"{s.folder.weights} (best validation, step {record.best_step})"
        evidence.finish(summary(steps, weights, record, evaluation, "").markdown)
        _report(s, evaluation, record)
    barrier(world)
    return 0


def _judge(s: Session, p: Prepared, origin: Callable[..., dict[str, Any]]) -> Evaluation:
    """The weights written with their provenance (not judged yet, so weights left by a run
    that dies in its evaluation say so), then base, fine-tuned and naive scored on the test
    tail, and the verdict added to the provenance."""
    _export(s, p)
    stamp_weights(s.folder.weights, origin(evaluation=None))
    evaluation = evaluate(
        p.base, s.folder.weights, p.series, p.plan.test_refs(s.settings.finetune),
        s.settings.finetune, s.settings.forecast, s.device.choice,
    )  # fmt: skip
    stamp_weights(s.folder.weights, origin(evaluation=evaluation))
    write_file(s.folder.eval_file, json.dumps(evaluation.as_dict(), indent=2) + "\n", what="--out")
    return evaluation


def _note(s: Session, evidence: Evidence | None, text: str) -> None:
    s.say(text)
    if evidence is not None:
        evidence.line(text)


def learning_rate_factor(settings: FinetuneSettings, max_steps: int, step: int) -> float:
    """The learning rate after `step` optimizer steps, as a share of the peak: linear warm-up
    from the minimum, then cosine decay to the minimum at `max_steps` (or constant)."""
    floor = settings.min_learning_rate / settings.learning_rate
    warmup = settings.warmup_steps
    if step < warmup:
        return floor + (1 - floor) * step / warmup
    if settings.schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, max_steps - warmup))
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def _resume(
    s: Session,
    p: Prepared,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> Record:
    payload = checkpoint.load(s.folder.last, s.device.device)
    if payload["split"] != p.plan.split.as_dict():
        raise OutputRefused(
            f"{s.folder.last} was trained on another split ({payload['split']}, now "
            f"{p.plan.split.as_dict()}): the data changed; choose another --out"
        )
    try:
        load_checkpoint_state(p.trainee.objective, payload["model"], p.adapters)
    except ValueError as error:
        raise OutputRefused(f"{s.folder.last}: {error}; choose another --out") from None
    optimizer.load_state_dict(payload["optimizer"])
    scheduler.load_state_dict(payload["scheduler"])
    checkpoint.restore_rng(payload["rng"], s.device.device)
    record = Record.restore(payload["record"])
    record.stopped = None
    return record


def _config(s: Session, p: Prepared, max_steps: int) -> dict[str, Any]:
    request = s.request
    return {
        "command": list(request.argv),
        "model": request.model,
        "trained": p.what,
        "base": p.base.describe(),
        "data": p.identity["data"],
        "max_steps": max_steps,
        "lora": request.lora,
        "qlora": request.qlora,
        "device": s.device.choice.describe(),
        "world": s.world.describe(),
        "split": p.plan.split.as_dict(),
        "finetune": s.settings.finetune.model_dump(mode="json"),
        "forecast": s.settings.forecast.model_dump(mode="json"),
        "market": {
            "calendar": s.settings.market.calendar,
            "calendars": s.settings.market.calendars,
        },
    }


def _export(s: Session, p: Prepared) -> None:
    """The best validated weights (the last, when nothing was validated), merged, in the
    published format: written beside DIR/weights, then moved into place."""
    best = s.folder.checkpoints / checkpoint.BEST
    if best.exists():
        state = checkpoint.load(best, s.device.device)["model"]
        load_checkpoint_state(p.trainee.objective, state, p.adapters)
    staging = s.folder.root / ".weights.partial"
    shutil.rmtree(staging, ignore_errors=True)
    p.trainee.export(staging, merged_state(p.trainee.objective, p.adapters))
    shutil.rmtree(s.folder.weights, ignore_errors=True)
    staging.rename(s.folder.weights)


def _report(s: Session, evaluation: Evaluation, record: Record) -> None:
    out = sys.stdout
    out.write(evaluation.verdict() + "\n")
    for name, f in evaluation.scores.items():
        out.write(
            f"  {name:<10} CRPS {number(f.crps)}  skill {number(f.skill)}  MAE {number(f.mae)}"
            f"  MASE {number(f.mase)}  80% coverage {share(f.coverage.get('80'))}\n"
        )
    out.write(
        f"weights: {s.folder.weights} (best validation loss {record.best_loss:.5f} at step "
        f"{record.best_step}; not copied over the serving weights)\n"
        f"evaluation: {s.folder.eval_file}\nevidence: {s.folder.evidence}/\n"
    )
