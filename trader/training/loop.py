"""The training loop: steps, logging, validation with early stopping, checkpoints, and a
clean stop on SIGINT/SIGTERM (the step finishes, a checkpoint is written, the run exits 0 and
`--resume` continues it).

Every process runs the same steps on its share of the batch; rank 0 alone writes. A stop
asked of any process, and the early-stopping decision (from validation losses summed over the
processes), are taken by all of them at the same step.
"""

from __future__ import annotations

import math
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from trader.config.finetune_settings import FinetuneSettings
from trader.training import checkpoint
from trader.training.data import Refs
from trader.training.distributed import World, any_true, total
from trader.training.evidence import Evidence
from trader.training.lora import Adapters, checkpoint_state
from trader.training.modes import evaluating
from trader.training.order import Order
from trader.training.outdir import RunFolder
from trader.training.progress import Progress
from trader.training.signals import StopRequest
from trader.training.trainee import Trainee


@dataclass
class Record:
    """Where the run stands: saved in every checkpoint."""

    step: int = 0
    best_loss: float = math.inf
    best_step: int = -1
    stale: int = 0  # validations since the best
    first_validation: float | None = None
    last_validation: float | None = None
    stopped: str | None = None  # why training ended before max_steps

    @classmethod
    def restore(cls, saved: dict[str, Any]) -> Record:
        return cls(**saved)


@dataclass(frozen=True, eq=False)
class Setup:
    trainee: Trainee
    model: nn.Module  # the objective, DDP-wrapped when distributed
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    order: Order
    train: Refs
    validation: Refs
    world: World
    device: torch.device
    autocast: torch.dtype | None  # None: float32
    settings: FinetuneSettings
    max_steps: int
    folder: RunFolder
    evidence: Evidence | None  # rank 0 only
    progress: Progress
    stop: StopRequest
    split: dict[str, Any]
    identity: dict[str, Any] = field(default_factory=dict)
    adapters: Adapters | None = None  # --lora / --qlora: checkpoints keep what trains

    def precision(self) -> AbstractContextManager[Any]:
        if self.autocast is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast)


def run_loop(setup: Setup, record: Record) -> Record:
    settings = setup.settings
    params = setup.trainee.trainable()
    losses: list[float] = []
    if record.first_validation is None:
        _validate(setup, record)  # the start's own loss: what training has to beat
    clock = time.perf_counter()
    steps_timed = 0
    while record.step < setup.max_steps:
        step = record.step
        batch = setup.trainee.batches.make(
            setup.train[setup.order.share(step, setup.world)], setup.device
        )
        with setup.precision():
            loss = setup.model(*batch)
        setup.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if settings.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, settings.grad_clip)
        setup.optimizer.step()
        setup.scheduler.step()
        record.step = step + 1
        losses.append(float(loss.detach()))
        steps_timed += 1
        setup.progress.advance(losses[-1])
        last = record.step == setup.max_steps
        if record.step % settings.log_interval == 0 or last:
            _log_step(setup, record, losses, steps_timed / (time.perf_counter() - clock))
            losses, steps_timed = [], 0
        if record.step % settings.validation_interval == 0 or last:
            _validate(setup, record)
        stop = any_true(setup.stop.requested is not None, setup.world, setup.device)
        if stop and record.stopped is None:
            record.stopped = f"stopped by {setup.stop.requested or 'another process'}"
        if record.step % settings.checkpoint_interval == 0 or last or record.stopped:
            save(setup, record)
        if record.stopped:
            break
        if steps_timed == 0:
            clock = time.perf_counter()
    return record


