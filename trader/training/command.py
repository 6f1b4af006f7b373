"""`trader finetune`: the run from the command line's request to the exit code.

In order: the device (refused with the reason, or stated in the first lines, a fallback
included), the output folder (refused if it holds another run), the data and its split, the
base and the model built from it (adapters for --lora), the loop, then on rank 0 the weights
in the published format, the evaluation on the held-out tail and the evidence summary.
"""

from __future__ import annotations

import os
import sys

from trader.config.schema import Settings
from trader.exit_codes import (
    EX_CANTCREAT,
    EX_CONFIG,
    EX_DATAERR,
    EX_TEMPFAIL,
    EX_UNAVAILABLE,
    EX_USAGE,
)
from trader.forecast.weights import CheckpointMismatch, WeightsUnavailable
from trader.market.files.options import ReplayDataError
from trader.market.replay import RecordingsRequestError
from trader.private_files import UnsafePath
from trader.training.checkpoint import CheckpointFailed, CheckpointRefused
from trader.training.device import TrainingDeviceRefused, decide
from trader.training.distributed import World, join, leave, world_from
from trader.training.lora import LoraUnavailable, lora_refusal, qlora_refusal
from trader.training.outdir import OutputRefused, RunFolder
from trader.training.plan import NotEnoughData
from trader.training.prepare import Session
from trader.training.random_base import SettingsRefused, random_base_defaults
from trader.training.request import FinetuneRequest
from trader.training.session import run_session

# What each refusal exits with: the data (65), the device or weights (69), the settings (78),
# the command line's choice of folder (64), a full disk while checkpointing (75), a link
# planted where a file goes (73), a checkpoint holding more than tensors and values (65).
_EXITS: tuple[tuple[type[Exception], int], ...] = (
    (ReplayDataError, EX_DATAERR),
    (RecordingsRequestError, EX_DATAERR),
    (NotEnoughData, EX_DATAERR),
    (TrainingDeviceRefused, EX_UNAVAILABLE),
    (WeightsUnavailable, EX_UNAVAILABLE),
    (CheckpointMismatch, EX_UNAVAILABLE),
    (LoraUnavailable, EX_UNAVAILABLE),
    (OutputRefused, EX_USAGE),
    (CheckpointFailed, EX_TEMPFAIL),
    (SettingsRefused, EX_CONFIG),
    (UnsafePath, EX_CANTCREAT),
    (CheckpointRefused, EX_DATAERR),
)


def run_finetune(
    settings: Settings, request: FinetuneRequest, environ: dict[str, str] | None = None
) -> int:
    world = world_from(os.environ if environ is None else environ)
    try:
        _check(settings, request, world)
        settings, notes = random_base_defaults(settings, request)
        device = decide(
            request.device or settings.forecast.device, settings.finetune.precision, world
        )
        refusal = lora_refusal() if request.adapters else None
        if request.qlora:
            refusal = refusal or qlora_refusal(device.device)
        if refusal is not None:
            raise LoraUnavailable(refusal)
        join(world, device.device)
        try:
            folder = RunFolder(request.out)
            return run_session(Session(settings, request, world, device, folder, notes))
        finally:
            leave(world)
    except tuple(kind for kind, _ in _EXITS) as error:
        code = next(code for kind, code in _EXITS if isinstance(error, kind))
        _say(world, f"trader finetune: {error}")
        return code


def _check(settings: Settings, request: FinetuneRequest, world: World) -> None:
    finetune = settings.finetune
    if finetune.batch_size % world.size:
        raise SettingsRefused(
            f"finetune.batch_size = {finetune.batch_size} does not divide among {world.size} "
            "processes: the global batch stays as configured whatever the world size, so give "
            "a multiple of the number of processes"
        )
    if request.model == "toto" and "close" not in settings.forecast.toto.variates:
        raise SettingsRefused("forecast.toto.variates lacks close, which the evaluation scores")


def _say(world: World, text: str) -> None:
    if world.main:
        sys.stderr.write(text.rstrip() + "\n")
