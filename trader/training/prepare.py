"""Everything a run needs before its first step, on every process: the first lines (the
device decision, a fallback said first), the data, the claimed output folder, the base (rank 0
writes a random one, the others then read it), the model built from it with its adapters, and
the split and windows it will learn from."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from typing import Any

import torch

from trader.config.finetune_settings import FinetuneSettings
from trader.config.schema import Settings
from trader.forecast.dropout import without_dropout
from trader.logging import get_logger
from trader.training.base import Base, resolve_base
from trader.training.data import Series, read_series
from trader.training.device import TrainingDevice
from trader.training.distributed import World, barrier
from trader.training.lora import Adapters, add_adapters
from trader.training.outdir import RunFolder
from trader.training.plan import Plan, data_lines, plan
from trader.training.request import FinetuneRequest
from trader.training.trainee import Trainee, build_trainee


@dataclass(frozen=True)
class Session:
    settings: Settings
    request: FinetuneRequest
    world: World
    device: TrainingDevice
    folder: RunFolder
    notes: tuple[str, ...] = ()  # defaults changed for this run, said after the device

    def say(self, text: str) -> None:
        """A line for the operator, on stderr, from rank 0."""
        if self.world.main:
            sys.stderr.write(text.rstrip() + "\n")
            sys.stderr.flush()


@dataclass(frozen=True, eq=False)
class Prepared:
    series: list[Series]
    identity: dict[str, Any]
    resuming: bool
    base: Base
    trainee: Trainee
    plan: Plan
    adapters: Adapters | None
    what: str  # what is trained, e.g. "kronos (predictor, LoRA rank 8, merged)"
    start: list[str]  # the device line, and the fallback warning when there is one
    lines: list[str]  # start, then the model, the data, the split and the windows


def prepare(s: Session) -> Prepared:
    request, world, finetune = s.request, s.world, s.settings.finetune
    log = get_logger("trader.finetune", rank=world.rank)
    start = [s.device.start_line(world)]
    fallback = s.device.fallback_line()
    if fallback:
        start.append(fallback)
    start += s.notes
    for line in start:
        s.say(line)
    log.info("finetune device", **s.device.choice.describe(), world_size=world.size)
    if fallback:
        log.warning("finetune fallback", reason=s.device.choice.fallback)
    series = read_series(request.data, s.settings.market, request.reading, request.symbols)
    identity = _identity(s.settings, request, series)
    fresh = not s.folder.holds_anything()
    resuming = s.folder.claim(identity, request.resume)
    barrier(world)  # every process has looked at the folder before rank 0 writes to it
    try:
        if world.main:
            s.folder.write_identity(identity)
        base = _base(s)
        torch.manual_seed(finetune.seed)  # what draws from torch's generator (LoRA's adapters)
        trainee = build_trainee(base, series, finetune, s.settings.forecast)
        if not finetune.dropout:
            without_dropout(trainee.objective)
        chosen = plan(series, finetune, trainee.window, trainee.min_gap)
    except Exception:
        if fresh and world.main:  # a run refused before its first step leaves no folder
            shutil.rmtree(s.folder.root, ignore_errors=True)
        raise
    what = f"{request.model} ({_what(trainee, request, finetune)})"
    lines = [
        *start,
        f"model {what} from {base.label}",
        "dropout: the base's rates, in training steps only"
        if finetune.dropout
        else "dropout: off (finetune.dropout = false)",
        *data_lines(series),
        *chosen.split.lines(chosen.first_ms, chosen.last_ms),
        *chosen.window_lines(finetune),
    ]
    for line in lines[len(start) :]:
        s.say(line)
    adapters = _adapters(trainee, request, finetune, s.device)
    trainee.objective.to(s.device.device)
    return Prepared(series, identity, resuming, base, trainee, chosen, adapters, what, start, lines)


def _base(s: Session) -> Base:
    """Rank 0 first (it may write the random base), then the others."""
    request, world = s.request, s.world

    def resolve() -> Base:
        return resolve_base(
            request.model, request.base, s.settings.forecast, s.folder.root,
            s.settings.finetune.seed,
        )  # fmt: skip

    base = resolve() if world.main else None
    barrier(world)
    return base if base is not None else resolve()


def _what(trainee: Trainee, request: FinetuneRequest, settings: FinetuneSettings) -> str:
    part = {"all": "every weight", "head": "the output head"}.get(trainee.part, trainee.part)
    if request.qlora:
        return f"{part}, QLoRA rank {settings.lora_rank} on a 4-bit base, merged"
    if request.lora:
        return f"{part}, LoRA rank {settings.lora_rank}, merged"
    return part


def _identity(settings: Settings, request: FinetuneRequest, series: list[Series]) -> dict[str, Any]:
    return {
        "model": request.model,
        "base": request.base or "the configured model",
        "lora": request.lora,
        "qlora": request.qlora,
        "data": [{"file": str(x.path.resolve()), "bars": len(x)} for x in series],
        "variates": list(settings.forecast.toto.variates) if request.model == "toto" else None,
        "settings": settings.finetune.model_dump(mode="json"),
    }


def _adapters(
    trainee: Trainee, request: FinetuneRequest, settings: FinetuneSettings, device: TrainingDevice
) -> Adapters | None:
    if not request.adapters:
        return None
    return add_adapters(
        trainee.objective,
        trainee.lora_targets(),
        settings,
        quantize_on=device.device if request.qlora else None,
        compute_dtype=device.autocast or torch.float32,
    )