def _log_step(setup: Setup, record: Record, losses: list[float], steps_per_s: float) -> None:
    loss_sum, count = total([sum(losses), float(len(losses))], setup.world, setup.device)
    loss = loss_sum / count
    rate = steps_per_s * setup.settings.batch_size
    lr = setup.optimizer.param_groups[0]["lr"]
    fields: dict[str, Any] = {
        "kind": "train", "step": record.step, "loss": loss, "lr": lr,
        "windows_per_s": round(rate, 2), "device": str(setup.device),
    }  # fmt: skip
    text = (
        f"step {record.step}/{setup.max_steps} loss {loss:.5f} lr {lr:.3e} "
        f"windows/s {rate:.1f} device={setup.device}"
    )
    if setup.device.type == "cuda":
        peak = torch.cuda.max_memory_allocated(setup.device) / 2**20
        fields["peak_gpu_memory_mib"] = round(peak)
        text += f" peak_gpu_memory={peak:.0f}MiB"
    if setup.evidence is not None:
        setup.evidence.line(text)
        setup.evidence.record(fields)
        if setup.device.type == "cuda":
            setup.evidence.snapshot_gpu()
    setup.progress.say("step", text, **{k: v for k, v in fields.items() if k != "kind"})


def validation_loss(setup: Setup) -> float:
    """The mean loss over the validation windows, every process scoring its share."""
    trainee, world = setup.trainee, setup.world
    mine = setup.validation[world.rank :: world.size]
    per = max(1, setup.settings.batch_size // world.size)
    loss_sum, count = 0.0, 0.0
    with torch.no_grad(), setup.precision(), evaluating(trainee.objective):  # no dropout
        for start in range(0, len(mine), per):
            refs = mine[start : start + per]
            loss = trainee.objective(*trainee.batches.make(refs, setup.device))
            loss_sum += float(loss) * len(refs)
            count += len(refs)
    loss_sum, count = total([loss_sum, count], world, setup.device)
    return loss_sum / count


def _validate(setup: Setup, record: Record) -> None:
    loss = validation_loss(setup)
    if record.first_validation is None:
        record.first_validation = loss
    record.last_validation = loss
    improved = loss < record.best_loss
    if improved:
        record.best_loss, record.best_step, record.stale = loss, record.step, 0
        if setup.world.main:
            _save_best(setup, record)
    else:
        record.stale += 1
    patience = setup.settings.patience
    text = (
        f"validation step {record.step} loss {loss:.5f} "
        f"(best {record.best_loss:.5f} at step {record.best_step})"
    )
    if setup.evidence is not None:
        setup.evidence.line(text)
        setup.evidence.record({"kind": "validation", "step": record.step, "loss": loss})
    setup.progress.say("validation", text, step=record.step, loss=loss, best=record.best_loss)
    if patience and record.stale >= patience and record.step < setup.max_steps:
        record.stopped = (
            f"early stop: no better validation loss in {patience} validations since step "
            f"{record.best_step}"
        )


def _save_best(setup: Setup, record: Record) -> None:
    payload = {
        "format": checkpoint.FORMAT,
        "step": record.step,
        "loss": record.best_loss,
        "model": checkpoint_state(setup.trainee.objective, setup.adapters),
    }
    _write(setup, setup.folder.checkpoints / checkpoint.BEST, payload, record)


def save(setup: Setup, record: Record) -> None:
    """The resumable checkpoint (rank 0 writes; every process waits for nothing)."""
    if not setup.world.main:
        return
    payload = {
        "format": checkpoint.FORMAT,
        "step": record.step,
        "record": asdict(record),
        "model": checkpoint_state(setup.trainee.objective, setup.adapters),
        "optimizer": setup.optimizer.state_dict(),
        "scheduler": setup.scheduler.state_dict(),
        "rng": checkpoint.rng_state(setup.device),
        "split": setup.split,
        "identity": setup.identity,
    }
    _write(setup, setup.folder.last, payload, record)
    if setup.evidence is not None:
        setup.evidence.line(f"checkpoint step {record.step} -> {setup.folder.last}")


def _write(setup: Setup, path: Any, payload: dict[str, Any], record: Record) -> None:
    try:
        checkpoint.save_atomic(path, payload)
    except OSError as error:
        raise checkpoint.CheckpointFailed(
            f"the checkpoint of step {record.step} could not be written to {path} "
            f"({error.strerror or error}); the one before it is intact"
        ) from error
